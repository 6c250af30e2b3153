"""Every paper-layout table says when a row covers part of its task's samples (`limit n/M`, `partial n/M`,
`imported n/M`), in the cell and in the means over cells, as the plain score tables do."""

from __future__ import annotations

from recharness.core.types import ScoreRow
from recharness.models.fake import FakeBackend
from recharness.runner import pipeline
from recharness.tasks.perrecbench.table import table1_markdown
from recharness.tasks.recbench.tables import across_datasets, table5
from recharness.tasks.recbench_plus.tables import paper_tables as plus_tables
from recharness.tasks.registry import get_suite


def _line(md: str, start: str) -> str:
    (line,) = [x for x in md.splitlines() if x.startswith(start)]
    return line


def test_a_limited_ctr_run_is_marked_in_tables_3_and_4(ml1m, tmp_path):
    run = tmp_path / "run"
    pipeline.build("recbench", "ml-1m", run, tasks=["ctr"], seed=0, limit=8)
    n = sum(1 for _ in (run / "samples.jsonl").open())
    pipeline.run(run, FakeBackend("fake"), "fake", use_cache=False, limit=10)
    rows = pipeline.score(run, resamples=0)
    fake = next(r for r in rows if r.method == "fake")
    assert fake.coverage == {"answered": 10, "of": n, "why": "limit"} and n > 10
    md = get_suite("recbench").paper_tables(rows, "ml-1m")
    line = _line(md, "| fake |")
    assert line.startswith(f"| fake | {fake.metrics['AUC']:.4f} (limit: n = 10 of {n}) | {fake.metrics['AUC']:.4f} (limit) | ")
    ref = _line(md, "| item_mean |")  # a reference over every sample: no mark
    assert "limit" not in ref and "partial" not in ref


def _row(method, task, metrics, *, kind="model", coverage=None, ci=None, extra=None):
    r = ScoreRow(method, task, metrics, 20, kind=kind, ci=ci or {}, extra=extra or {})
    r.coverage = coverage
    return r


def test_table5_and_across_datasets_mark_each_cell_and_the_overall():
    part = {"answered": 12, "of": 20, "why": "partial"}
    runs = {"ml-1m": [_row("llm", "seqrec", {"NDCG@10": 0.25, "latency_s": 0.5}, coverage=part),
                      _row("popularity", "seqrec", {"NDCG@10": 0.125}, kind="reference")],
            "goodreads": [_row("llm", "seqrec", {"NDCG@10": 0.5, "latency_s": 0.5})]}
    md = table5(runs)
    assert _line(md, "| llm (free text) |") == \
        "| llm (free text) | 0.2500 (partial: n = 12 of 20) | 0.5000 | 0.3750 (partial) | 500.00ms | 20 / 20 |"
    assert _line(md, "| popularity |") == "| popularity | 0.1250 | – | – | – | 20 |"
    ctr = {"a": [_row("llm", "ctr", {"AUC": 0.75}, coverage={"answered": 5, "of": 20, "why": "limit"},
                      ci={"AUC": {"lo": 0.5, "hi": 0.9}})],
           "b": [_row("llm", "ctr", {"AUC": 0.25}, coverage={"answered": 7, "of": 9, "why": "imported"})]}
    assert _line(across_datasets(ctr), "| llm |") == \
        "| llm | 0.7500 [0.5000, 0.9000] (limit: n = 5 of 20) | 0.2500 (imported: n = 7 of 9) | 0.5000 (imported, limit) | – |"


def test_recbench_plus_tables_mark_limited_rows():
    lim = {"answered": 4, "of": 10, "why": "limit"}
    rows = [_row("llm", t, {"P": 0.5, "R": 0.25, "CMR": 1.0, "FTR": 0.0}, coverage=lim if t == "explicit" else None)
            for t in ("explicit", "implicit", "misinformed")]
    md = plus_tables(rows)
    assert _line(md, "| llm |") == ("| llm | 0.500 (limit: n = 4 of 10) | 0.250 (limit: n = 4 of 10) | 1.000 (limit: n = 4 of 10) | "
                                   "0.000 (limit: n = 4 of 10) | 0.500 | 0.250 | 1.000 | 0.000 | 0.500 | 0.250 | 1.000 | "
                                   "0.000 | 0.500 (limit) | 0.250 (limit) | 1.000 (limit) |")


