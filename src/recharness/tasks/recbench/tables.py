"""RecBench's Tables 3 and 4 (pair-wise: AUC) and Table 5 (list-wise: NDCG@10), per dataset, the
Overall mean over datasets, and latency per sample.

Table 3 holds the zero-shot LLMs (the run's model rows), Table 4 the conventional models trained
here (the reference rows: DLRMs, item-mean, popularity, random). One run is one dataset, so a single
run gives one column; `across_datasets` / `table5` lay several runs side by side as the paper does.

Table 5 groups its rows as the paper: G (SASRec by layers), I (LLMs with item IDs), H (SID-SASRec,
with and without conditional beam search), J (LLMs with semantic IDs); then the zero-shot title
LLM rows and other references (popularity), which the paper has not. A reference row's group and
label come from its baseline's `table5` registration (`recharness.baselines`); a model row (an LLM
run) is a zero-shot title row, or I / J when it is an ID / SID fine-tune (its recorded `finetune` identity;
else by name: "id-"/"p5-" / "sid-"). Table 4 puts fine-tuned ctr LLMs in the paper's groups D (IDs),
E (text) and F (semantic IDs) above the conventional models; Table 3 keeps the zero-shot ones. Columns:
NDCG@10 per dataset, Overall (mean over datasets, only for a row with every dataset), Latency (the
method's own per-answer time where it measures one, `answer_latency_s`, else `latency_s`), n (the
samples a row is judged on: a sample-capped row says so), and, when any row decodes beams, the
share of invalid answers (top-1 / all beams): the paper's case for CBS.
"""

from __future__ import annotations

import re
import statistics

from recharness.core.types import ScoreRow, is_number


def latency_label(seconds: float | None) -> str:
    """The paper's notation: "0.43ms" below a second, "6.80s" above (two significant digits below 0.1 ms)."""
    if seconds is None:
        return "–"
    if seconds >= 1:
        return f"{seconds:.2f}s"
    ms = seconds * 1000
    return f"{ms:.2f}ms" if ms >= 0.1 else f"{ms:.2g}ms"  # a count or lookup: keep its digits


def under_load(rows) -> str:
    """" (8 in flight)" where a row's latency was timed with that many requests at its server at once (the
    server's queue counts in it; a conventional model's latency is single calls in series), else ""."""
    c = max((r.metrics.get("latency_concurrency") or 0 for r in rows if r is not None), default=0)
    return f" ({c:g} in flight)" if c and c > 1 else ""


LOAD_NOTE = ("(N in flight): the latency was timed with up to N requests at the server at once, its queue counted; "
             "run with --concurrency 1 for a latency on the conventional models' terms (single calls in series).")


CI_NOTE = ("[lo, hi] = the 95% bootstrap interval over the independent units (users; bounds also in the run's "
           "scores.csv); Overall is the plain mean over datasets.")


def _with_note(lines: list[str]) -> str:
    """The table, with the [lo, hi] explained under it when a cell carries an interval."""
    from recharness.report.tables import STRONGEST

    text = "\n".join(lines) + "\n"
    text = text + f"\n{CI_NOTE}\n" if any(" [" in line for line in lines[3:]) else text
    text = text + f"\n{LOAD_NOTE}\n" if any(" in flight)" in line for line in lines[3:]) else text
    if any(f" {STRONGEST} " in line or line.endswith(f" {STRONGEST}") for line in lines[3:]):
        text += (f"\n{STRONGEST} the strongest reference on that dataset (the task's headline metric): the row each "
                 "model row is tested against in scores.md.\n")
    return text


def coverage_mark(r: ScoreRow | None) -> str:
    """" (limit 40/400)" / " (partial 12/20)" / " (imported 170/200)" for a row over part of the task's
    samples, "" for a row over all of them: every paper-layout cell says what it is computed on."""
    from recharness.runner.coverage import label

    cov = label(getattr(r, "coverage", None)) if r is not None else ""
    return f" ({cov})" if cov else ""


