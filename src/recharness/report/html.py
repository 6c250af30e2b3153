"""Self-contained HTML pages: one run's report.html and the cross-run leaderboard.

One file each, no script and nothing fetched: charts are PNG data URIs (matplotlib, Agg), styles
inline. Model output and dataset text are untrusted: everything is escaped, nothing is rendered as
markup or script.

report.html, per run: what was run (commands, seed, options, model identities, software versions,
paths relative to the data home), per task the score table with 95% intervals, a chart of the
task's headline metric (`Task.headline`) by method with error bars, charts by group where the task
has a breakdown (RecBench+: number of conditions, with/without history; PerRecBench: difficulty),
quality against latency where latency is recorded, the invalid answers by reason, and example
answers with the prompt's key facts, the target and whether it was hit.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import platform
import re
from collections import Counter
from pathlib import Path
from typing import NamedTuple

from recharness.core.io import atomic_write_text, read_jsonl, write_set
from recharness.core.paths import shown_dataset
from recharness.core.rundir import RunDir
from recharness.core.types import ScoreRow, is_number
from recharness.report import fairness
from recharness.report.tables import (
    cells,
    ci_note,
    columns,
    coverage_text,
    display_name,
    finetune_label,
    fmt,
    header,
    table_name,
    value_text,
)
from recharness.tasks.base import listed_hits, listed_rank

e = html.escape

#: the headline metric of a task without a `headline` attribute: the first of these its table has
PRIORITY = ("AUC", "NDCG@10", "NDCG", "HR", "tau", "P", "RMSE", "ROUGE", "BLEU")

STYLE = """
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;max-width:1180px;margin:0 auto;padding:12px 20px;
  color:#222;line-height:1.4;overflow-wrap:anywhere}
