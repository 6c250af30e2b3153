"""The paper's Table 1 layout: one row per method, easy/medium/hard x point/pair/list, then Avg.

Score rows are per (method, task); this regroups them across tasks.  A cell
is the level's tau, followed by the number of unparseable groups in
brackets when there were any; MAE and RMSE of the pointwise ratings sit
beside the average.
"""

from __future__ import annotations

import math

from recharness.core.types import ScoreRow
from recharness.tasks.perrecbench.groups import LEVELS

TASKS = ("point", "pair", "list")


def _cell(row: ScoreRow | None, level: str) -> tuple[str, float | None]:
    if row is None:
        return "–", None
    v = row.metrics.get(f"tau_{level}")
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–", None
    bad = (row.extra.get("breakdown") or {}).get(level, {}).get("invalid", 0) or 0
    ci = (row.ci or {}).get(f"tau_{level}") or {}
    interval = f" [{ci['lo']:.2f}, {ci['hi']:.2f}]" if ci.get("lo") is not None and ci.get("hi") is not None else ""
    from recharness.runner.coverage import label

    cov = label(getattr(row, "coverage", None))  # a row over part of the task's groups says so: limit 4/12
    return (f"{v:.2f}{interval}" + (f" ({bad:g} unparsed)" if bad else "") + (f" ({cov})" if cov else "")), float(v)


def table1_rows(rows: list[ScoreRow]) -> list[list[str]]:
    by = {(r.method, r.task): r for r in rows}
    methods = list(dict.fromkeys(r.method for r in rows if r.task in TASKS))
    grid = {m: [_cell(by.get((m, t)), lv) for lv in LEVELS for t in TASKS] for m in methods}
    # the columns some method has a value in: a method missing one of them gets no Avg. (a mean over fewer cells
    # is not comparable), as Overall in RecBench's tables
    filled = [j for j in range(len(LEVELS) * len(TASKS)) if any(grid[m][j][1] is not None for m in methods)]
    out = []
    for m in methods:
        cells = [text for text, _ in grid[m]]
        vals = [grid[m][j][1] for j in filled]
        complete = bool(vals) and all(v is not None for v in vals)
        avg = f"{sum(vals) / len(vals):.2f}" if complete else "–"
        whys = sorted({by[(m, t)].coverage["why"] for t in TASKS
                       if by.get((m, t)) is not None and getattr(by[(m, t)], "coverage", None)})
        if complete and whys:
            avg += f" ({', '.join(whys)})"
        pt = by.get((m, "point"))
        mae = pt.metrics.get("MAE") if pt else None
        rmse = pt.metrics.get("RMSE") if pt else None
        kind = next((r.kind for r in rows if r.method == m), "model")
        name = m + (" (ref)" if kind == "reference" else "")
        fmt = lambda x: "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"  # noqa: E731
        out.append([name, *cells, avg, fmt(mae), fmt(rmse)])
    return out


def table1_markdown(rows: list[ScoreRow]) -> str:
    head = ["method", *(f"{lv} {t}" for lv in LEVELS for t in TASKS), "Avg.", "MAE", "RMSE"]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    body = table1_rows(rows)
    lines += ["| " + " | ".join(r) + " |" for r in body]
    mode = next((r.metrics for r in rows if r.task in TASKS), {})
    if mode.get("tau") != mode.get("tau_rank"):
        note = "tau as the original PerRecBench code computes it (orderings; unparseable groups dropped: (k unparsed))"
    elif "dropped_unparsed" in mode:  # invalid=drop: those groups are left out, not scored 0
        note = ("Kendall tau per group, mean per level; (k unparsed) = k groups with no parseable answer, left out "
                "(invalid=drop)")
    else:
        note = "Kendall tau per group, mean per level; (k unparsed) = k groups with no parseable answer, scored 0"
    if any(r.metrics.get("levels_without_tau") for r in rows if r.task in TASKS):
        note += "; a level whose every group was left out has no tau, and the row's headline tau averages the others"
    if any(", " in line and " [" in line for line in lines[2:]):
        note += ("; [lo, hi] = the 95% bootstrap interval over the level's groups, none on a level with fewer than "
                 "5 groups (n too small) or on Avg. (a mean of the cells)")
    if any(r[-3] == "–" and any(c != "–" for c in r[1:-3]) for r in body):
        note += "; Avg. – = a cell the other methods have is missing (no task run, or no parseable group)"
    return "\n".join(lines) + f"\n\n{note}. MAE/RMSE: pointwise ratings clipped to 1..5.\n"