def overall_mark(rows: list) -> str:
    """" (limit)" etc. after a mean over datasets when any of its cells covers part of its samples."""
    whys = sorted({r.coverage["why"] for r in rows if r is not None and getattr(r, "coverage", None)})
    return f" ({', '.join(whys)})" if whys else ""


def _cell(r: ScoreRow, metric: str) -> str:
    """The paper's 4-decimal value, with its 95% bootstrap interval [lo, hi] when scored with one, and its
    coverage mark when the row covers part of the task's samples."""
    from recharness.report.tables import STRONGEST

    v = r.metrics.get(metric)
    ci = (r.ci or {}).get(metric) or {}
    mark = coverage_mark(r) + (f" {STRONGEST}" if (r.extra or {}).get("strongest_reference") == metric else "")
    if ci.get("lo") is None or ci.get("hi") is None:
        return f"{v:.4f}" + mark
    return f"{v:.4f} [{_bound(ci['lo'])}, {_bound(ci['hi'])}]" + mark


def _bound(x: float) -> str:
    """An interval's bound at the value's 4 decimals (at 3, 0.0021 [0.0004, 0.0040] read [0.000, 0.004]: as if it
    reached zero); below 0.0001 in the `report.tables.fmt` way (5e-05 is 5.00e-05, not 0.0000)."""
    from recharness.report.tables import fmt

    return fmt(x) if 0 < abs(x) < 0.0001 else f"{x:.4f}"


def _table(title: str, methods: list, by: dict[str, dict[tuple[str, str], ScoreRow]]) -> str:
    """`methods`: (method, kind) rows; a plain string among them is a group header row."""
    datasets = list(by)
    cols = [*datasets, "Overall", "Latency"]
    lines = [f"#### {title}\n", "| Recommender | " + " | ".join(cols) + " |", "|---|" + "---:|" * len(cols)]
    for entry in methods:
        if isinstance(entry, str):
            lines.append(f"| **{entry}** |" + " |" * len(cols))
            continue
        method, kind = entry
        aucs, lat = [], []
        cells = []
        for d in datasets:
            r = by[d].get((method, kind))
            v = r.metrics.get("AUC") if r is not None else None
            v = v if is_number(v) else None  # undefined (NaN in memory, null in scores.json): a dash either way
            cells.append("–" if v is None else _cell(r, "AUC"))
            if v is not None:
                aucs.append(v)
            if r is not None and r.metrics.get("latency_s") is not None:
                lat.append(r.metrics["latency_s"])
        overall = f"{statistics.fmean(aucs):.4f}" if len(aucs) == len(datasets) else "–"
        if len(aucs) == len(datasets):
            overall += overall_mark([by[d].get((method, kind)) for d in datasets])
        rows_m = [by[d].get((method, kind)) for d in datasets]
        cells += [overall, latency_label(statistics.fmean(lat) if lat else None) + under_load(rows_m)]
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return _with_note(lines)


def imported_as(row: ScoreRow) -> str | None:
    """The kind an imported row was imported as (`score --predictions F --kind reference|finetuned`, or the
    file's "kind"), None for a row this harness answered or an import of a zero-shot model."""
    model = (row.extra or {}).get("model") or {}
    if row.kind == "model" and model.get("backend") == "imported" and model.get("kind") in ("reference", "finetuned"):
        return model["kind"]
    return None


def finetuned_items(row: ScoreRow) -> str | None:
    """The item representation a fine-tuned model row was trained with (text / id / sid), None for zero-shot:
    read from the model identity the hf backend records for a `recharness finetune` model, or the items an
    imported fine-tune declared (default text)."""
    if imported_as(row) == "finetuned":
        return ((row.extra or {}).get("model") or {}).get("items") or "text"
    ft = ((row.extra or {}).get("model") or {}).get("finetune") if row.kind == "model" else None
    return (ft.get("items") or "text") if isinstance(ft, dict) else None