h1{font-size:1.6em;margin:.3em 0}h2{border-bottom:2px solid #4878a8;padding-bottom:2px;margin-top:1.6em}
h3{margin:1.1em 0 .4em}
.scroll{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;margin:.4em 0;font-size:.86em}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:right;white-space:nowrap;vertical-align:top}
td small.ci{display:block;color:#666;font-size:.76em;font-weight:normal;white-space:normal}
td small.id{display:block;color:#777;font-size:.78em;white-space:normal;max-width:260px;overflow-wrap:anywhere}
td.method{white-space:normal;min-width:11em;max-width:18em}
th{font-size:.85em;white-space:normal;vertical-align:bottom;overflow-wrap:normal;word-break:normal}
th:first-child{max-width:none}
td:first-child,th:first-child{text-align:left}
th{background:#eef2f7}
tr.ref td:first-child{color:#4878a8}
.meta td{text-align:left;white-space:normal}
.meta td:first-child{font-weight:600;white-space:nowrap}
pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#f6f6f6;padding:6px;margin:.3em 0;max-width:100%}
code{background:#f3f3f3;padding:0 3px}
.charts{display:flex;flex-wrap:wrap;gap:12px}
.charts figure{margin:0;max-width:100%}
.nochart{color:#666;font-size:.9em}
table.paper td{white-space:normal}
.charts img{max-width:100%;height:auto;border:1px solid #e3e3e3}
figcaption{font-size:.85em;color:#555}
.ex{border:1px solid #ddd;border-radius:4px;padding:6px 10px;margin:8px 0}
.hit{color:#1a7f37;font-weight:600}.miss{color:#b42318;font-weight:600}.na{color:#777}
small,.note{color:#555}
"""


# ------------------------------------------------------------------ helpers


def display_path(p: Path | str | None) -> str:
    """See recharness.paths.shown_path: relative to the data home, never a machine's absolute path."""
    from recharness.core.paths import shown_path

    return shown_path(p)


_number = is_number


def _suite_task(suite: str | None, task: str):
    """The suite's task, or None when it is not known here (a moved run, a renamed task, a plug-in suite not
    installed): the report then falls back to its generic rules."""
    if not suite:
        return None
    try:
        from recharness.tasks.registry import get_task

        return get_task(suite, task)
    except Exception:  # noqa: BLE001 - any failure to find the task: fall back, the report still renders
        return None


def headline_metric(suite: str | None, task: str, cols: list[str]) -> str | None:
    """The task's declared headline (`Task.headline`) if its table has it, else the first of PRIORITY."""
    h = getattr(_suite_task(suite, task), "headline", None)
    if h and h in cols:
        return h
    # a prefix names a family ("NDCG" → NDCG@5), never a qualified metric ("NDCG@10 order spread", "HR@10 head")
    return next((c for p in PRIORITY for c in cols if c == p or (c.startswith(p) and " " not in c)), None)


def _png(fig) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    # labels are literal text: a "$" in a method or run name (scores.json, a folder) is no mathtext
    matplotlib.rcParams["text.parse_math"] = False
    import matplotlib.pyplot as plt

    return plt


def _unit_range(values: list[float], metric: str) -> tuple[float, float] | None:
    """Axis limits for metrics on [0, 1] (or [-1, 1] for tau) so an all-zero chart is not drawn from -0.04."""
    if not values:
        return None
    lo, hi = min(values), max(values)
    if metric.startswith("tau"):
        return (-1.0, 1.0) if lo >= -1 and hi <= 1 else None
    if lo >= 0 and hi <= 1 and not metric.startswith(("RMSE", "MAE", "logloss", "BLEU", "ROUGE")):
        return (0.0, 1.0)
    if lo >= 0:
        return (0.0, hi * 1.1 if hi > 0 else 1.0)
    return None


class Palette:
    """One colour per method across every chart of a page: models in distinct colours, references in
    distinct greys (a reader follows a method from chart to chart by its colour)."""

    MODELS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#bcbd22")
    #: the references' grey range (0-255 per channel): the lightest is still a visible line or point on white
    GREYS = (0x30, 0x8c)
    #: references share greys, so lines also differ by marker and dash (by the method's place, as its grey)
    MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h")
    DASHES = ("-", "--", "-.", ":")

    def style(self, method: str) -> dict:
        """Marker and line style of `method`'s line: fixed per method on the page, like its colour."""
        k = list(self.colours).index(method) if method in self.colours else 0
        return {"marker": self.MARKERS[k % len(self.MARKERS)],
                "linestyle": self.DASHES[(k // len(self.MARKERS)) % len(self.DASHES)]}

    def __init__(self, rows: list[ScoreRow]):
        models = list(dict.fromkeys(r.method for r in rows if r.kind != "reference"))
        refs = list(dict.fromkeys(r.method for r in rows if r.kind == "reference"))
        self.colours = {m: self.MODELS[i % len(self.MODELS)] for i, m in enumerate(models)}
        for j, m in enumerate(refs):  # evenly spaced greys, dark to mid (#8c8c8c still reads as a line on white)
            g = int(self.GREYS[0] + (self.GREYS[1] - self.GREYS[0]) * j / max(1, len(refs) - 1))
            self.colours[m] = f"#{g:02x}{g:02x}{g:02x}"

    def __call__(self, row: ScoreRow) -> str:
        return self.colours.get(row.method, "#999999")


#: what a chart function returns: the PNG and, for the page's checks, how many marks are not zero and the
#: colour of each method it draws
Chart = tuple[str, int, dict[str, str]]


def _all_zero(values: list[float]) -> bool:
    return all(v == 0 for v in values)


def _bar_chart(rows: list[ScoreRow], metric: str, palette: Palette) -> Chart | None:
    """Metric by method, horizontal bars with the 95% interval as error bars, in the page's colours."""
    pts = [r for r in rows if _number(r.metrics.get(metric))]
    if not pts or _all_zero([r.metrics[metric] for r in pts] + [r.ci[metric]["hi"] for r in pts if metric in r.ci]):
        return None
    plt = _plt()
    pts = pts[::-1]
    fig, ax = plt.subplots(figsize=(6.4, 0.42 * len(pts) + 1.1))
    vals = [r.metrics[metric] for r in pts]
    colors = [palette(r) for r in pts]
    labels = [display_name(r) for r in pts]
    ax.barh(range(len(pts)), vals, color=colors, tick_label=labels)
    fairness.interval_bars(ax, range(len(pts)), [(r.ci.get(metric) or {}).get("lo") for r in pts],
                           [(r.ci.get(metric) or {}).get("hi") for r in pts], horizontal=True, capsize=3, ecolor="#333")
    rng = _unit_range(vals + [r.ci[metric]["hi"] for r in pts if metric in r.ci], metric)
    if rng:
        ax.set_xlim(*rng)
    ax.set_xlabel(header(metric) + ("  (error bars: 95% interval)" if any(metric in r.ci for r in pts) else ""))
    ax.grid(axis="x", alpha=.3)
    fig.tight_layout()
    return _png(fig), sum(v != 0 for v in vals), {r.method: palette(r) for r in pts}


def _latency_points(rows: list[ScoreRow], metric: str) -> list[ScoreRow]:
    """The rows with a value of `metric` and a recorded latency (the latency chart's points)."""
    return [r for r in rows if _number(r.metrics.get(metric)) and _number(r.metrics.get("latency_s"))
            and r.metrics["latency_s"] > 0]


def _latency_chart(rows: list[ScoreRow], metric: str, palette: Palette) -> Chart | None:
    """Quality against latency per sample (log scale): RecBench's cost/benefit view, for any task
    whose rows record latency (LLMs from their requests, trained models from the `train` stage).
    Points are named by a legend (models: circles in colour, references: greys, each its own marker), never by
    labels that overlap."""
    pts = _latency_points(rows, metric)
    if len(pts) < 2 or _all_zero([r.metrics[metric] for r in pts]):
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    for r in pts:
        # a latency timed with other requests in flight holds the server's queue: said in the legend
        load = r.metrics.get("latency_concurrency")
        label = display_name(r) + (f" (timed at concurrency {load:g})" if _number(load) and load > 1 else "")
        ax.scatter([r.metrics["latency_s"] * 1000], [r.metrics[metric]], color=palette(r), s=36,
                   marker="o" if r.kind != "reference" else palette.style(r.method)["marker"], label=label,
                   edgecolors="#222", linewidths=.4, clip_on=False)
    ax.set_xscale("log")
    _plain_log_axis(ax.xaxis, [r.metrics["latency_s"] * 1000 for r in pts])
    ax.margins(x=0.08, y=0.1)
    ax.set_xlabel("latency per sample (ms, log scale)")
    ax.set_ylabel(header(metric))
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, frameon=False)
    ax.grid(alpha=.3)
    fig.tight_layout()
    return _png(fig), sum(r.metrics[metric] != 0 for r in pts), {r.method: palette(r) for r in pts}


def _plain(x: float) -> str:
    """A tick value as a plain decimal (0.004, 0.4, 2, 1,500), never 4×10⁻¹."""
    if x <= 0:
        return "0"
    if x >= 1:
        return f"{x:,.0f}" if x >= 10 or x == int(x) else f"{x:.1f}"
    digits = max(1, -math.floor(math.log10(x)))
    return f"{x:.{digits}f}"


def _plain_log_axis(axis, values: list[float]) -> None:
    """A log axis labelled in plain decimals: the powers of ten, and 2 and 5 times them when the values span
    less than two decades (else those stay unlabelled, so labels never crowd)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(base=10))
    axis.set_major_formatter(FuncFormatter(lambda x, _: _plain(x)))
    lo, hi = min(values), max(values)
    if hi / lo < 100:
        axis.set_minor_locator(LogLocator(base=10, subs=(2.0, 5.0)))
        axis.set_minor_formatter(FuncFormatter(lambda x, _: _plain(x)))
    else:
        axis.set_minor_formatter(NullFormatter())


def _families(breakdown: dict) -> dict[str, list[str]]:
    """Breakdown keys by family: "conditions=2" → conditions; PerRecBench's easy/medium/hard → difficulty."""
    fam: dict[str, list[str]] = {}
    for k in breakdown:
        f = k.split("=", 1)[0] if "=" in k else ("difficulty" if k in ("easy", "medium", "hard") else "group")
        fam.setdefault(f, []).append(k)
    return fam


def _group_order(key: str) -> tuple:
    """A breakdown key's place: easy / medium / hard as such, numbers as numbers ("conditions=10" after
    "conditions=2"), other values by name; keys of one family together."""
    if key in _LEVELS:
        return ("difficulty", 0, _LEVELS.index(key), "")
    fam, _, val = key.partition("=")
    try:
        return (fam, 0, float(val), "")
    except ValueError:
        return (fam, 1, 0.0, val)


_LEVELS = ("easy", "medium", "hard")

#: breakdown families drawn as charts, in this order (others stay in the per-group tables)
CHART_FAMILIES = ("conditions", "history", "difficulty", "popularity")


def _group_ci(r: ScoreRow, metric: str, key: str) -> dict | None:
    """A group's 95% interval: the score stage's `breakdown_ci`, or for PerRecBench's levels `tau_<level>`."""
    ci = ((r.extra.get("breakdown_ci") or {}).get(key) or {}).get(metric)
    if ci is None and key in ("easy", "medium", "hard"):
        ci = (r.ci or {}).get(f"{metric}_{key}")
    return ci if ci and _number(ci.get("lo")) and _number(ci.get("hi")) else None


def _group_bars(ax, r: ScoreRow, metric: str, keys: list[str], at, ys: list[float], **style) -> None:
    """Each group's 95% interval drawn from lo to hi at positions `at` (none where there is none)."""
    cis = [_group_ci(r, metric, k) if _number(y) else None for k, y in zip(keys, ys)]
    fairness.interval_bars(ax, list(at), [c["lo"] if c else None for c in cis], [c["hi"] if c else None for c in cis],
                           horizontal=False, **style)


def _group_chart(rows: list[ScoreRow], metric: str, family: str, keys: list[str], palette: Palette) -> Chart | None:
    """The metric per group value (x) for each method, with its 95% interval as error bars: a line
    for the number of conditions, bars otherwise."""
    series = []
    for r in rows:
        bd = r.extra.get("breakdown") or {}
        ys = [bd.get(k, {}).get(metric) for k in keys]
        if any(_number(y) for y in ys):
            series.append((r, [y if _number(y) else float("nan") for y in ys]))
    if not series or _all_zero([y for _, ys in series for y in ys if _number(y)]):
        return None
    plt = _plt()
    labels = [k.split("=", 1)[-1] for k in keys]
    fig, ax = plt.subplots(figsize=(5.2, 3.4))
    if family == "conditions":
        for r, ys in series:
            ax.plot(range(len(keys)), ys, marker="o", linestyle="-" if r.kind == "model" else "--", color=palette(r),
                    label=display_name(r), clip_on=False)
            _group_bars(ax, r, metric, keys, range(len(keys)), ys, capsize=3, ecolor=palette(r), clip_on=False)
        ax.set_xticks(range(len(keys)), labels)
        ax.set_xlabel("number of conditions")
    else:
        w = 0.8 / len(series)
        for i, (r, ys) in enumerate(series):
            xs = [j + i * w - 0.4 + w / 2 for j in range(len(keys))]
            ax.bar(xs, ys, width=w, color=palette(r), label=display_name(r))
            _group_bars(ax, r, metric, keys, xs, ys, capsize=2, ecolor="#333")
        ax.set_xticks(range(len(keys)), labels)
        ax.set_xlabel(family)
    bounds = [c[b] for r, _ in series for k in keys for c in [_group_ci(r, metric, k)] if c for b in ("lo", "hi")]
    rng = _unit_range([y for _, ys in series for y in ys if _number(y)] + bounds, metric)
    if rng:
        ax.set_ylim(*rng)
    ax.set_ylabel(header(metric))
    ax.legend(fontsize=7)
    ax.grid(axis="y", alpha=.3)
    fig.tight_layout()
    nonzero = sum(_number(y) and y != 0 for _, ys in series for y in ys)
    return _png(fig), nonzero, {r.method: palette(r) for r, _ in series}


def _figure(chart: Chart | None, alt: str, caption: str) -> str:
    """A chart with what the page's checks read: its non-zero marks and each method's colour."""
    if not chart:
        return ""
    img, nonzero, colours = chart
    return (f"<figure data-nonzero='{nonzero}' data-colours='{e(json.dumps(colours, sort_keys=True))}'>"
            f"<img alt='{e(alt)}' src='data:image/png;base64,{img}'><figcaption>{e(caption)}</figcaption></figure>")


def _ci_text(row: ScoreRow, metric: str) -> str:
    """The interval as [lo, hi] (intervals are often asymmetric); "" without one (the table's note says why)."""
    ci = row.ci.get(metric) if row.ci else None
    if ci and _number(ci.get("lo")) and _number(ci.get("hi")):
        return f"[{fmt(ci['lo'])}, {fmt(ci['hi'])}]"
    return ""


def _no_interval_note(rows: list[ScoreRow]) -> str:
    """Why cells have no interval, once per table (not in every cell)."""
    whys = sorted({w for r in rows for w in ((r.extra or {}).get("no_interval") or {}).values()})
    if not whys:
        return ""
    few = [w for w in whys if w.startswith("n too small")]
    other = [w for w in whys if w not in few]
    parts = []
    if few:
        parts.append("No interval where a metric rests on fewer than 5 independent units (a bootstrap of so few "
                     f"claims more than they show): {'; '.join(few)}.")
    if other:
        parts.append(f"No interval elsewhere: {'; '.join(other)}.")
    return " ".join(parts)


def identity_text(model: dict | None) -> str:
    """What a model row is, in one short line: backend and model, its file, quantisation, hash prefix."""
    if not isinstance(model, dict) or not model:
        return ""
    parts = [f"{model.get('backend', '?')}:{model.get('model', '?')}"]
    for k in ("general_name", "file", "quantization", "sha256"):
        v = model.get(k)
        if v and str(v) not in parts[0]:
            parts.append(str(v)[:12] if k == "sha256" else str(v))
    ft = model.get("finetune")
    if isinstance(ft, dict):
        parts.append(f"fine-tune of {ft.get('base')} ({ft.get('items') or 'text'} items)")
    return " · ".join(parts)


def _row_n(r: ScoreRow) -> str:
    """The samples a row rests on, and of how many where it is partial."""
    of = (r.coverage or {}).get("of")
    return f"{r.n} of {of}" if of is not None and of != r.n else str(r.n)


def _score_table(rows: list[ScoreRow], cols: list[str], *, identities: bool = True, n_column: bool = False) -> str:
    """Methods by metric: each cell the value over its [lo, hi] interval; a model's identity under its name.
    `n_column`: each row's n in a column (a leaderboard's rows from builds of different sizes)."""
    def th(c: str) -> str:  # a long metric name may break after its underscores
        return "<th>" + e(header(c)).replace("_", "_<wbr>") + "</th>"

    out = ["<div class='scroll'><table><tr><th>method</th>" + ("<th>n</th>" if n_column else "")
           + "".join(th(c) for c in cols) + "</tr>"]
    for r, cs in zip(rows, cells(rows, cols)):
        cls = " class='ref'" if r.kind == "reference" else ""
        ident = identity_text(r.extra.get("model")) if r.kind != "reference" and identities else ""
        tds = []
        for c, (_, top) in zip(cols, cs):
            v, ci = fmt(r.metrics.get(c)), _ci_text(r, c)
            body = (f"<b>{e(v)}</b>" if top else e(v)) + (f"<small class='ci'>{e(ci)}</small>" if ci else "")
            tds.append(f"<td>{body}</td>")
        out.append(f"<tr{cls}><td class='method'>{e(table_name(r))}"
                   + (f"<small class='id'>{e(ident)}</small>" if ident else "") + "</td>"
                   + (f"<td>{e(_row_n(r))}</td>" if n_column else "") + "".join(tds) + "</tr>")
    out.append("</table></div>")
    return "".join(out)


def _group_cell(r: ScoreRow, group: str, metrics: dict, metric: str) -> str:
    ci = _group_ci(r, metric, group)
    text = fmt(metrics.get(metric))
    return f"{text} [{fmt(ci['lo'])}, {fmt(ci['hi'])}]" if ci and _number(metrics.get(metric)) else text


def _breakdown_tables(rows: list[ScoreRow]) -> str:
    parts = []
    for r in rows:
        bd = r.extra.get("breakdown")
        if not bd:
            continue
        cols: list[str] = []
        for m in bd.values():
            cols += [c for c in m if c not in cols]
        parts.append(f"<h4>{e(display_name(r))} by group</h4><div class='scroll'><table><tr><th>group</th>"
                     + "".join(f"<th>{e(header(c)).replace('_', '_<wbr>')}</th>" for c in cols) + "</tr>")
        for g, m in bd.items():
            parts.append(f"<tr><td>{e(str(g))}</td>" + "".join(f"<td>{e(_group_cell(r, g, m, c))}</td>" for c in cols)
                         + "</tr>")
        parts.append("</table></div>")
    if not parts:
        return ""
    return "<details><summary>per-group tables</summary>" + "".join(parts) + "</details>"


def task_section(rows: list[ScoreRow], suite: str | None, task: str, *, title: str | None = None,
                 link_runs: bool = False, palette: Palette | None = None) -> list[str]:
    """A task's table (headline metric first) with intervals, its note, and its charts."""
    palette = palette or Palette(rows)
    cols = columns(rows)
    key = headline_metric(suite, task, cols)
    if key in cols:
        cols = [key] + [c for c in cols if c != key]
    ns = sorted({(r.coverage or {}).get("of", r.n) for r in rows})
    n = f"{ns[0]}" if len(ns) == 1 else f"{ns[0]}–{ns[-1]}"  # a leaderboard's builds may differ in size
    from recharness.metrics.registry import wants_ci

    # the quality metrics (with intervals) first; counts, costs and timings in a narrow table of their own
    quality = [c for c in cols if wants_ci(c)] or cols
    counts = [c for c in cols if c not in quality]
    # rows of builds of different sizes: each row's own n beside it, not only the range in the heading
    parts = [f"<h2>{e(title or task)} <small>(n = {n})</small></h2>", _score_table(rows, quality, n_column=len(ns) > 1)]
    note = ci_note(rows)
    if note:
        parts.append(f"<p class='note'><small>{e(note)} Cells: the value, its 95% interval [lo, hi] below it."
                     "</small></p>")
    why = _no_interval_note(rows)
    if why:
        parts.append(f"<p class='note'><small>{e(why)}</small></p>")
    if counts:
        parts.append("<p class='note'><small>Counts, costs and timings:</small></p>"
                     + _score_table(rows, counts, identities=False))
    figs = []
    nochart = []
    if key:
        bar = _bar_chart(rows, key, palette)
        if bar is None:
            nochart.append(f"No chart of {key}: it is 0 (or missing) for every method.")
        figs.append(_figure(bar, key, f"{header(key)} by method (the task's headline metric)"))
        bd_rows = [r for r in rows if r.extra.get("breakdown")]
        if bd_rows:
            # every row's groups (a group only some rows have is drawn too), in a natural order
            fams = _families(sorted({k for r in bd_rows for k in r.extra["breakdown"]}, key=_group_order))
            bmetric = key if any(key in m for r in bd_rows for m in r.extra["breakdown"].values()) else None
            for fam in CHART_FAMILIES:
                if bmetric and fam in fams and 2 <= len(fams[fam]) <= 8:
                    chart = _group_chart(bd_rows, bmetric, fam, fams[fam], palette)
                    if chart is None:
                        nochart.append(f"No chart of {bmetric} by {fam}: it is 0 (or missing) for every "
                                       "method and group.")
                    bare = sorted({k.split("=", 1)[-1] for r in bd_rows for k in fams[fam]
                                   if bmetric in ((r.extra.get("breakdown_no_interval") or {}).get(k) or {})})
                    figs.append(_figure(chart, f"{key} by {fam}", f"{header(bmetric)} by {fam}" + (
                        f" (no error bar where a group has fewer than 5 independent units: {', '.join(bare)})"
                        if bare else "")))
        chart = _latency_chart(rows, key, palette)
        if chart is None and len(_latency_points(rows, key)) >= 2:  # (fewer than two timed methods: no comparison)
            nochart.append(f"No chart of {key} against latency: {key} is 0 for every timed method.")
        figs.append(_figure(chart, f"{key} vs latency", f"{header(key)} against latency per sample"))
    figs = [f for f in figs if f]
    if figs:
        parts.append("<div class='charts'>" + "".join(figs) + "</div>")
    for line in nochart:
        parts.append(f"<p class='nochart'>{e(line)}</p>")
    parts.append(_breakdown_tables(rows))
    return parts


_MD_ROW = re.compile(r"^\s*\|(.*)\|\s*$")
_MD_RULE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")
_MD_BOLD = re.compile(r"\*\*(.+?)\*\*")


def _md_inline(text: str) -> str:
    """Escaped text with **bold** kept (the paper layouts bold group headings and best values)."""
    return _MD_BOLD.sub(r"<b>\1</b>", e(text.replace("\\|", "|")))


def markdown_html(text: str) -> str:
    """A suite's paper-layout Markdown as HTML: pipe tables as real tables, headings, paragraphs;
    everything escaped (no markup of the text's own gets through)."""
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if _MD_ROW.match(line) and i + 1 < len(lines) and _MD_RULE.match(lines[i + 1]):
            def cells(row: str) -> list[str]:
                return [c.strip() for c in re.split(r"(?<!\\)\|", _MD_ROW.match(row).group(1))]
            head = cells(line)
            body = []
            i += 2
            while i < len(lines) and _MD_ROW.match(lines[i]):
                body.append(cells(lines[i]))
                i += 1
            out.append("<div class='scroll'><table class='paper'><tr>" + "".join(f"<th>{_md_inline(c)}</th>" for c in head)
                       + "</tr>" + "".join("<tr>" + "".join(f"<td>{_md_inline(c)}</td>" for c in r) + "</tr>" for r in body)
                       + "</table></div>")
            continue
        if line.startswith("#"):
            level = min(6, len(line) - len(line.lstrip("#")) + 1)
            out.append(f"<h{level}>{_md_inline(line.lstrip('#').strip())}</h{level}>")
        elif line.strip():
            out.append(f"<p class='note'><small>{_md_inline(line.strip())}</small></p>")
        i += 1
    return "".join(out)


#: lines of models the page's palette does not know (a fine-tune no run row is named after): greys, as references
_OTHER_GREYS = ("#505050", "#7a7a7a", "#353535", "#8c8c8c")


def _curve_colour(palette: Palette, name: str, k: int) -> tuple[str, dict]:
    """A learning curve's colour and line style: the method's own on the page, else a grey and a marker of its own."""
    if name in palette.colours:
        return palette.colours[name], palette.style(name)
    return _OTHER_GREYS[k % len(_OTHER_GREYS)], {"marker": Palette.MARKERS[(k + 3) % len(Palette.MARKERS)],
                                                  "linestyle": Palette.DASHES[(k + 1) % len(Palette.DASHES)]}


def _curves_chart(series: dict[str, list[tuple[float, float]]], palette: Palette, *, xlabel: str, ylabel: str,
                  whole_x: bool = True) -> Chart | None:
    """Learning curves, one line per model ({name: [(x, y)]}), in the page's colours; None when no value is
    non-zero (nothing to see: the caller says so in a line)."""
    series = {k: [(x, y) for x, y in v if _number(x) and _number(y)] for k, v in series.items()}
    series = {k: v for k, v in series.items() if v}
    nonzero = sum(y != 0 for v in series.values() for _, y in v)
    if not nonzero:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    colours: dict[str, str] = {}
    for k, (name, pts) in enumerate(series.items()):
        colour, style = _curve_colour(palette, name, k)
        colours[name] = colour
        if len(pts) > 40:  # a point per step: a line, its markers would hide it
            style = {**style, "marker": None}
        ax.plot([x for x, _ in pts], [y for _, y in pts], markersize=4, linewidth=1.4, color=colour, label=name,
                clip_on=False, **style)
    if whole_x:
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # epochs are whole: no 2.5
    ax.margins(x=0.04, y=0.08)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, frameon=False)
    ax.grid(alpha=.3)
    fig.tight_layout()
    return _png(fig), nonzero, colours


def _rqvae_series(dataset: str | None, owners: dict[str, dict]) -> dict[str, list[tuple[float, float]]]:
    """{"rqvae (OWNER)": [(epoch, loss)]} of the RQ-VAEs behind the semantic IDs the run's models used (`owners`:
    {model: the semantic_ids record of its train.json / finetune.json}); a log no longer in the data home is
    left out."""
    from recharness.data.semantic_ids import read_train_log

    out: dict[str, list[tuple[float, float]]] = {}
    seen: dict[str, str] = {}
    for name, sid in owners.items():
        f = sid.get("train_log") if isinstance(sid, dict) else None
        if not (dataset and isinstance(f, str)):
            continue
        if f in seen:  # two models over the same codes: one curve, named after both
            out[f"{seen[f]}, {name}"] = out.pop(seen[f])
            seen[f] = f"{seen[f]}, {name}"
            continue
        rows = read_train_log(dataset, f)
        if rows:
            seen[f] = name
            out[name] = [(r.get("epoch"), r.get("loss")) for r in rows]
    return {f"rqvae ({k})": v for k, v in out.items()}


def _read_json(path: Path) -> dict:
    try:
        d = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    except (OSError, ValueError):
        return {}
    return d if isinstance(d, dict) else {}


class Curves(NamedTuple):
    """One learning-curve chart of a training section, and the line that stands for it when it has nothing to draw."""

    series: dict[str, list[tuple[float, float]]]
    axes: dict  # `_curves_chart`'s xlabel, ylabel, whole_x
    empty: str
    alt: str
    caption: str


def _rqvae_curves(series: dict[str, list[tuple[float, float]]], alt: str) -> Curves:
    return Curves(series, {"xlabel": "epoch", "ylabel": "RQ-VAE loss"},
                  "No RQ-VAE learning curve: its loss is 0 (or missing) in every epoch.", alt,
                  "the semantic IDs' RQ-VAE: training loss by epoch (reconstruction + commitment)")


def _curves_block(curves: list[Curves], palette: Palette) -> list[str]:
    """The charts side by side, then a line for each one with no non-zero value (reference models and fine-tunes
    alike)."""
    figs, nochart = [], []
    for c in curves:
        chart = _curves_chart(c.series, palette, **c.axes)
        if chart is None:
            nochart.append(c.empty)
        figs.append(_figure(chart, c.alt, c.caption))
    figs = [f for f in figs if f]
    parts = ["<div class='charts'>" + "".join(figs) + "</div>"] if figs else []
    return parts + [f"<p class='nochart'>{e(line)}</p>" for line in nochart]


def training_section(out: Path, palette: Palette) -> list[str]:
    """Learning curves of the run's trained reference models (`models/<name>/train_log.jsonl`: the validation
    metric per epoch, and how each run ended), of its fine-tunes (`finetuned/<name>/train_log.jsonl`: the
    training loss per step) and of the RQ-VAEs behind the semantic IDs they used (`sid-rqvae-*.train_log.jsonl`
    in the dataset's embeddings folder), one line each in its page colour. A chart with no non-zero value is a
    line saying so."""
    from recharness.finetune.export import read_info
    from recharness.runner import train_log

    rd = RunDir(out)
    dataset = _read_json(rd.build_json).get("dataset")
    model_dirs = rd.model_dirs()
    all_infos = {d.name: _read_json(rd.train_json(d.name)) for d in model_dirs}
    logs = {d.name: train_log.read(d) for d in model_dirs}
    logs = {k: v for k, v in logs.items() if v}
    infos = {k: all_infos[k] for k in logs if all_infos.get(k)}
    ref_sids = {k: i["semantic_ids"] for k, i in all_infos.items() if isinstance(i.get("semantic_ids"), dict)}
    ft_dirs = rd.finetuned_dirs()
    ft_logs = {d.name: train_log.read(d) for d in ft_dirs}
    ft_logs = {k: v for k, v in ft_logs.items() if v}
    ft_infos = {d.name: read_info(d) or {} for d in ft_dirs}
    ft_sids = {k: i["semantic_ids"] for k, i in ft_infos.items() if isinstance(i.get("semantic_ids"), dict)}
    parts: list[str] = []
    ref_rqvae = _rqvae_series(dataset, ref_sids)
    if logs or ref_rqvae:
        parts.append("<h2>Training of the reference models</h2>")
        curves = []
        for metric in dict.fromkeys(x["metric"] for v in logs.values() for x in v if x.get("metric")):
            series = {k: [(x.get("epoch"), x.get("valid")) for x in v] for k, v in logs.items()
                      if v and v[0].get("metric") == metric}
            curves.append(Curves(series, {"xlabel": "epoch", "ylabel": f"validation {metric}"},
                                 f"No learning curve of validation {metric}: it is 0 (or missing) in every epoch of "
                                 f"{', '.join(series)}.", f"learning curves {metric}",
                                 f"validation {metric} by epoch (the best epoch's weights are kept)"))
        if ref_rqvae:
            curves.append(_rqvae_curves(ref_rqvae, "learning curves rqvae"))
        parts += _curves_block(curves, palette)
        rows = "".join(f"<tr><td>{e(k)}</td><td>{e(str(i.get('epochs')))}</td><td>{e(str(i.get('best_epoch')))}</td>"
                       f"<td>{e(fmt(i.get('best')))}</td><td style='text-align:left;white-space:normal'>"
                       f"{e(str(i.get('stopped') or ''))}</td><td>{e(fmt(i.get('train_s')))}</td></tr>"
                       for k, i in infos.items())
        if rows:
            parts.append("<div class='scroll'><table><tr><th>model</th><th>epochs</th><th>best epoch</th><th>best valid"
                         "</th><th>stopped because</th><th>seconds</th></tr>" + rows + "</table></div>"
                         "<p class='note'><small>Every epoch's loss and validation score: models/&lt;name&gt;/"
                         "train_log.jsonl; the full configuration (settings, seed, training data): models/&lt;name&gt;/"
                         "train.json.</small></p>")
    parts += tuning_section(rd, model_dirs, palette)
    ft_rqvae = _rqvae_series(dataset, ft_sids)
    if ft_logs or ft_rqvae:
        parts.append("<h2>Fine-tuning</h2>")
        curves = []
        if ft_logs:
            curves.append(Curves({k: [(x.get("epoch"), x.get("loss")) for x in v] for k, v in ft_logs.items()},
                                 {"xlabel": "epoch (passes over the training examples)", "ylabel": "training loss",
                                  "whole_x": False},
                                 f"No learning curve of {', '.join(ft_logs)}: the training loss is 0 (or missing) at "
                                 "every step.", "learning curves finetune",
                                 "fine-tuning: training loss per optimizer step"))
            for metric in dict.fromkeys(x["metric"] for v in ft_logs.values() for x in v if x.get("metric")):
                series = {k: [(x.get("epoch"), x.get("valid")) for x in v if x.get("metric") == metric]
                          for k, v in ft_logs.items()}
                curves.append(Curves(series, {"xlabel": "epoch", "ylabel": f"validation {metric}", "whole_x": False},
                                     f"No learning curve of validation {metric}: it is 0 (or missing) every time.",
                                     f"learning curves finetune {metric}", f"fine-tuning: validation {metric}"))
        if ft_rqvae:
            curves.append(_rqvae_curves(ft_rqvae, "learning curves finetune rqvae"))
        parts += _curves_block(curves, palette)
        rows = "".join(
            f"<tr><td>{e(k)}</td><td>{e(fmt(i.get('steps')))}</td><td>{e(fmt(i.get('epochs_seen')))}</td>"
            f"<td>{e(fmt(i.get('final_loss')))}</td><td style='text-align:left;white-space:normal'>"
            f"{e(str(i.get('stopped') or ''))}</td><td>{e(fmt(i.get('train_s')))}</td></tr>"
            for k, i in ft_infos.items() if k in ft_logs)
        if rows:
            parts.append("<div class='scroll'><table><tr><th>fine-tune</th><th>steps</th><th>epochs</th><th>final loss"
                         "</th><th>stopped because</th><th>seconds</th></tr>" + rows + "</table></div>"
                         "<p class='note'><small>Every step's loss: finetuned/&lt;name&gt;/train_log.jsonl (continued "
                         "when a killed fine-tune resumes); the settings: finetuned/&lt;name&gt;/finetune.json."
                         "</small></p>")
    return parts


def best_so_far(trials: list[dict]) -> list[tuple[float, float]]:
    """(trial number, the best validation value of the trials up to it): what the search had found after each
    trial, the curve that shows whether its budget was enough (still rising at the end, or flat)."""
    out, best = [], None
    for t in sorted(trials, key=lambda t: t["trial"]):
        v = t.get("valid")
        if _number(v):
            best = v if best is None else max(best, v)
        if best is not None:
            out.append((t["trial"], best))
    return out


def tuning_section(rd: RunDir, model_dirs: list[Path], palette: Palette) -> list[str]:
    """The searches of the tuned references (`train --tune N`, `models/<name>/tuning.json`): the budget, the
    objective, the chosen configuration and its validation value beside the default's (trial 0), and the best
    validation value found after each trial: the configuration each row of the tables was trained with."""
    searches = {d.name: _read_json(rd.tuning_json(d.name)) for d in model_dirs}
    searches = {k: v for k, v in searches.items() if isinstance(v.get("best"), dict) and v.get("trials")}
    if not searches:
        return []
    rows = []
    for name, t in searches.items():
        b, budget = t["best"], t.get("budget") or {}
        default = next((x.get("valid") for x in t["trials"] if x.get("trial") == 0), None)
        chosen = ", ".join(f"{k}={fmt(v) if isinstance(v, float) else v}" for k, v in (b.get("params") or {}).items())
        per = f" × {budget['epochs_per_trial']} epochs" if budget.get("epochs_per_trial") else ""
        rows.append(f"<tr><td>{e(name)}</td><td>{len(t['trials'])} of {e(str(budget.get('trials')))}{e(per)}</td>"
                    f"<td>{e(fmt(t.get('seconds')))}</td><td style='text-align:left;white-space:normal'>"
                    f"{e(str(t.get('objective') or ''))}</td><td>{e(fmt(default))}</td><td>{e(fmt(b.get('valid')))} "
                    f"(trial {e(str(b.get('trial')))})</td><td style='text-align:left;white-space:normal'>{e(chosen)}"
                    "</td></tr>")
    curves = [Curves({k: best_so_far(v["trials"]) for k, v in searches.items()},
                     {"xlabel": "trial", "ylabel": "best validation value so far"},
                     "No tuning curve: every trial's validation value is 0 (or missing).", "tuning curves",
                     "the best validation value found after each trial (trial 0: the default configuration)")]
    return (["<h2>Tuning of the reference models</h2>",
             "<div class='scroll'><table><tr><th>model</th><th>trials</th><th>search seconds</th><th>objective</th>"
             "<th>default valid</th><th>chosen valid</th><th>chosen configuration</th></tr>" + "".join(rows)
             + "</table></div>"]
            + _curves_block(curves, palette)
            + ["<p class='note'><small>Searched on a validation split carved from the training data, never the test "
               "samples; the chosen configuration refitted and scored on the test samples once. Every trial: "
               "models/&lt;name&gt;/tuning.json.</small></p>"])


# ------------------------------------------------------------------ what was run


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version(), "platform": f"{platform.system()} {platform.machine()}"}
    for pkg in ("recharness", "llama-cpp-python", "numpy", "polars", "scikit-learn", "torch", "transformers"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            continue
    return out


def _meta_table(items: list[tuple[str, str]]) -> str:
    return ("<div class='scroll'><table class='meta'>"
            + "".join(f"<tr><td>{e(k)}</td><td>{v}</td></tr>" for k, v in items) + "</table></div>")


def run_info(out: Path) -> list[str]:
    """Commands, build settings, model identities and software versions of a run directory."""
    items: list[tuple[str, str]] = [("run directory", f"<code>{e(display_path(out))}</code>")]
    rd = RunDir(out)
    info = rd.build_info() if rd.build_json.exists() else {}  # a bad build.json: one error naming it
    if info:
        items += [("suite / dataset", e(f"{info.get('suite')} / {shown_dataset(info.get('dataset'))}")),
                  ("tasks (samples)", e(", ".join(f"{t} ({info.get('counts', {}).get(t, '?')})" for t in info.get("tasks", [])))),
                  ("seed / limit", e(f"{info.get('seed')} / {info.get('limit')}")),
                  ("options", f"<code>{e(json.dumps(info.get('options') or {}, sort_keys=True))}</code>"),
                  ("build", e(f"{info.get('fingerprint', '?')} (built {info.get('created', '?')})"))]
    cmds = rd.commands_log
    if cmds.exists():
        lines = [c for c in read_jsonl(cmds, tolerate_torn_tail=True)][-12:]
        items.append(("commands", "<pre>" + e("\n".join(f"{c.get('command')}    # {c.get('time', '')}" for c in lines))
                      + "</pre>"))
    for pf in _prediction_files(out):
        first = next(iter(read_jsonl(pf, tolerate_torn_tail=True)), {})
        model = first.get("model") or {}
        params = first.get("params")
        text = json.dumps(model, sort_keys=True) + (f"; parameters {json.dumps(params, sort_keys=True)}" if params else "")
        kind = "reference model " if pf.parent == rd.reference_dir else "model "
        ft = model.get("finetune")
        label = f"{e(finetune_label(ft))}<br>" if isinstance(ft, dict) else ""
        if kind == "model ":  # the run's own settings: decoding overrides, the system prompt's hash
            from recharness.runner.coverage import read_run

            settings = read_run(rd, pf.stem).get("settings") or {}
            if settings.get("generation"):
                text += f"; generation {json.dumps(settings['generation'], sort_keys=True)}"
            if settings.get("system_prompt_sha256"):
                text += f"; system prompt sha256 {settings['system_prompt_sha256']}"
            if settings.get("max_retries") is not None:
                text += f"; format retries {settings['max_retries']}"
        items.append((kind + pf.stem, f"{label}<code>{e(text)}</code>"))
    items.append(("software", e(", ".join(f"{k} {v}" for k, v in _versions().items()))))
    return ["<h2>What was run</h2>", _meta_table(items)]


def _prediction_files(out: Path) -> list[Path]:
    rd = RunDir(out)
    return rd.prediction_files() + rd.reference_files()


# ------------------------------------------------------------------ answers: invalid ones, examples


def _reason(rec: dict) -> str:
    if rec.get("error_kind"):
        return f"{rec['error_kind']}: {str(rec.get('error') or '')[:60]}"
    err = str(rec.get("error") or "unparseable answer")
    err = re.sub(r"\d+", "N", err)
    return err[:80]


def invalid_section(out: Path, samples: list[dict]) -> list[str]:
    """Per model and task: answered, invalid by reason, samples without an answer."""
    by_task: dict[str, set[str]] = {}
    for s in samples:
        by_task.setdefault(s["task"], set()).add(s["id"])
    rows = []
    for pf in RunDir(out).prediction_files():
        per: dict[str, list[dict]] = {}
        for r in read_jsonl(pf, tolerate_torn_tail=True):
            per.setdefault(r.get("task"), []).append(r)
        for t, ids in by_task.items():
            recs = [r for r in per.get(t, []) if r.get("id") in ids]
            bad = [r for r in recs if not r.get("valid", True)]
            reasons = Counter(_reason(r) for r in bad).most_common(4)
            rows.append((pf.stem, t, len(ids), len(recs), len(bad), len(ids) - len({r["id"] for r in recs}),
                         "; ".join(f"{n} × {why}" for why, n in reasons)))
    imports = RunDir(out).import_reports()
    if not rows and not imports:
        return []
    parts = ["<h2>Invalid answers</h2><div class='scroll'><table><tr><th>model</th><th>task</th><th>samples</th>"
             "<th>answered</th><th>invalid</th><th>no answer</th><th>most common reasons</th></tr>"]
    for m, t, n, a, b, miss, why in rows:
        parts.append(f"<tr><td>{e(m)}</td><td>{e(t)}</td><td>{n}</td><td>{a}</td><td>{b}</td><td>{miss}</td>"
                     f"<td style='text-align:left;white-space:normal'>{e(why)}</td></tr>")
    parts.append("</table></div><p class='note'><small>Invalid answers count in every table as the task defines "
                 "(e.g. a miss for ranking tasks, the worst rating for ratings); samples without an answer count as missing."
                 "</small></p>")
    for p in imports:
        rep = _read_json(p)  # an unreadable import report shows as empty, never stops the page
        probs = [x for x in rep.get("problems", []) if isinstance(x, dict)]
        n = {k: e(str(rep.get(k, 0))) for k in ("lines", "imported", "invalid", "unrecognised")}  # file text: escaped
        parts.append(f"<p>Imported <b>{e(str(rep.get('name', p.stem)))}</b> from <code>{e(str(rep.get('source', '')))}</code>: "
                     f"{n['lines']} lines, {n['imported']} imported ({n['invalid']} invalid "
                     f"after parsing, {n['unrecognised']} answered but naming no catalog item), "
                     f"{len(probs)} not used.</p>")
        if probs:
            parts.append("<pre>" + e("\n".join(f"{x.get('where', '?')}: {x.get('problem', '?')}" for x in probs[:20])
                                     + (f"\n… {len(probs) - 20} more" if len(probs) > 20 else "")) + "</pre>")
    return parts


def _titles(sample: dict) -> dict[str, str]:
    """item id → title, from whatever the sample carries."""
    out = {}
    if sample.get("candidates") and sample.get("candidate_titles"):
        out.update(zip(map(str, sample["candidates"]), sample["candidate_titles"]))
    if sample.get("gt") and sample.get("gt_titles"):
        out.update(zip(map(str, sample["gt"]), sample["gt_titles"]))
    if sample.get("target") and sample.get("target_title"):
        out[str(sample["target"])] = sample["target_title"]
    return out


def _facts(sample: dict, titles: dict[str, str] | None = None) -> list[tuple[str, str]]:
    """The prompt's key facts, items by title where the catalog knows them."""
    titles = titles or {}
    facts = []
    if sample.get("user_id") is not None:
        facts.append(("user", str(sample["user_id"])))
    if sample.get("query"):
        facts.append(("query", str(sample["query"])))
    if sample.get("conditions"):
        facts.append(("conditions", "; ".join(f"{r} = {v}" for r, v in sample["conditions"])))
    if sample.get("query_card"):
        facts.append(("item", ", ".join(f"{k}: {v}" for k, v in sample["query_card"][:3])))
    if sample.get("level"):
        facts.append(("level", f"{sample['level']} (group of {len(sample.get('users', []))} users)"))
    if sample.get("item_id") is not None and not sample.get("query_card"):
        iid = str(sample["item_id"])
        facts.append(("item", f"{titles[iid]} (id {iid})" if iid in titles else iid))
    hist = sample.get("history") or sample.get("seen")
    if hist:
        shown = [titles.get(str(h), str(h)) for h in hist[-3:]]
        facts.append(("history", f"{len(hist)} items, the last: " + "; ".join(shown)))
    if sample.get("candidates"):
        facts.append(("candidates", f"{len(sample['candidates'])} items"))
    return facts


#: an example's verdict when its record is invalid: the tables count it as no answer, never a hit
NOT_SCORED = "not scored: invalid"


def _target_and_hit(sample: dict, rec: dict | None, task=None) -> tuple[str, str | None]:
    """(what the right answer is, "hit" / "miss" / `NOT_SCORED` (an invalid record) / None when the task has
    no single hit); `task` (the sample's Task, when its suite is known) ranks a target as its score does
    (`Task.target_rank`)."""
    parsed = (rec or {}).get("parsed") or {}
    if not isinstance(parsed, dict):
        parsed = {}
    # an invalid answer is scored as no answer (a miss in the tables), whatever its parsed part holds
    invalid = rec is not None and not rec.get("valid", True)
    titles = _titles(sample)
    if "target" in sample and sample["target"] is not None:
        tgt = str(sample["target"])
        text = titles.get(tgt, tgt)
        if invalid:
            return text, NOT_SCORED
        rank = task.target_rank(sample, rec) if task is not None else listed_rank(sample, rec)
        return text, None if rec is None else ("hit" + (f" (rank {rank})" if rank else "") if rank else "miss")
    if sample.get("gt") is not None and "query" in sample:
        gt = [str(x) for x in sample["gt"]]
        text = ", ".join(titles.get(g, g) for g in gt[:6]) + (" …" if len(gt) > 6 else "")
        if invalid:
            return text, NOT_SCORED
        if rec is None:
            return text, None
        # as the task's score reads the answer (RecBench+: its list cut to k, twins, the query's own films out)
        k = task.ground_truth_hits(sample, rec) if task is not None else listed_hits(sample, rec)
        return text, f"hit ({k} of {len(gt)})" if k else "miss"
    if "label" in sample:
        p = parsed.get("p_yes")
        text = "clicked" if sample["label"] else "not clicked"
        if invalid:
            return text, NOT_SCORED
        if not _number(p):
            return text, None if rec is None else "miss"
        return text, ("hit" if (p >= 0.5) == bool(sample["label"]) else "miss") + f" (P(Yes) = {p:.2f})"
    truth = sample.get("truth") or {}
    if truth.get("relative_ratings"):
        rel = truth["relative_ratings"]
        order = [i + 1 for i in sorted(range(len(rel)), key=lambda i: -rel[i])]
        text = f"users by preference: {order}"
        got = parsed.get("ordering")
        if got is None and parsed.get("ratings"):
            return text, None
        if invalid:
            return text, NOT_SCORED
        return text, None if rec is None else ("hit" if got == order else "miss" if got else None)
    # a text task's reference comes first: an explanation sample also carries the user's rating of the item
    ref = sample.get("reference")
    if ref:
        return str(ref)[:300], None
    for key in ("target_rating", "rating"):  # LLMRec rating: the held-out rating
        if _number(sample.get(key)):
            return f"rating {sample[key]:g}", None
    ref = sample.get("title")
    return (str(ref)[:300] if ref else "–"), None


def _prompt_text(sample: dict) -> str:
    msgs = sample.get("messages") or []
    user = [m.get("content", "") for m in msgs if m.get("role") == "user"]
    return str(user[-1]) if user else ""


def _catalog_titles(dataset: str | None) -> dict[str, str]:
    """item id → title of the run's dataset, so examples show titles where a sample holds ids only."""
    if not dataset:
        return {}
    try:
        from recharness.data.store import load_dataset

        items = load_dataset(dataset).items
    except Exception:  # noqa: BLE001 - a report of a moved run without its dataset still renders
        return {}
    if "title" not in items.columns:
        return {}
    return {str(i): str(t) for i, t in zip(items["item_id"].to_list(), items["title"].to_list()) if t}


def examples_section(out: Path, samples: list[dict], n_examples: int, titles: dict[str, str] | None = None,
                     suite: str | None = None) -> list[str]:
    titles = titles or {}
    by_id = {s["id"]: s for s in samples}
    parts = []
    tasks: dict = {}  # the suite's task of each task name, to rank a target as its score does (None: the generic rule)

    for pf in RunDir(out).prediction_files():
        parts.append(f"<h2>Example answers: {e(pf.stem)}</h2>")
        shown: Counter = Counter()
        for r in read_jsonl(pf, tolerate_torn_tail=True):
            s = by_id.get(r.get("id"), {})
            t = r.get("task")
            if shown[t] >= n_examples:
                continue
            shown[t] += 1
            if t not in tasks:
                tasks[t] = _suite_task(suite, t)
            target, hit = _target_and_hit(s, r, tasks[t])
            verdict = "na" if hit is None else ("hit" if hit.startswith("hit") else "miss")
            status = "valid" if r.get("valid", True) else f"invalid: {r.get('error') or ''}"
            facts = "".join(f"<tr><td>{e(k)}</td><td>{e(v)}</td></tr>" for k, v in _facts(s, titles))
            target = titles.get(target, target)
            prompt = _prompt_text(s)
            out_text = r.get("output")
            if out_text is None:
                out_text = json.dumps(r.get("parsed"))
            parts.append(
                f"<div class='ex'><b>{e(str(t))}</b> · <code>{e(str(r.get('id')))}</code> · "
                f"<span class='{verdict}'>{e(hit or 'no single target')}</span> · <small>{e(status[:200])}</small>"
                f"<div class='scroll'><table class='meta'>{facts}<tr><td>target</td><td>{e(target)}</td></tr></table></div>"
                f"<pre>{e(str(out_text)[:1500])}</pre>"
                + (f"<details><summary>prompt</summary><pre>{e(prompt[:4000])}</pre></details>" if prompt else "")
                + "</div>")
    return parts


# ------------------------------------------------------------------ pages


def _page(title: str, body: list[str]) -> str:
    return ("<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            "<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>{e(title)}</title><style>{STYLE}</style></head><body>\n" + "\n".join(p for p in body if p)
            + "\n</body></html>")


def write_report(rows: list[ScoreRow], out: Path, n_examples: int = 5, sections: dict[str, str] | None = None,
                 memorization: Path | None = None) -> Path:
    """report.html of a run directory. `sections`: extra titled blocks of preformatted text (e.g. a
    suite's paper-layout tables); `memorization`: probe results to show beside accuracy (report.fairness)."""
    out = Path(out)
    info = {}
    rd = RunDir(out)
    if rd.build_json.exists():
        info = rd.build_info()
    suite = info.get("suite")
    if info and rd.samples_jsonl.exists():  # the examples show these samples beside scores of the built ones
        from recharness.core.rundir import check_samples_file

        check_samples_file(rd.samples_jsonl, info, rd.build_json)
    samples = list(read_jsonl(rd.samples_jsonl)) if rd.samples_jsonl.exists() else []
    title = f"recharness report: {suite} on {shown_dataset(info.get('dataset'))}" if suite else "recharness report"
    parts = [f"<h1>{e(title)}</h1><p><code>{e(display_path(out))}</code></p>"]
    palette = Palette(rows)
    heads = {}
    for task in dict.fromkeys(r.task for r in rows):
        trs = [r for r in rows if r.task == task]
        parts += task_section(trs, suite, task, palette=palette)
        heads[task] = headline_metric(suite, task, columns(trs))
        parts += fairness.task_parts(trs, heads[task], palette, samples)  # popularity bias, order sensitivity
    for name, text in (sections or {}).items():
        parts.append(f"<h2>{e(name)}</h2>" + markdown_html(text))
    parts += fairness.memorization_parts(out, rows, info.get("dataset"), heads, memorization)
    parts += training_section(out, palette)
    parts += invalid_section(out, samples)
    parts += examples_section(out, samples, n_examples, titles=_catalog_titles(info.get("dataset")),
                              suite=info.get("suite"))
    parts += run_info(out)
    path = rd.report_html
    atomic_write_text(path, _page(title, parts))
    return path


# ------------------------------------------------------------------ the cross-run leaderboard


def find_runs(specs: list[str | Path]) -> list[Path]:
    """Run directories from paths or globs: a directory with scores.json, or every one below it."""
    import glob

    found: list[Path] = []
    empty: list[str] = []  # a spec that names no run: a typo is said, not dropped
    for spec in specs:
        matches = sorted(glob.glob(str(spec))) or [str(spec)]
        before = len(found)
        for m in matches:
            p = Path(m)
            scores = RunDir(p).scores("json")
            if scores.exists():
                found.append(p)
            elif p.is_dir():
                found += sorted(q.parent for q in p.rglob(scores.name))
        if len(found) == before:
            empty.append(str(spec))
    if empty and found:
        from recharness.core.errors import ConfigError

        raise ConfigError(f"--runs: no run directory with scores.json in {', '.join(empty)} (a typo, or run "
                          "`recharness score` there first); leave it out to merge the others")
    seen, out = set(), []
    for p in found:
        key = p.resolve()
        if key not in seen:
            seen.add(key)
            out.append(p)
    if not out:
        from recharness.core.errors import ConfigError

        raise ConfigError(f"--runs {' '.join(map(str, specs))}: no run directory with scores.json "
                          "(run `recharness score` first)")
    return out


def leaderboard(runs: list[Path]) -> list[dict]:
    """Every row of every run: {suite, dataset, task, run, build, row}. A reference row found again in another
    run of the same build with the same values appears once; any other row is kept, even under a name seen
    before (one model run twice with other settings, or partly): which one to show would be a guess."""
    from recharness.report.tables import load_scores

    entries = []
    seen = set()
    for d in runs:
        info = RunDir(d).build_info() if RunDir(d).build_json.exists() else {}
        for r in load_scores(d):
            key = (info.get("fingerprint"), r.task, r.method, r.kind,
                   json.dumps(r.metrics, sort_keys=True, default=str), json.dumps(r.coverage, sort_keys=True))
            if info.get("fingerprint") and r.kind == "reference" and key in seen:
                continue
            seen.add(key)
            entries.append({"suite": info.get("suite", "?"), "dataset": info.get("dataset", "?"), "task": r.task,
                            "run": d, "build": info.get("fingerprint", ""), "row": r})
    return entries


def run_labels(runs: list[Path]) -> dict[str, str]:
    """A short name per run folder that no other run shares: its last path parts, as many as it takes
    (eval names its folders by suite, so two evals' runs share the last one)."""
    parts = {str(d): Path(d).resolve().parts for d in runs}
    out = {}
    for key, ps in parts.items():
        for k in range(1, len(ps) + 1):
            tail = ps[-k:]
            if not any(o != key and other[-k:] == tail for o, other in parts.items()):
                break
        out[key] = "/".join(tail)
    return out


def write_leaderboard(runs: list[Path], out: Path, *, title: str = "recharness leaderboard",
                      intro: str | None = None) -> dict[str, Path]:
    """leaderboard.html + leaderboard.csv in `out`: one table per (suite, dataset, task) over every run."""
    import csv

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    entries = leaderboard(runs)
    groups: dict[tuple, list[dict]] = {}
    for en in entries:
        groups.setdefault((en["suite"], en["dataset"], en["task"]), []).append(en)
    parts = [f"<h1>{e(title)}</h1>"]
    if intro:
        parts.append(f"<p>{e(intro)}</p>")
    parts.append("<p>Runs: " + ", ".join(
        f"<a href='{e(_rel_link(RunDir(d).report_html, out))}'>{e(display_path(d))}</a>" for d in runs) + "</p>")
    labels = run_labels(runs)
    parts.append("<p class='note'><small>Rows from runs of different builds were scored on different samples: "
                 "compare their intervals; bold marks are kept only where all rows of a table come from one run.</small></p>")
    palette = Palette([en["row"] for en in entries])
    for (suite, dataset, task), ens in groups.items():
        builds = list(dict.fromkeys(en["build"] for en in ens))
        # a run marks rows against its own best: the marks hold only when every row is from one run
        same_run = len({str(en["run"]) for en in ens}) == 1
        rows = []
        # one name per row: a method found in several runs (other builds, or the same build run again) says which
        repeated = len(builds) > 1 or len({(en["row"].method, en["row"].kind) for en in ens}) < len(ens)
        for en in ens:
            r = en["row"]
            name = r.method if not repeated else f"{r.method} [{labels[str(en['run'])]}]"
            extra = r.extra
            vs = extra.get("vs_strongest_reference")
            if repeated and isinstance(vs, dict) and vs.get("reference"):
                # the reference a verdict is against is its own run's row, named as the table names that row: two
                # runs' references of one name are two rows, never one "it"
                extra = {**extra, "vs_strongest_reference": {
                    **vs, "reference": f"{vs['reference']} [{labels[str(en['run'])]}]"}}
            rows.append(ScoreRow(method=name, task=r.task, metrics=r.metrics, n=r.n, kind=r.kind, extra=extra,
                                 ci=r.ci if same_run else {m: {k: v for k, v in c.items() if k != "top"}
                                                              for m, c in r.ci.items()}, coverage=r.coverage,
                                 build=r.build))
            palette.colours.setdefault(name, palette.colours.get(r.method, "#999999"))
        parts += task_section(rows, suite, task, title=f"{suite} · {task} on {shown_dataset(dataset)}",
                              palette=palette)
    page = _page(title, parts)
    allcols = columns([en["row"] for en in entries])
    buf = io.StringIO(newline="")
    w = csv.writer(buf)
    # coverage: "partial: n = 12 of 20" where a row rests on part of the samples, "imported" for an import over
    # every sample, as scores.csv says it
    w.writerow(["suite", "dataset", "task", "run", "build", "method", "kind", "n", "coverage",
                *[x for c in allcols for x in (c, f"{c}_lo", f"{c}_hi")]])
    for en in entries:
        r = en["row"]
        vals = []
        for c in allcols:
            ci = r.ci.get(c) or {}
            vals += [r.metrics.get(c, ""), ci.get("lo", ""), ci.get("hi", "")]
        w.writerow([en["suite"], shown_dataset(en["dataset"]), en["task"], display_path(en["run"]), en["build"], r.method, r.kind, r.n,
                    coverage_text(r), *vals])
    write_set({out / "leaderboard.html": page, out / "leaderboard.csv": buf.getvalue()})  # one set: never a mismatched pair
    return {"html": out / "leaderboard.html", "csv": out / "leaderboard.csv"}


def _rel_link(target: Path, base: Path) -> str:
    """A relative link, each part percent-encoded and led by ./: a folder named `javascript:…` (or holding
    `#`, `?`, `:`) stays a path, never a scheme or a fragment."""
    import os
    from urllib.parse import quote

    rel = Path(os.path.relpath(Path(target).resolve(), Path(base).resolve())).as_posix()
    return "./" + quote(rel, safe="/")


def summary_rows(entries: list[dict]) -> list[tuple[str, str, str, str, str]]:
    """(suite, task, headline metric, the models' values, the references' values) per task, for the demo."""
    out = []
    groups: dict[tuple, list[dict]] = {}
    for en in entries:
        groups.setdefault((en["suite"], en["dataset"], en["task"]), []).append(en)
    for (suite, _, task), ens in groups.items():
        rows = [en["row"] for en in ens]
        key = headline_metric(suite, task, columns(rows))
        if key is None:
            continue
        fmt_row = lambda r: f"{r.method} {value_text(r, key)}"  # noqa: E731
        out.append((suite, task, header(key), ", ".join(fmt_row(r) for r in rows if r.kind == "model"),
                    ", ".join(fmt_row(r) for r in rows if r.kind == "reference")))
    return out