def test_an_undefined_value_is_a_dash_in_the_paper_layouts_whether_read_from_memory_or_scores_json():
    """A CTR row with no usable answer (AUC NaN) and a RecBench+ row with no scored query (P, R, FTR NaN): scored
    in memory the layouts printed "nan"; read back from scores.json (null) the RecBench+ row vanished. Both are
    dashes now, the row kept, and no mean over datasets or query types is made from them."""
    nan = float("nan")
    for auc in (nan, None):
        ctr = {"a": [_row("dead", "ctr", {"AUC": auc, "latency_s": 0.5})], "b": [_row("dead", "ctr", {"AUC": 0.6})]}
        line = _line(across_datasets(ctr), "| dead |")
        assert "nan" not in line and line.startswith("| dead | – | 0.6000 | – |")
        md = table5({"ml-1m": [_row("dead", "seqrec", {"NDCG@10": auc, "latency_s": 0.5})]})
        assert "nan" not in md and _line(md, "| dead (free text) |").startswith("| dead (free text) | – | – |")
    for v in (nan, None):
        rows = [_row("dead", t, {"P": v, "R": v, "FTR": v, "n_scored": 0.0}) for t in ("explicit", "implicit",
                                                                                         "misinformed")]
        md = plus_tables(rows)
        assert "nan" not in md and set(_line(md, "| dead |").strip("| ").split(" | ")[1:]) == {"–"}


def test_perrecbench_table1_marks_limited_rows():
    from recharness.tasks.perrecbench.groups import LEVELS

    lim = {"answered": 3, "of": 12, "why": "limit"}
    metrics = {**{f"tau_{lv}": 0.5 for lv in LEVELS}, "tau": 0.5, "tau_rank": 0.5}
    rows = [_row("llm", "point", {**metrics, "MAE": 1.0, "RMSE": 1.5}),
            _row("llm", "pair", metrics), _row("llm", "list", metrics, coverage=lim)]
    line = _line(table1_markdown(rows), "| llm |")
    cells = line.strip("| ").split(" | ")
    assert cells[1:4] == ["0.50", "0.50", "0.50 (limit: n = 3 of 12)"]  # easy point / pair / list
    assert cells[10] == "0.50 (limit)" and cells[11:] == ["1.000", "1.500"]


def test_perrecbench_table1_says_when_unparsed_groups_are_left_out():
    """Under invalid=drop the note said such groups were "scored 0"."""
    from recharness.tasks.perrecbench.groups import LEVELS

    metrics = {**{f"tau_{lv}": 0.5 for lv in LEVELS}, "tau": 0.5, "tau_rank": 0.5}
    zero = table1_markdown([_row("llm", "pair", metrics)])
    assert "scored 0" in zero and "left out" not in zero
    drop = table1_markdown([_row("llm", "pair", {**metrics, "dropped_unparsed": 2.0, "levels_without_tau": 1.0})])
    assert "scored 0" not in drop and "left out (invalid=drop)" in drop and "averages the others" in drop


def test_small_values_and_bounds_are_not_printed_as_zero():
    """RecBench+ printed P 0.0004 [0.0001, 0.0011] as "0.000 [0.000, 0.001]", Table 5 a bound 0.0004 as 0.000."""
    from recharness.tasks.recbench.tables import _cell
    from recharness.tasks.recbench_plus.tables import _fmt

    assert _fmt(0.0004, {"lo": 0.0001, "hi": 0.0011}) == "4.00e-04 [1.00e-04, 0.001]"
    assert _fmt(0.25, {"lo": 0.2, "hi": 0.3}) == "0.250 [0.200, 0.300]"
    r = _row("llm", "seqrec", {"NDCG@10": 0.0021}, ci={"NDCG@10": {"lo": 0.0004, "hi": 0.0040}})
    assert _cell(r, "NDCG@10") == "0.0021 [0.0004, 0.0040]"
    r = _row("llm", "seqrec", {"NDCG@10": 0.0001}, ci={"NDCG@10": {"lo": 0.00005, "hi": 0.0003}})
    assert _cell(r, "NDCG@10") == "0.0001 [5.00e-05, 0.0003]"


def test_a_verdicts_small_difference_is_not_printed_as_zero():
    from recharness.report.tables import signed

    assert signed(4e-05) == "+4.0e-05" and signed(-0.0123) == "-0.0123" and signed(0.0) == "+0.0000"


def test_the_csvs_mark_an_import_over_every_sample(tmp_path):
    """scores.csv gave another tool's full import an empty coverage cell, as a run of this harness; the tables
    say `[imported]`."""
    import csv

    from recharness.report.tables import write_scores

    rows = [_row("other-tool", "direct", {"HR@1": 0.5}, extra={"model": {"backend": "imported"}}),
            _row("ref-import", "direct", {"HR@1": 0.4}, extra={"model": {"backend": "imported", "kind": "reference"}}),
            _row("fake", "direct", {"HR@1": 0.3}, extra={"model": {"backend": "fake"}})]
    paths = write_scores(rows, tmp_path)
    got = {r["method"]: r["coverage"] for r in csv.DictReader(paths["csv"].open())}
    assert got == {"other-tool": "imported", "ref-import": "imported as reference", "fake": ""}
