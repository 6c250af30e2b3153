"""Which row is bold, and what compare prints, with few units (issue 22 audit):

* a row alone in its comparison (a `limit n/M` row, scored on samples no other row was) gets no mark;
* with <= EXACT_MAX_UNITS independent units the table's p_vs_best is the exact sign-flip test's, the p
  `compare` reports on the same data (they used to disagree: bootstrap p 0.0 vs exact p 0.969);
* compare gives no interval from fewer than MIN_UNITS units ("n too small"), as the tables do.
"""

from __future__ import annotations

import math

import pytest

from recharness.core.types import ScoreRow
from recharness.report.tables import to_markdown
from recharness.runner import compare, intervals, pipeline
from tests.test_confidence_tables import _fake_run, _MeanTask


def _rows(task, samples, preds: dict[str, dict], resamples=500):
    scored = [(ScoreRow(m, "toy", task.score(samples, p), len(samples)), p) for m, p in preds.items()]
    intervals.add_confidence_intervals(task, samples, scored, resamples=resamples, seed=0)
    return [r for r, _ in scored]


def test_a_row_alone_in_its_comparison_is_not_marked_best():
    task = _MeanTask(with_units=True)
    full = [{"id": f"s{i}"} for i in range(30)]
    a = {s["id"]: {"x": float(i % 2)} for i, s in enumerate(full)}
    b = {s["id"]: {"x": float(i % 3 == 0)} for i, s in enumerate(full)}
    both = _rows(task, full, {"a": a, "b": b})
    assert both[0].ci["HR@10"]["top"] is True and both[0].metrics["HR@10"] == 0.5
    limited = full[:12]  # another sample set: compared with nothing
    (alone,) = _rows(task, limited, {"lim": {s["id"]: {"x": 1.0} for s in limited}})
    alone.coverage = {"answered": 12, "of": 30, "why": "limit"}
    assert alone.metrics["HR@10"] == 1.0 and alone.ci["HR@10"]["lo"] == 1.0
    assert "top" not in alone.ci["HR@10"] and alone.ci["HR@10"]["p_vs_best"] is None
    md = to_markdown([*both, alone])
    assert "| lim [limit: n = 12 of 30] | 1.000 [1.000, 1.000] |" in md  # not bold (it was: best of one)
    assert "| a | **0.500 [" in md


def test_few_units_bold_follows_the_exact_test_not_the_bootstrap():
    """Six units, A ahead on five by 1 and tied on one: the bootstrap p is ~0 (a resample is all ties with
    probability 6**-6), the exact sign-flip p is 4/64 = 0.0625: not distinguishable, so both are bold."""
    task = _MeanTask(with_units=True)
    samples = [{"id": f"s{i}"} for i in range(6)]
    a = {s["id"]: {"x": 1.0} for s in samples}
    b = {s["id"]: {"x": 0.0 if i < 5 else 1.0} for i, s in enumerate(samples)}
    ra, rb = _rows(task, samples, {"a": a, "b": b})
    assert ra.ci["HR@10"]["top"] and ra.ci["HR@10"]["p_vs_best"] is None
    c = rb.ci["HR@10"]
    assert c["p_vs_best"] == pytest.approx(4 / 64, abs=1e-12) and c["p_test"] == "exact" and c["top"] is True
    assert "exact paired sign-flip test up to 20" in rb.extra["ci_settings"]["best"]
    # above 20 units the paired bootstrap decides, as before
    many = [{"id": f"s{i}"} for i in range(40)]
    a40 = {s["id"]: {"x": 1.0} for s in many}
    b40 = {s["id"]: {"x": 0.0 if i < 20 else 1.0} for i, s in enumerate(many)}
    _, r40 = _rows(task, many, {"a": a40, "b": b40})
    assert r40.ci["HR@10"]["p_test"] == "bootstrap" and r40.ci["HR@10"]["p_vs_best"] == 0.0


