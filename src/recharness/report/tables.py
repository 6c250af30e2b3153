"""Score rows → one table per task, written as JSON, Markdown and CSV.

Column order and the higher/lower-is-better marker come from the metric
registry (recharness.metrics.registry). Headers of the tables people read
(scores.md, the terminal, report.html) carry the marker: "HR@10 ↑",
"RMSE ↓"; scores.csv and scores.json keep the bare metric names, so
programs reading them see the same keys as before.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict
from pathlib import Path

from rich.markup import escape

from recharness.metrics.registry import header, is_hidden, lead_order
from recharness.tasks.base import ScoreRow

def columns(rows: list[ScoreRow]) -> list[str]:
    """The metric columns of `rows`: the registry's leading metrics in its order, then the rest as first
    seen; hidden bookkeeping metrics left out (they stay in scores.json)."""
    seen: list[str] = []
    for r in rows:
        for k in r.metrics:
            if k not in seen and not is_hidden(k):
                seen.append(k)
    lead = lead_order()
    return [c for c in lead if c in seen] + [c for c in seen if c not in lead]


def fmt(v) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        if 0 < abs(v) < 0.001:  # a trained model's latency in seconds: keep its digits
            return f"{v:.2e}"
        return f"{v:.3f}" if abs(v) < 100 else f"{v:.1f}"
    return str(v)


def to_markdown(rows: list[ScoreRow]) -> str:
    out = []
    for task in dict.fromkeys(r.task for r in rows):
        trs = [r for r in rows if r.task == task]
        cols = columns(trs)
        out.append(f"### {task} (n = {trs[0].n})\n")
        out.append("| method | " + " | ".join(map(header, cols)) + " |")
        out.append("|---|" + "---:|" * len(cols))
        for r in trs:
            name = escape(r.method + (" (ref)" if r.kind == "reference" else ""))
            out.append(f"| {name} | " + " | ".join(fmt(r.metrics.get(c)) for c in cols) + " |")
        out.append("")
        for r in trs:
            bd = r.extra.get("breakdown")
            if bd:
                out.append(breakdown_markdown(f"{task}: {r.method} by group", bd))
    return "\n".join(out)


def breakdown_markdown(title: str, breakdown: dict[str, dict[str, float]]) -> str:
    """A task's per-group metrics ({group: {metric: value}}) as one Markdown table."""
    cols: list[str] = []
    for m in breakdown.values():
        cols += [c for c in m if c not in cols]
    lines = [f"#### {title}\n", "| group | " + " | ".join(map(header, cols)) + " |", "|---|" + "---:|" * len(cols)]
    for g, m in breakdown.items():
        lines.append(f"| {g} | " + " | ".join(fmt(m.get(c)) for c in cols) + " |")
    return "\n".join(lines) + "\n"


def to_rich(rows: list[ScoreRow]) -> list:
    """One rich Table per task, for the terminal (Markdown wraps badly there)."""
    from rich.table import Table

    tables = []
    for task in dict.fromkeys(r.task for r in rows):
        trs = [r for r in rows if r.task == task]
        cols = columns(trs)
        t = Table(title=f"{task} (n = {trs[0].n})", title_justify="left")
        t.add_column("method")
        for c in cols:
            t.add_column(escape(header(c)), justify="right")
        for r in trs:
            name = escape(r.method + (" (ref)" if r.kind == "reference" else ""))
            t.add_row(name, *(fmt(r.metrics.get(c)) for c in cols))
        tables.append(t)
    return tables


def write_scores(rows: list[ScoreRow], out: Path, extra_md: str | None = None) -> dict[str, Path]:
    """scores.json/.md/.csv, each replaced atomically (a crash leaves the old file or the new)."""
    from recharness.runner.jsonl import atomic_write_text

    paths = {"json": out / "scores.json", "md": out / "scores.md", "csv": out / "scores.csv"}
    atomic_write_text(paths["json"], json.dumps([asdict(r) for r in rows], indent=2))
    md = to_markdown(rows)
    if extra_md:
        md += "\n## In the paper's layout\n\n" + extra_md + "\n"
    atomic_write_text(paths["md"], md)
    allcols = columns(rows)
    buf = io.StringIO(newline="")
    w = csv.writer(buf)
    w.writerow(["task", "method", "kind", "n", *allcols])
    for r in rows:
        w.writerow([r.task, r.method, r.kind, r.n, *(r.metrics.get(c, "") for c in allcols)])
    atomic_write_text(paths["csv"], buf.getvalue())
    return paths


def load_scores(out: Path) -> list[ScoreRow]:
    p = out / "scores.json"
    if not p.exists():
        from recharness.errors import ConfigError

        raise ConfigError(f"no scores in {out}: run `recharness score` first")
    return [ScoreRow(**d) for d in json.loads(p.read_text())]