#: Table 4's LLM groups (RecBench §4.1): fine-tuned LLMs by item representation
TABLE4_GROUPS = {"id": "D: LLMs, item IDs (fine-tuned)", "text": "E: LLMs, text (fine-tuned)",
                 "sid": "F: LLMs, semantic IDs (fine-tuned)"}


def across_datasets(runs: dict[str, list[ScoreRow]]) -> str | None:
    """Tables 3 (zero-shot LLM rows) and 4 (fine-tuned LLMs in groups D/E/F, when any, and the conventional
    models trained here: DLRMs, item-mean, popularity, random) over {dataset: that run's ctr score rows}.
    Overall is the mean AUC over the datasets, given only for a method with an AUC on every one."""
    by = {d: {(r.method, r.kind): r for r in rows if r.task == "ctr"} for d, rows in runs.items()}
    methods = list(dict.fromkeys(k for rows in by.values() for k in rows))
    any_row = {m: next(by[d][m] for d in by if m in by[d]) for m in methods}
    tuned = {m: finetuned_items(any_row[m]) for m in methods}
    parts = []
    # an imported row is filed by the kind it was imported as, like a row of its kind answered here
    imported_ref = {m for m in methods if imported_as(any_row[m]) == "reference"}
    llms = [m for m in methods if m[1] == "model" and tuned[m] is None and m not in imported_ref]
    refs = [m for m in methods if m[1] == "reference" or m in imported_ref]
    ft_rows: list = []
    for items, title in TABLE4_GROUPS.items():
        members = [m for m in methods if tuned[m] == items]
        if members:
            ft_rows += [title, *members]
    if llms:
        parts.append(_table("Table 3: LLMs (zero-shot), pair-wise (AUC; latency per sample)", llms, by))
    if ft_rows:
        parts.append(_table("Table 4: fine-tuned LLMs and conventional models trained here, pair-wise (AUC; latency "
                            "per sample)", ft_rows + (["conventional models trained here", *refs] if refs else []), by))
    elif refs:
        parts.append(_table("Table 4: conventional models trained here, pair-wise (AUC; latency per sample)", refs, by))
    return "\n".join(parts) or None


#: Table 5's groups in the paper's order, then ours
TABLE5_GROUPS = {
    "G": "G: SASRec, item IDs",
    "I": "I: LLMs, item IDs (fine-tuned)",
    "H": "H: SID-SASRec, semantic IDs (-CBS: conditional beam search)",
    "J": "J: LLMs, semantic IDs (fine-tuned)",
    "Z": "LLMs zero-shot, titles (not in the paper's table)",
    "F": "LLMs fine-tuned, titles (not in the paper's table)",
    "R": "other references",
}


#: a reference row's place in the Table 5 layout: baseline name -> group, label, order within the group
TABLE5_REFERENCES: dict[str, dict] = {
    **{name: {"group": "G", "label": f"SASRec {layers}L", "order": layers}
       for name, layers in (("sasrec", 2), ("sasrec-1l", 1), ("sasrec-3l", 3), ("sasrec-4l", 4))},
    "sid-sasrec": {"group": "H", "label": "SID-SASRec 2L-CBS", "order": 2},
    "sid-sasrec-free": {"group": "H", "label": "SID-SASRec 2L", "order": 1},
    "title-cbs": {"group": "Z", "label": "SmolLM2-135M titles-CBS (zero-shot)", "order": 0},
}