def test_the_table_and_compare_give_the_same_p_on_the_same_data(ml1m, tmp_path):
    """CTR on 6 users: every row's p_vs_best is compare's exact p for (best row, that row)."""
    run = _fake_run("recbench", "ctr", "ml-1m", tmp_path / "ctr", limit=6)
    rows = pipeline.score(run, resamples=300)
    checked = 0
    for m in ("AUC", "logloss"):
        best = next(r for r in rows if r.ci.get(m, {}).get("top") and r.ci[m].get("p_vs_best") is None)
        for r in rows:
            c = r.ci.get(m)
            if r is best or c is None or c.get("p_vs_best") is None:
                continue
            (res,) = [x for x in compare.compare(run, [best.method, r.method], resamples=300, permutations=300)
                      if x["metric"] == m]
            assert res["exact"] and res["units"] == 6 and res["p_boot"] is None
            assert c["p_test"] == "exact" and c["p_vs_best"] == pytest.approx(res["p_perm"], abs=1e-12)
            assert c["top"] == (res["p_perm"] >= 0.05 or res["diff"] == 0)
            checked += 1
    assert checked >= 4
    item_mean = next(r for r in rows if r.method == "item_mean")
    # the exact sign-flip test over 6 users (32 distinct sign patterns), percentile ranks swapped
    assert item_mean.ci["AUC"]["p_vs_best"] == pytest.approx(11 / 32) and item_mean.ci["AUC"]["top"]


def test_compare_gives_no_interval_from_fewer_than_five_units(ml1m, tmp_path):
    """PerRecBench with one group per level: 3 groups overall, 1 per level; never `-1.000 [-1.000, -1.000]`."""
    from recharness.cli import _compare_tables

    run = _fake_run("perrecbench", "list", "ml-1m", tmp_path / "run", limit=1)
    res = {r["metric"]: r for r in compare.compare(run, ["fake", "random"], resamples=300, permutations=300)}
    for m, units in (("tau", 3), ("tau_easy", 1), ("tau_medium", 1), ("tau_hard", 1)):
        r = res[m]
        assert math.isnan(r["lo"]) and math.isnan(r["hi"]) and r["p_boot"] is None, r
        assert r["no_interval"] == f"n too small: {units} unit{'s' if units != 1 else ''}"
        assert r["exact"] and r["permutations"] == 8  # the exact test still runs: its p cannot go below 0.25
    assert res["tau_easy"]["p_perm"] == 1.0 and res["tau"]["p_perm"] == pytest.approx(0.25)
    (tab, note), = _compare_tables(list(res.values()))
    assert "tau_easy: n too small for an interval (1 unit)" in note and "tau: n too small" in note
    from rich.console import Console

    con = Console(width=200, record=True)
    con.print(tab)
    text = con.export_text()
    assert "│ tau_easy ↑   │ 0.000 │ 1.000  │ -1.000 " in text and "[-1.000, -1.000]" not in text


class _SubsetTask(_MeanTask):
    """MAE over each method's own valid answers (`valid` in the record), as llmrec rating's MAE."""

    name = "toy-subset"
    headline = "MAE"

    def __init__(self):
        super().__init__(with_units=True)

    def _parts(self, samples, predictions):
        recs = [predictions.get(s["id"]) or {} for s in samples]
        return [float(r.get("x", 0.0)) for r in recs], [bool(r.get("valid", True)) for r in recs]

    def score(self, samples, predictions):
        x, ok = self._parts(samples, predictions)
        kept = [v for v, k in zip(x, ok) if k]
        return {"MAE": float(sum(kept) / len(kept)) if kept else float("nan")}

    def units(self, samples, predictions):
        from recharness.metrics.bootstrap import mean_units

        x, ok = self._parts(samples, predictions)
        return {"MAE": mean_units([s["id"] for s in samples], x, ok)}


