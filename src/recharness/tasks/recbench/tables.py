"""RecBench's Tables 3 and 4: AUC per dataset, the Overall mean over datasets, and latency per sample.

Table 3 holds the zero-shot LLMs (the run's model rows), Table 4 the conventional models trained
here (the reference rows: DLRMs, item-mean, popularity, random). One run is one dataset, so a single
run gives one AUC column; `across_datasets` lays several runs side by side as the paper does.
"""

from __future__ import annotations

import statistics

from recharness.tasks.base import ScoreRow


def latency_label(seconds: float | None) -> str:
    """The paper's notation: "0.43ms" below a second, "6.80s" above (two significant digits below 0.1 ms)."""
    if seconds is None:
        return "–"
    if seconds >= 1:
        return f"{seconds:.2f}s"
    ms = seconds * 1000
    return f"{ms:.2f}ms" if ms >= 0.1 else f"{ms:.2g}ms"  # a count or lookup: keep its digits


def _table(title: str, methods: list[tuple[str, str]], by: dict[str, dict[tuple[str, str], ScoreRow]]) -> str:
    datasets = list(by)
    cols = [*datasets, "Overall", "Latency"]
    lines = [f"#### {title}\n", "| Recommender | " + " | ".join(cols) + " |", "|---|" + "---:|" * len(cols)]
    for method, kind in methods:
        aucs, lat = [], []
        cells = []
        for d in datasets:
            r = by[d].get((method, kind))
            v = r.metrics.get("AUC") if r is not None else None
            cells.append("–" if v is None else f"{v:.4f}")
            if v is not None:
                aucs.append(v)
            if r is not None and r.metrics.get("latency_s") is not None:
                lat.append(r.metrics["latency_s"])
        overall = f"{statistics.fmean(aucs):.4f}" if len(aucs) == len(datasets) else "–"
        cells += [overall, latency_label(statistics.fmean(lat) if lat else None)]
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def across_datasets(runs: dict[str, list[ScoreRow]]) -> str | None:
    """Tables 3 (model rows) and 4 (reference rows) over {dataset: that run's ctr score rows}.
    Overall is the mean AUC over the datasets, given only for a method with an AUC on every one."""
    by = {d: {(r.method, r.kind): r for r in rows if r.task == "ctr"} for d, rows in runs.items()}
    methods = list(dict.fromkeys(k for rows in by.values() for k in rows))
    parts = []
    llms = [m for m in methods if m[1] == "model"]
    refs = [m for m in methods if m[1] == "reference"]
    if llms:
        parts.append(_table("Table 3: LLMs (zero-shot), pair-wise (AUC; latency per sample)", llms, by))
    if refs:
        parts.append(_table("Table 4: conventional models trained here, pair-wise (AUC; latency per sample)", refs, by))
    return "\n".join(parts) or None


def paper_tables(rows: list[ScoreRow], dataset: str = "AUC") -> str | None:
    """One run's rows in the Table 3/4 layout (its dataset as the one AUC column)."""
    return across_datasets({dataset: rows})