def table5_row(row: ScoreRow) -> tuple[str, str, float]:
    """(group, label, order within the group) of a seqrec score row (see the module docstring). An imported
    row is filed by the kind it was imported as (`score --predictions F --kind`, or the file's "kind")."""
    kind = imported_as(row)
    if kind is not None:
        if kind == "reference":
            return "R", f"{row.method} (imported)", 0.0
        group = {"id": "I", "sid": "J"}.get(((row.extra or {}).get("model") or {}).get("items"), "F")
        return group, f"{row.method} (imported)", 0.0
    if row.kind == "reference":
        meta = TABLE5_REFERENCES.get(row.method)
        if meta:
            return meta["group"], meta.get("label", row.method), float(meta.get("order", 0))
        return "R", row.method, 0.0
    items = finetuned_items(row)
    if items == "id" or (items is None and re.match(r"^(id|p5)-", row.method)):
        return "I", row.method, 0.0
    if items == "sid" or (items is None and row.method.startswith("sid-")):
        return "J", row.method, 0.0
    return "Z", f"{row.method} (free text)", 1.0


def _n_label(r: ScoreRow) -> str:
    return str(int(r.metrics["n_scored"])) if r.metrics.get("n_scored") is not None else str(r.n)


def table5(runs: dict[str, list[ScoreRow]]) -> str | None:
    """Table 5 over {dataset: that run's score rows}: NDCG@10 per dataset, Overall, latency, n."""
    by = {d: {(r.method, r.kind): r for r in rows if r.task == "seqrec"} for d, rows in runs.items()}
    methods = list(dict.fromkeys(k for rows in by.values() for k in rows))
    if not methods:
        return None
    datasets = list(by)
    any_row = {m: next(by[d][m] for d in datasets if m in by[d]) for m in methods}
    placed = {m: table5_row(any_row[m]) for m in methods}
    show_invalid = any(r.metrics.get("invalid_share") is not None for rows in by.values() for r in rows.values())
    cols = [*datasets, "Overall", "Latency", "n"] + (["invalid (top-1 / beams)"] if show_invalid else [])
    lines = ["#### Table 5: list-wise next-item recommendation (NDCG@10 over the full catalog, history excluded; "
             "latency per sample)\n", "| Recommender | " + " | ".join(cols) + " |", "|---|" + "---:|" * len(cols)]
    for group, title in TABLE5_GROUPS.items():
        members = sorted((m for m in methods if placed[m][0] == group), key=lambda m: (placed[m][2], placed[m][1]))
        if not members:
            continue
        lines.append(f"| **{title}** |" + " |" * len(cols))
        for m in members:
            vals, lat, cells, ns, inv = [], [], [], [], []
            for d in datasets:
                r = by[d].get(m)
                v = r.metrics.get("NDCG@10") if r is not None else None
                v = v if is_number(v) else None  # undefined (NaN in memory, null in scores.json): a dash either way
                cells.append("–" if v is None else _cell(r, "NDCG@10"))
                if r is None:
                    continue
                if v is not None:
                    vals.append(v)
                t = r.metrics.get("answer_latency_s", r.metrics.get("latency_s"))
                if t is not None:
                    lat.append(t)
                ns.append(_n_label(r))
                if r.metrics.get("invalid_share") is not None:
                    inv.append(f"{r.metrics.get('invalid_top1_share', 0.0):.1%} / {r.metrics['invalid_share']:.1%}")
            overall = f"{statistics.fmean(vals):.4f}" if len(vals) == len(datasets) else "–"
            if len(vals) == len(datasets):
                overall += overall_mark([by[d].get(m) for d in datasets])
            cells += [overall, latency_label(statistics.fmean(lat) if lat else None) + under_load(
                [by[d].get(m) for d in datasets]), " / ".join(ns) or "–"]
            if show_invalid:
                cells.append("; ".join(inv) or "–")
            lines.append(f"| {placed[m][1]} | " + " | ".join(cells) + " |")
    return _with_note(lines)


def paper_tables(rows: list[ScoreRow], dataset: str | None = None) -> str | None:
    """One run's rows in the paper's layouts, its dataset as the one column: Tables 3/4 for ctr rows
    (AUC), Table 5 for seqrec rows (NDCG@10)."""
    parts = [across_datasets({dataset or "AUC": rows}), table5({dataset or "NDCG@10": rows})]
    return "\n".join(p for p in parts if p) or None