def test_rows_over_different_subsets_get_no_best_mark_and_no_verdict():
    """A model valid on 10 easy samples of 400 has MAE 0 there; the reference's MAE over all 400 is higher. The
    two rest on different samples: neither is bold, the model gets no verdict against the reference, and the
    table says why (it used to be bold, the reference 'below' it at p = 0)."""
    task = _SubsetTask()
    samples = [{"id": f"s{i}"} for i in range(400)]
    model = {s["id"]: ({"x": 0.0} if i < 10 else {"x": 3.0, "valid": False}) for i, s in enumerate(samples)}
    ref = {s["id"]: {"x": 0.5 + (i % 3) * 0.25} for i, s in enumerate(samples)}
    scored = [(ScoreRow("llm", "toy-subset", task.score(samples, model), 400), model),
              (ScoreRow("ref", "toy-subset", task.score(samples, ref), 400, kind="reference"), ref)]
    intervals.add_confidence_intervals(task, samples, scored, resamples=200, seed=0)
    llm, reference = (r for r, _ in scored)
    assert llm.metrics["MAE"] == 0.0 and reference.metrics["MAE"] == pytest.approx((134 * 0.5 + 133 * 0.75 + 133 * 1.0) / 400, abs=1e-12)
    for r in (llm, reference):
        assert "top" not in r.ci["MAE"] and r.ci["MAE"]["not_compared"] == intervals.DIFFERENT_SUBSETS
    assert reference.extra["strongest_reference"] == "MAE"
    assert "vs_strongest_reference" not in llm.extra and "different samples" in llm.extra["no_verdict"]
    md = to_markdown([llm, reference])
    assert "**" not in md and "No bold in MAE" in md and "No verdict against" in md
    # on the same subset (both valid everywhere) the mark and the verdict are back
    model_all = {s["id"]: {"x": 0.0} for s in samples}
    scored = [(ScoreRow("llm", "toy-subset", task.score(samples, model_all), 400), model_all),
              (ScoreRow("ref", "toy-subset", task.score(samples, ref), 400, kind="reference"), ref)]
    intervals.add_confidence_intervals(task, samples, scored, resamples=200, seed=0)
    assert scored[0][0].ci["MAE"]["top"] is True and scored[0][0].extra["vs_strongest_reference"]["verdict"] == "beats"


def test_the_strongest_reference_is_the_best_one_even_without_an_interval():
    """A stronger reference without an interval (4 units: n too small) is still the strongest: no verdict is
    given against the weaker one that has an interval."""
    task = _SubsetTask()
    samples = [{"id": f"s{i}"} for i in range(30)]
    weak = {s["id"]: {"x": 1.0 + (i % 2)} for i, s in enumerate(samples)}
    strong = {s["id"]: ({"x": 0.1} if i < 4 else {"x": 9.0, "valid": False}) for i, s in enumerate(samples)}
    model = {s["id"]: {"x": 0.5 + (i % 2)} for i, s in enumerate(samples)}
    scored = [(ScoreRow("llm", "toy-subset", task.score(samples, model), 30), model),
              (ScoreRow("weak", "toy-subset", task.score(samples, weak), 30, kind="reference"), weak),
              (ScoreRow("strong", "toy-subset", task.score(samples, strong), 30, kind="reference"), strong)]
    intervals.add_confidence_intervals(task, samples, scored, resamples=200, seed=0)
    llm, weak_row, strong_row = (r for r, _ in scored)
    assert "MAE" not in strong_row.ci and strong_row.extra["no_interval"]["MAE"] == "n too small: 4 units"
    assert "strongest_reference" not in strong_row.extra and "strongest_reference" not in weak_row.extra
    assert "vs_strongest_reference" not in llm.extra
    assert strong_row.extra["no_verdicts"] == {"metric": "MAE", "why": "n too small: 4 units"}
    assert "the best reference by MAE, strong, has no interval" in to_markdown([llm, weak_row, strong_row])


def test_a_task_with_units_is_never_resampled_sample_by_sample():
    """Units offered but none a number on these samples (every answer invalid: MAE undefined): no interval from
    re-scoring resampled samples either, which would ignore the task's clusters."""
    task = _SubsetTask()
    samples = [{"id": f"s{i}"} for i in range(30)]
    bad = {s["id"]: {"x": 1.0, "valid": False} for s in samples}
    good = {s["id"]: {"x": float(i % 3)} for i, s in enumerate(samples)}
    scored = [(ScoreRow("bad", "toy-subset", task.score(samples, bad), 30), bad),
              (ScoreRow("good", "toy-subset", task.score(samples, good), 30), good)]
    intervals.add_confidence_intervals(task, samples, scored, resamples=100, seed=0)
    assert math.isnan(scored[0][0].metrics["MAE"]) and scored[0][0].ci == {}
    assert not scored[1][0].ci["MAE"]["generic"]


