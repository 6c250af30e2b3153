"""A self-contained HTML report: tables, a bar chart per task, sample answers.

Model output and dataset text are untrusted: everything is escaped, nothing
is rendered as markup or script.
"""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path

from recharness.report.tables import ci_note, cells, columns, header
from recharness.runner.jsonl import atomic_write_text, read_jsonl
from recharness.tasks.base import ScoreRow


def _bar_chart(rows: list[ScoreRow], metric: str) -> str | None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = [(r.method, r.metrics[metric]) for r in rows if isinstance(r.metrics.get(metric), (int, float))]
    if not pts:
        return None
    fig, ax = plt.subplots(figsize=(6, 0.4 * len(pts) + 1))
    ax.barh([p[0] for p in pts][::-1], [p[1] for p in pts][::-1], color="#4878a8")
    ax.set_xlabel(metric)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def _latency_chart(rows: list[ScoreRow], metric: str) -> str | None:
    """Quality against latency per sample (log scale): RecBench's cost/benefit view, for any task
    whose rows record latency (LLMs from their requests, trained models from the `train` stage)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = [(r.method, r.kind, r.metrics[metric], r.metrics["latency_s"]) for r in rows
           if isinstance(r.metrics.get(metric), (int, float)) and (r.metrics.get("latency_s") or 0) > 0]
    if len(pts) < 2:
        return None
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for kind, color, label in (("model", "#c44e52", "LLM"), ("reference", "#4878a8", "trained / reference")):
        sel = [p for p in pts if p[1] == kind]
        if sel:
            ax.scatter([p[3] * 1000 for p in sel], [p[2] for p in sel], color=color, label=label)
            for name, _, y, x in sel:
                ax.annotate(name, (x * 1000, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_xlabel("latency per sample (ms, log scale)")
    ax.set_ylabel(metric)
    ax.legend(fontsize=8)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def write_report(rows: list[ScoreRow], out: Path, n_examples: int = 5, sections: dict[str, str] | None = None) -> Path:
    """`sections`: extra titled blocks of preformatted text (e.g. a suite's paper-layout tables)."""
    e = html.escape
    parts = ["<!doctype html><meta charset='utf-8'><title>recharness report</title>",
             "<style>body{font-family:sans-serif;max-width:1100px;margin:auto}table{border-collapse:collapse}"
             "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}td:first-child{text-align:left}"
             "pre{white-space:pre-wrap;background:#f6f6f6;padding:6px}</style>",
             f"<h1>recharness report</h1><p>{e(str(out))}</p>"]
    for task in dict.fromkeys(r.task for r in rows):
        trs = [r for r in rows if r.task == task]
        cols = columns(trs)
        parts.append(f"<h2>{e(task)} (n = {trs[0].n})</h2><table><tr><th>method</th>"
                     + "".join(f"<th>{e(header(c))}</th>" for c in cols) + "</tr>")
        for r, cs in zip(trs, cells(trs, cols)):
            name = r.method + (" (ref)" if r.kind == "reference" else "")
            parts.append(f"<tr><td>{e(name)}</td>" + "".join(f"<td><b>{e(t)}</b></td>" if top else f"<td>{e(t)}</td>"
                                                            for t, top in cs) + "</tr>")
        parts.append("</table>")
        note = ci_note(trs)
        if note:
            parts.append(f"<p><small>{e(note)}</small></p>")
        # the headline metric of the task: the first of these the table has (seqrec: NDCG@10, not HR@1)
        key = next((c for p in ("AUC", "NDCG@10", "NDCG", "HR", "RMSE", "ROUGE", "tau") for c in cols
                    if c.startswith(p)), None)
        img = _bar_chart(trs, key) if key else None
        if img:
            parts.append(f"<p><img alt='{e(key)}' src='data:image/png;base64,{img}'></p>")
        scatter = _latency_chart(trs, key) if key else None
        if scatter:
            parts.append(f"<p><img alt='{e(key)} vs latency' src='data:image/png;base64,{scatter}'></p>")
    for title, text in (sections or {}).items():
        parts.append(f"<h2>{e(title)}</h2><pre>{e(text)}</pre>")
    pred_dir = out / "predictions"
    for pf in sorted(pred_dir.glob("*.jsonl")) if pred_dir.exists() else []:
        parts.append(f"<h2>Example answers: {e(pf.stem)}</h2>")
        for i, r in enumerate(read_jsonl(pf)):
            if i >= n_examples:
                break
            parts.append(f"<h3>{e(str(r.get('id')))}</h3><pre>{e(str(r.get('output', '')))}</pre>")
    path = out / "report.html"
    atomic_write_text(path, "\n".join(parts))
    return path
