"""Results in the layouts of the RecBench+ paper: Table 2 (condition-based) and Table 3 (profile-based).

Works on the score rows the pipeline writes (scores.json); one row per
method, the averages taken over the query types, as in the paper. Each table
is given overall and, where the run had both, with and without history.
"""

from __future__ import annotations

from recharness.core.types import is_number
from recharness.report.tables import STRONGEST

CONDITION_TYPES = (("explicit", "Explicit"), ("implicit", "Implicit"), ("misinformed", "Misinformed"))
PROFILE_TYPES = (("interest", "Interest"), ("demographics", "Demographics"))


def _fmt(v, ci: dict | None = None) -> str:
    """As every score table shows a number (`report.tables.fmt`: 0.0004 is 4.00e-04, never 0.000)."""
    from recharness.report.tables import fmt

    if v is None:
        return "–"
    if ci and ci.get("lo") is not None and ci.get("hi") is not None:
        return f"{fmt(float(v))} [{fmt(float(ci['lo']))}, {fmt(float(ci['hi']))}]"
    return fmt(float(v))


def _mark(row) -> str:
    """" (limit 40/400)" etc. for a row over part of its task's samples (runner.coverage), else ""."""
    from recharness.runner.coverage import label

    cov = label(getattr(row, "coverage", None)) if row is not None else ""
    return f" ({cov})" if cov else ""


def _metrics(row, variant: str | None) -> dict | None:
    if variant is None:
        return row.metrics
    return (row.extra or {}).get("breakdown", {}).get(variant)


def _intervals(row, variant: str | None) -> dict:
    """{metric: {lo, hi}} of the row's 95% bootstrap intervals (overall, or of one history variant)."""
    if variant is None:
        return row.ci or {}
    return (row.extra or {}).get("breakdown_ci", {}).get(variant, {})


def _methods(rows, tasks) -> list[tuple[str, str]]:
    out = []
    for r in rows:
        if r.task in tasks and (r.method, r.kind) not in out:
            out.append((r.method, r.kind))
    return sorted(out, key=lambda mk: (mk[1] == "reference", mk[0]))


def _table(rows, types, metrics, variant: str | None, title: str) -> str | None:
    tasks = [t for t, _ in types]
    methods = _methods(rows, tasks)
    if not methods:
        return None
    by = {(r.method, r.task): r for r in rows}
    cols = []
    for t, label in types:
        for m in metrics:
            arrow = "↑" if m != "FTR" or t == "misinformed" else "↓"
            cols.append(f"{label} {m}{arrow}")
    avg_metrics = [m for m in metrics if m != "FTR"] if "CMR" in metrics else metrics
    cols += [f"Average {m}" for m in avg_metrics]
    lines = [f"#### {title}\n", "| method | " + " | ".join(cols) + " |", "|---|" + "---:|" * len(cols)]
    any_row = marked = False
    for method, kind in methods:
        cells, per_metric = [], {m: [] for m in avg_metrics}
        for t, _ in types:
            r = by.get((method, t))
            mm = _metrics(r, variant) if r is not None else None
            ci = _intervals(r, variant) if r is not None else {}
            for m in metrics:
                v = mm.get(m) if mm else None
                v = v if is_number(v) else None  # undefined (NaN in memory, null in scores.json): a dash either way
                strongest = variant is None and v is not None and (r.extra or {}).get("strongest_reference") == m
                cells.append(_fmt(v, ci.get(m)) + (_mark(r) if v is not None else "") + (f" {STRONGEST}" if strongest else ""))
                marked = marked or strongest
                if v is not None and m in per_metric:
                    per_metric[m].append(v)
        whys = sorted({by[(method, t)].coverage["why"] for t, _ in types
                       if by.get((method, t)) is not None and getattr(by[(method, t)], "coverage", None)})
        for m in avg_metrics:
            vals = per_metric[m]
            cells.append(_fmt(sum(vals) / len(vals)) + (f" ({', '.join(whys)})" if whys else "")
                         if len(vals) == len(types) else "–")
        # a row whose every value is undefined (no scored query) is kept, as dashes: it was run
        if any(c != "–" for c in cells) or any(by.get((method, t)) is not None and _metrics(by[(method, t)], variant)
                                               for t, _ in types):
            any_row = True
            name = method + (" (ref)" if kind == "reference" else "")
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    if marked:
        lines.append(f"\n{STRONGEST} the strongest reference of that query type (its headline metric): the row each "
                     "model row is tested against in scores.md.")
    return "\n".join(lines) + "\n" if any_row else None


def paper_tables(rows) -> str:
    """Markdown: Table 2 and Table 3 layouts, overall and per history variant."""
    out = []
    for variant, suffix in ((None, ""), ("history=with", " — with history"), ("history=without", " — without history")):
        t2 = _table(rows, CONDITION_TYPES, ("P", "R", "CMR", "FTR"), variant,
                    f"Table 2 layout: condition-based queries{suffix}")
        if t2:
            out.append(t2)
    for variant, suffix in ((None, ""), ("history=with", " — with history"), ("history=without", " — without history")):
        t3 = _table(rows, PROFILE_TYPES, ("P", "R", "FTR"), variant, f"Table 3 layout: user-profile-based queries{suffix}")
        if t3:
            out.append(t3)
    if out:
        out.append("FTR: share of queries with no recommended item (lower is better, except for misinformed "
                   "queries, where declining is right). CMR is averaged over queries that recommended something; "
                   "unmatched titles count as not satisfying (see the `unmatched` column of each task's table).")
        if any(" [" in t for t in out):
            out[-1] += (" [lo, hi] = the 95% bootstrap interval over the independent units (a source user's queries, "
                        "with and without history, resampled together; a demographic group's for demographics "
                        "queries); a value without one rests on fewer than 5 units (no interval), and the averages "
                        "over query types carry none.")
        out[-1] += "\n"
    return "\n".join(out)