def test_undefined_values_are_null_in_scores_json_and_a_dash_in_tables(tmp_path):
    import json

    from recharness.report.tables import fmt, write_scores

    row = ScoreRow("m", "toy", {"RMSE": float("nan"), "MAE": 0.5, "AUC": float("inf")}, 3)
    paths = write_scores([row], tmp_path)
    text = paths["json"].read_text()
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text)[0]["metrics"] == {"RMSE": None, "MAE": 0.5, "AUC": None}
    assert fmt(float("nan")) == "–" and fmt(float("inf")) == "–"
    assert "nan" not in paths["csv"].read_text() and "nan" not in paths["md"].read_text()
    assert "| m | – | 0.500 | – |" in to_markdown([row])  # RMSE, MAE, AUC


def test_a_bootstrap_p_of_zero_is_stated_as_below_two_over_the_resamples():
    from recharness.report.tables import _p_text

    assert _p_text(0.0, 1000) == "p < 0.002" and _p_text(0.03, 1000) == "p = 0.03"
    assert _p_text(0.0004, 1000) == "p < 0.001" and _p_text(0.0, None) == "p < 0.001"
    from recharness.report.tables import p_value  # compare prints the same figures without "p ="
    assert (p_value(0.0, 1000), p_value(0.5), p_value(None)) == ("< 0.002", "0.5", "–")


def test_a_pooled_mean_over_other_counts_is_another_subset():
    """PerRecBench MAE pools the users each group's answer rated: 2 of 3 rated is another subset than 3 of 3, even
    where both groups have a value (a mask of den > 0 would call them the same)."""
    from recharness.metrics.bootstrap import RatioUnits, mean_units

    ids = ["g1", "g2"]
    full, part = RatioUnits(ids, [1.0, 2.0], [3.0, 3.0]), RatioUnits(ids, [1.0, 2.0], [3.0, 2.0])
    assert full.subset() != part.subset() and full.subset() == RatioUnits(ids, [0.5, 0.0], [3.0, 3.0]).subset()
    assert mean_units(ids, [1.0, 0.0]).subset() is None  # a plain mean over all units
    assert mean_units(ids, [1.0, 0.0], [True, False]).subset() == mean_units(ids, [0.0, 5.0], [True, False]).subset()


def test_a_null_p_from_scores_json_reads_as_a_dash():
    from recharness.report.tables import _p_text

    assert _p_text(None, 1000) == "p = –" and _p_text(float("nan"), 1000) == "p = –"


def test_the_generic_path_gives_no_interval_from_fewer_than_five_samples():
    """A task without units is re-scored on resampled samples, each sample a unit: three samples are too few,
    as on the units path (it gave [0, 1] and a zero-width [0, 0], and bold marks)."""
    task = _MeanTask(with_units=False)
    samples = [{"id": f"s{i}"} for i in range(3)]
    rows = _rows(task, samples, {"a": {s["id"]: {"x": 1.0} for s in samples},
                                 "b": {s["id"]: {"x": float(i % 2)} for i, s in enumerate(samples)}})
    for r in rows:
        assert r.ci == {} and r.extra["no_interval"]["HR@10"] == "n too small: 3 units"
    assert "**" not in to_markdown(rows)


def test_few_samples_without_units_are_tested_by_swapping_not_by_the_bootstrap():
    """Five samples, a always right and b always wrong, the task without units: every bootstrap resample agrees
    (p 0, b lost its bold), but five paired samples cannot show more than the exact swap test's smallest p, 2/32;
    with units the exact sign-flip test gives the same, as the table note says."""
    samples = [{"id": f"s{i}"} for i in range(5)]
    preds = {"a": {s["id"]: {"x": 1.0} for s in samples}, "b": {s["id"]: {"x": 0.0} for s in samples}}
    generic = _rows(_MeanTask(with_units=False), samples, preds)
    units = _rows(_MeanTask(with_units=True), samples, preds)
    for rows in (generic, units):
        b = rows[1].ci["HR@10"]
        assert b["p_vs_best"] == pytest.approx(2 / 32) and b["top"] is True, b
    assert generic[1].ci["HR@10"]["p_test"] == "exact" and generic[1].ci["HR@10"]["generic"]
    assert "paired swap test by re-scoring" in to_markdown(generic)
    # 21 samples: above the exact range, the bootstrap on the shared resamples as before
    many = [{"id": f"s{i}"} for i in range(21)]
    big = _rows(_MeanTask(with_units=False), many, {"a": {s["id"]: {"x": 1.0} for s in many},
                                                     "b": {s["id"]: {"x": 0.0} for s in many}})
    assert big[1].ci["HR@10"]["p_test"] == "bootstrap" and big[1].ci["HR@10"]["p_vs_best"] == 0.0


def test_a_swap_test_too_long_to_enumerate_draws_random_swaps_not_the_first_ones():
    """When every swap does not fit the time budget, random swaps: the first 200 of the enumeration swap only the
    first 8 samples, a null that leaves the last four differences alone (p 0.5 here instead of about 2/64)."""
    task = _MeanTask(with_units=False)
    samples = [{"id": f"s{i}"} for i in range(12)]
    a = {s["id"]: {"x": float(i >= 6)} for i, s in enumerate(samples)}  # a right on the last six, b never
    b = {s["id"]: {"x": 0.0} for s in samples}
    exact = intervals.swap_test(task, samples, a, b, ["HR@10"], 1000, 0, budget_s=60)["HR@10"]
    assert exact["exact"] and exact["permutations"] == 4096 and exact["p_perm"] == pytest.approx(2 / 64)
    cut = intervals.swap_test(task, samples, a, b, ["HR@10"], 1000, 0, budget_s=0.0)["HR@10"]
    assert not cut["exact"] and cut["permutations"] == 200 and cut["p_perm"] < 0.1, cut


def test_an_unfinished_reference_is_named_in_the_table_note():
    row = ScoreRow("m", "toy", {"HR@10": 0.5}, 10, extra={"unfinished_references": ["ease"]})
    assert "Not in this table: ease, whose training began but wrote no predictions" in to_markdown([row])


def test_why_no_row_is_tested_is_said_when_no_row_has_an_interval():
    """Every row too small for an interval: the note used to end before saying that the best reference has none,
    so no model row got a verdict and nothing said why."""
    from recharness.report.tables import ci_note

    ref = ScoreRow("popularity", "toy", {"MAE": 0.5}, 4, kind="reference",
                   extra={"no_interval": {"MAE": "n too small: 4 units"},
                          "no_verdicts": {"metric": "MAE", "why": "n too small: 4 units"}})
    model = ScoreRow("m", "toy", {"MAE": 0.7}, 4, extra={"no_interval": {"MAE": "n too small: 4 units"}})
    note = ci_note([model, ref])
    assert note is not None and "No model row is tested against a reference: the best reference by MAE, popularity, " \
        "has no interval (n too small: 4 units)" in note


def test_the_auc_random_flips_are_said_only_where_a_row_rests_on_them():
    from recharness.report.tables import ci_note

    def row(name, p_test, generic=False):
        ci = {"lo": 0.5, "hi": 0.7, "resamples": 1000, "p_vs_best": 0.2, "p_test": p_test, "top": True,
              **({"generic": True} if generic else {})}
        return ScoreRow(name, "ctr", {"AUC": 0.6}, 40, ci={"AUC": ci})

    said = "AUC's sign-flip test is exact up to 16 independent units; from 17 to 20 it takes 1,000 random flips."
    assert said in ci_note([row("a", "permutation"), row("b", "exact")])
    assert said not in ci_note([row("a", "exact"), row("b", "bootstrap")])
    assert said not in ci_note([row("a", "permutation", generic=True)])  # the swap test's own note says its part
