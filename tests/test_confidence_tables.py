"""Confidence intervals in every score table, `compare`, and the two fidelity fixes of issue 13.

* every task of every suite: each metric that gets an interval has one, from its units (whose
  point value must equal the scored value, else the interval is left out), seqrec by re-scoring;
* the tables: "value ± half-width", best and not-distinguishable rows in bold, a note saying so,
  `<metric>_lo` / `_hi` in scores.csv, the `ci` record in scores.json;
* the generic path (re-scoring resampled samples) gives the same replicates as units on a mean;
* `compare`: paired bootstrap and permutation p-values, checked against scipy on the run's own
  numbers, samples answered by one method only counted and left out;
* PerRecBench compat averages over a label file's groups (hand example: 0.7778, not 0.6667).
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
from scipy import stats
from typer.testing import CliRunner

from recharness.cli import app
from recharness.core.io import read_jsonl, write_jsonl_atomic
from recharness.core.types import ScoreRow
from recharness.metrics.registry import wants_ci
from recharness.models.fake import FakeBackend
from recharness.report.tables import to_markdown, write_scores
from recharness.runner import compare, intervals, pipeline
from recharness.tasks.base import Task

CASES = [("llmrec", "sequential", "ml-1m"), ("llmrec", "direct", "ml-1m"), ("llmrec", "rating", "ml-1m"),
         ("llmrec", "explanation", "amazon2023"), ("llmrec", "summarization", "amazon2023"),
         ("perrecbench", "point", "ml-1m"), ("perrecbench", "pair", "ml-1m"), ("perrecbench", "list", "ml-1m"),
         ("recbench", "ctr", "ml-1m"), ("recbench", "seqrec", "ml-1m"),
         ("recbench-plus", "explicit", "ml-1m"), ("recbench-plus", "interest", "ml-1m")]


def _fake_run(suite, task, ds, path, limit=6):
    pipeline.build(suite, ds, path, tasks=[task], seed=0, limit=limit)
    pipeline.run(path, FakeBackend("fake"), "fake", use_cache=False)
    return path


@pytest.mark.parametrize("suite, task, ds", CASES)
def test_every_metric_gets_an_interval(suite, task, ds, ml1m, amazon2023, tmp_path):
    from recharness.tasks.registry import get_task

    generic = type(get_task(suite, task)).units is Task.units
    run = _fake_run(suite, task, ds, tmp_path / "run")
    rows = pipeline.score(run, resamples=200)
    assert len(rows) >= 2
    for r in rows:
        want = [m for m, v in r.metrics.items() if wants_ci(m) and isinstance(v, float) and math.isfinite(v)]
        single = set(r.extra.get("no_interval", {}))  # metrics carried by one unit: no interval, said so
        assert want and set(want) == set(r.ci) | single and not single & set(r.ci), (r.method, want, r.ci, single)
        assert all(v.startswith("n too small: ") for v in r.extra.get("no_interval", {}).values())
        assert r.ci, (r.method, r.extra.get("no_interval"))  # the checks below run on every row
        for m, c in r.ci.items():
            assert c["lo"] <= c["hi"] and c["resamples"] >= 100, (m, c)
            assert c["generic"] == generic, (m, c)  # a task without units is re-scored
        assert r.extra["ci_settings"]["resamples"] == 200
    assert re.search(r"\d \[-?\d\.\d{3}, -?\d\.\d{3}\]", to_markdown(rows))
    assert not pipeline.score(run, resamples=0)[0].ci  # 0 disables


def test_tables_show_intervals_and_mark_the_best(tmp_path):
    ci = lambda lo, hi, top, p=None: {"lo": lo, "hi": hi, "resamples": 1000, "generic": False, "top": top,  # noqa: E731
                                      "p_vs_best": p}
    rows = [ScoreRow("a", "t", {"HR@10": 0.5, "RMSE": 1.0, "words": 3.0}, 10,
                     ci={"HR@10": ci(0.4, 0.6, True), "RMSE": ci(0.9, 1.1, False, 0.01)},
                     extra={"ci_settings": {"resamples": 1000, "seed": 0}}),
            ScoreRow("b", "t", {"HR@10": 0.45, "RMSE": 0.8, "words": 2.0}, 10, kind="reference",
                     ci={"HR@10": ci(0.35, 0.55, True, 0.3), "RMSE": ci(0.7, 0.9, True)})]
    md = to_markdown(rows)
    assert "| a | **0.500 [0.400, 0.600]** | 1.000 [0.900, 1.100] | 3.000 |" in md
    assert "| b (ref) | **0.450 [0.350, 0.550]** | **0.800 [0.700, 0.900]** | 2.000 |" in md
    assert "95% bootstrap interval (1,000 resamples" in md and "p ≥ 0.05" in md
    paths = write_scores(rows, tmp_path)
    lines = paths["csv"].read_text().splitlines()
    assert lines[0] == "task,method,kind,n,coverage,HR@10,HR@10_lo,HR@10_hi,RMSE,RMSE_lo,RMSE_hi,words"
    assert lines[1] == "t,a,model,10,,0.5,0.4,0.6,1.0,0.9,1.1,3.0"
    back = json.loads(paths["json"].read_text())
    assert back[1]["ci"]["HR@10"] == {"lo": 0.35, "hi": 0.55, "resamples": 1000, "generic": False, "top": True,
                                      "p_vs_best": 0.3}
    from recharness.report.html import write_report
    from recharness.report.tables import load_scores

    html = write_report(load_scores(tmp_path), tmp_path).read_text()
    assert "<td><b>0.800</b><small class='ci'>[0.700, 0.900]</small></td>" in html and "p ≥ 0.05" in html
    assert "<td>1.000<small class='ci'>[0.900, 1.100]</small></td>" in html


class _MeanTask(Task):
    """A toy task scored by the mean of x over valid answers, with or without units."""

    name = "toy"

    def __init__(self, with_units: bool):
        self.with_units = with_units

    def build(self, dataset, config):
        return iter(())

    def parse(self, sample, text):
        raise NotImplementedError

    def _vals(self, samples, predictions):
        return [float((predictions.get(s["id"]) or {}).get("x", 0.0)) for s in samples]

    def score(self, samples, predictions):
        return {"HR@10": float(np.mean(self._vals(samples, predictions)))}

    def units(self, samples, predictions):
        from recharness.metrics.bootstrap import mean_units

        return {"HR@10": mean_units([s["id"] for s in samples], self._vals(samples, predictions))} if self.with_units else {}


def test_generic_path_resamples_as_the_units_do():
    rng = np.random.default_rng(0)
    samples = [{"id": f"s{i}"} for i in range(40)]
    preds = [{s["id"]: {"x": float(rng.random() < q)} for s in samples} for q in (0.3, 0.6)]
    out = {}
    for with_units in (True, False):
        task = _MeanTask(with_units)
        scored = [(ScoreRow(m, "toy", task.score(samples, p), 40), p) for m, p in zip("ab", preds)]
        intervals.add_confidence_intervals(task, samples, scored, resamples=300, seed=1)
        out[with_units] = [r.ci["HR@10"] for r, _ in scored]
    for u, g in zip(out[True], out[False]):
        assert not u["generic"] and g["generic"]
        assert (u["lo"], u["hi"], u["p_vs_best"], u["top"]) == pytest.approx((g["lo"], g["hi"], g["p_vs_best"], g["top"]))


class _RatioTask(_MeanTask):
    """A plug-in task without units whose metric is no mean of per-sample values: hits over items listed,
    summed over the samples (a micro-averaged precision). Only re-scoring resampled samples gives its interval."""

    def __init__(self):
        super().__init__(with_units=False)

    def score(self, samples, predictions):
        got = [predictions.get(s["id"]) or {} for s in samples]
        return {"HR@10": sum(g.get("hits", 0) for g in got) / sum(g.get("listed", 1) for g in got)}


def test_the_generic_path_interval_of_a_plug_in_task_is_the_hand_worked_bootstrap():
    """Exact values: every resample of the 40 samples (repeats kept) re-scored by the task, the 2.5/97.5
    percentiles of those, and the paired bootstrap p of the two rows over the same resamples, worked by hand
    with matrix products from the same counts, not through the harness's re-scoring."""
    from recharness.metrics.bootstrap import resample_counts

    rng = np.random.default_rng(3)
    n, resamples, seed = 40, 300, 1
    samples = [{"id": f"s{i}"} for i in range(n)]
    listed = rng.integers(1, 6, size=(2, n))
    hits = np.minimum(listed, rng.binomial(listed, [[0.3], [0.45]]))
    preds = [{s["id"]: {"hits": int(hits[r, i]), "listed": int(listed[r, i])} for i, s in enumerate(samples)}
             for r in range(2)]
    task = _RatioTask()
    scored = [(ScoreRow(m, "toy", task.score(samples, p), n), p) for m, p in zip("ab", preds)]
    ratio = hits.sum(1) / listed.sum(1)
    assert [r.metrics["HR@10"] for r, _ in scored] == pytest.approx(ratio, abs=1e-15)
    assert ratio[0] != pytest.approx(np.mean(hits[0] / listed[0]))  # not a mean of per-sample values
    intervals.add_confidence_intervals(task, samples, scored, resamples=resamples, seed=seed)
    w = np.concatenate(list(resample_counts(n, resamples, seed))).astype(np.float64)
    assert w.shape == (resamples, n)
    reps = (w @ hits.T) / (w @ listed.T)  # (resamples, 2)
    for j, (row, _) in enumerate(scored):
        ci = row.ci["HR@10"]
        lo, hi = np.percentile(reps[:, j], [2.5, 97.5])
        assert ci["generic"] and ci["resamples"] == resamples
        assert (ci["lo"], ci["hi"]) == pytest.approx((lo, hi), abs=1e-12)
    best, other = (0, 1) if ratio[0] > ratio[1] else (1, 0)
    d = reps[:, other] - reps[:, best]
    p = min(1.0, 2 * min(np.mean(d <= 0), np.mean(d >= 0)))
    assert scored[best][0].ci["HR@10"]["top"] and scored[best][0].ci["HR@10"]["p_vs_best"] is None
    assert scored[other][0].ci["HR@10"]["p_vs_best"] == pytest.approx(p, abs=1e-12)
    assert scored[other][0].ci["HR@10"]["p_test"] == "bootstrap"
    assert scored[other][0].ci["HR@10"]["top"] == (p >= 0.05)


def test_units_that_fail_give_no_interval_not_a_resampling_of_plain_samples(monkeypatch):
    """A task with units whose `units` raises (a bug) loses those intervals and says why; it never falls
    back to re-scoring plain samples, which would ignore its users, groups and orders."""
    monkeypatch.delenv("RECHARNESS_STRICT_UNITS", raising=False)  # strict (the suite's default) raises instead

    class Broken(_MeanTask):
        def units(self, samples, predictions):
            raise ValueError("bug")

    samples = [{"id": f"s{i}"} for i in range(40)]
    preds = [{s["id"]: {"x": float(i % q == 0)} for i, s in enumerate(samples)} for q in (2, 3)]
    task = Broken(True)
    scored = [(ScoreRow(m, "toy", task.score(samples, p), 40), p) for m, p in zip("ab", preds)]
    intervals.add_confidence_intervals(task, samples, scored, resamples=100, seed=0)
    for row, _ in scored:
        assert "HR@10" not in row.ci and row.extra["no_interval"]["HR@10"] == "the task's units failed (ValueError)"
    assert "(no interval: the task's units failed (ValueError))" in to_markdown([r for r, _ in scored])
    monkeypatch.setenv("RECHARNESS_STRICT_UNITS", "1")
    with pytest.raises(ValueError, match="bug"):
        intervals.checked_units(task, samples, preds[0], {"HR@10": 0.5})


# ---------------------------------------------------------------- compare


@pytest.fixture
def ctr_run(ml1m, tmp_path):
    return _fake_run("recbench", "ctr", "ml-1m", tmp_path / "ctr", limit=15)


def test_compare_agrees_with_scipy_on_the_runs_numbers(ctr_run):
    res = compare.compare(ctr_run, ["fake", "item_mean"], resamples=2000, permutations=2000)
    by = {r["metric"]: r for r in res}
    assert {"AUC", "GAUC", "GAUC_pos", "GAUC_unweighted", "logloss", "invalid_rate"} <= set(by)
    samples = [s for s in read_jsonl(ctr_run / "samples.jsonl")]
    fake = {r["id"]: r for r in read_jsonl(ctr_run / "predictions" / "fake.jsonl")}
    y = np.array([s["label"] for s in samples])
    pa = np.array([fake[s["id"]]["parsed"]["p_yes"] for s in samples])
    rows = pipeline.score(ctr_run, resamples=0)
    ref_row = next(r for r in rows if r.method == "item_mean")
    fake_row = next(r for r in rows if r.method == "fake")
    auc = by["AUC"]
    assert auc["n"] == len(samples) == 60 and auc["only_a"] == auc["only_b"] == 0
    assert (auc["value_a"], auc["value_b"]) == (fake_row.metrics["AUC"], ref_row.metrics["AUC"])
    # the same test on the same numbers by scipy: item_mean's scores recovered from its own records
    from recharness.tasks.registry import get_task

    task = get_task("recbench", "ctr")
    task.run_dir = ctr_run
    from recharness.data.store import load_dataset

    refs = task.references(load_dataset("ml-1m"), samples)["item_mean"]
    pb = np.array([refs[s["id"]]["parsed"]["p_yes"] for s in samples])
    def auc_of(scores, labels, axis=-1):  # Mann-Whitney U of average ranks, vectorised for scipy
        r = stats.rankdata(scores, axis=axis)
        pos = labels.sum(axis)
        neg = labels.shape[axis] - pos
        return ((r * labels).sum(axis) - pos * (pos + 1) / 2) / (pos * neg)

    from sklearn.metrics import roc_auc_score

    assert auc_of(pa, y) == pytest.approx(roc_auc_score(y, pa), abs=1e-12) == auc["value_a"]
    # 15 users (<= 20): the exact sign-flip test over users, a user's pairs swapped together. scipy's exact
    # paired permutation test on the same data: each user an index, the statistic the AUC of the swapped scores
    users = sorted({s["user_id"] for s in samples}, key=[s["user_id"] for s in samples].index)
    of = np.array([users.index(s["user_id"]) for s in samples])
    nu = len(users)
    assert nu == 15 and auc["exact"] and auc["permutations"] == 2**15 and auc["units"] == 15

    ra, rb = stats.rankdata(pa) / len(pa), stats.rankdata(pb) / len(pb)  # each method's percentile ranks swap

    def stat(xa, xb):  # xa[i] >= nu: user i's answers came from B
        from_b = np.asarray(xa)[of] >= nu
        return auc_of(np.where(from_b, rb, ra), y) - auc_of(np.where(from_b, ra, rb), y)

    ref = stats.permutation_test((np.arange(nu), np.arange(nu) + nu), stat, permutation_type="samples",
                                 n_resamples=np.inf)
    assert abs(auc["p_perm"] - ref.pvalue) < 1e-9, (auc["p_perm"], ref.pvalue)
    assert auc["p_boot"] is None  # with so few users no bootstrap p-value is reported
    assert auc["lo"] <= auc["diff"] <= auc["hi"]


def test_compare_on_the_intersection_and_the_cli(ctr_run, tmp_path):
    pf = ctr_run / "predictions" / "fake.jsonl"
    recs = list(read_jsonl(pf))
    write_jsonl_atomic(pf, recs[5:])  # fake left 5 samples unanswered
    write_jsonl_atomic(ctr_run / "predictions" / "same.jsonl", recs)
    res = compare.compare(ctr_run, ["fake", "same"], resamples=300, permutations=300)
    auc = next(r for r in res if r["metric"] == "AUC")
    assert (auc["n"], auc["only_a"], auc["only_b"]) == (55, 0, 5)
    assert auc["diff"] == 0.0 and auc["p_boot"] is None and auc["p_perm"] == 1.0  # the same answers (15 users: exact)
    out = tmp_path / "cmp.json"
    res = CliRunner().invoke(app, ["compare", str(ctr_run), "--models", "fake", "--models", "same", "--task", "ctr",
                                   "--resamples", "200", "--json", str(out)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "fake vs same (n = 55)" in res.output and "0 by fake, 5 by same (left out" in res.output
    assert "p (permutation)" in res.output and json.loads(out.read_text())[0]["task"] == "ctr"
    bad = CliRunner().invoke(app, ["compare", str(ctr_run), "--models", "fake,nobody"])
    assert bad.exit_code != 0 and "nobody" in str(bad.exception)
    assert "Usage" in CliRunner().invoke(app, ["compare", "--help"]).output


def test_score_cli_resamples_option(ctr_run):
    res = CliRunner().invoke(app, ["score", "recbench", "-o", str(ctr_run), "--resamples", "0"], catch_exceptions=False)
    assert res.exit_code == 0 and not re.search(r"\d \[\d", (ctr_run / "scores.md").read_text())
    res = CliRunner().invoke(app, ["score", "recbench", "-o", str(ctr_run), "--resamples", "100", "--ci-seed", "3"],
                             catch_exceptions=False)
    assert res.exit_code == 0 and re.search(r"\d \[-?\d\.\d+, ", res.output)
    rows = json.loads((ctr_run / "scores.json").read_text())
    assert rows[0]["extra"]["ci_settings"] == {"resamples": 100, "seed": 3, "level": 0.95,
                                               "best": "p >= 0.05: exact paired sign-flip test up to 20 "
                                                       "independent units (AUC's up to 16, then random flips), "
                                                       "paired bootstrap above"}
    assert "AUC_lo" in (ctr_run / "scores.csv").read_text().splitlines()[0]


# ---------------------------------------------------------------- PerRecBench compat over a file's groups


def _user(uid, rel):
    return {"user_id": uid, "relative_rating": rel, "avg_rating": 3.0, "history_len": 25}


def test_perrecbench_compat_averages_over_all_groups_of_a_file(tmp_path):
    """Issue 13's hand example: one label file (no level in its name) with two two-user groups and one
    three-user group. Both two-user orderings are right (tau 1); the three-user one is the scoring.py
    example, tau +1/3 over orderings. The authors' script: (1 + 1 + 1/3) / 3 = 0.7778; the mean of
    the easy and medium level means, as compat mode did before: (1 + 1/3) / 2 = 0.6667."""
    from recharness.tasks.perrecbench.original import score_files

    labels = tmp_path / "labels-mixed.json"
    labels.write_text(json.dumps({"a": [[_user("1", 1.0), _user("2", -0.5)]],
                                  "b": [[_user("3", -1.0), _user("4", 0.7)]],
                                  "c": [[_user("5", 1.0), _user("6", 2.0), _user("7", -1.0)]]}))
    preds = tmp_path / "group-mixed.json"
    preds.write_text(json.dumps({"a": [[[1, 2]]], "b": [[[2, 1]]], "c": [[[3, 1, 2]]]}))
    m, levels = score_files(labels, preds, "group", compat=True)
    assert set(levels) == {"easy", "medium"}
    assert round(m["tau"], 4) == 0.7778 and m["tau"] == pytest.approx(7 / 9) and m["tau_compat"] == m["tau"]
    assert levels["easy"]["tau_compat"] == 1.0 and levels["medium"]["tau_compat"] == pytest.approx(1 / 3)
    # the default (rank vectors, our convention) stays the mean over levels: (1 + -1) / 2
    m_rank, _ = score_files(labels, preds, "group")
    assert m_rank["tau"] == pytest.approx(0.0) and m_rank["tau_compat"] == pytest.approx(7 / 9)
    # one file per level (the official layout, and our own builds): file means = level means, as before
    from recharness.tasks.perrecbench.original import read_labels, read_predictions, sample_id, truth_of
    from recharness.tasks.perrecbench.scoring import summarize, tau_units

    groups = read_labels(labels)
    recs = read_predictions(preds, "group", groups)
    samples = [{"id": sample_id("list", g.level, g.item_id), "level": g.level, "item_id": g.item_id,
                "truth": truth_of(g)} for g in groups]  # no `source`: a file per level
    p = {sample_id("list", g.level, g.item_id): recs[g.item_id] for g in groups}
    assert summarize(samples, p, compat=True)[0]["tau"] == pytest.approx(2 / 3)
    for s in samples:
        s["source"] = labels.name
    m2, _ = summarize(samples, p, compat=True)
    assert m2["tau"] == pytest.approx(7 / 9)
    # the units give the same numbers, resampled within levels
    u = tau_units(samples, p, compat=True)
    assert u["tau"].point() == pytest.approx(7 / 9) and u["tau_rank"].point() == pytest.approx(0.0)
    assert u["tau_easy"].point() == 1.0 and u["tau_medium"].point() == pytest.approx(1 / 3)


def test_compare_generic_path_equals_the_units_path_where_units_are_samples(ml1m, tmp_path, monkeypatch):
    """Without units, compare re-scores resampled and swapped samples; where each sample is its own unit
    (LLMRec sequential: one user a sample), the same counts and swap masks must give the same intervals and
    p-values as the vectorised units."""
    from recharness.tasks.llmrec.sequential import SequentialTask

    run = _fake_run("llmrec", "sequential", "ml-1m", tmp_path / "seq", limit=30)  # > 20 units: no exact test
    fast = {r["metric"]: r for r in compare.compare(run, ["fake", "popularity"], resamples=150, permutations=150)}
    monkeypatch.setattr(SequentialTask, "units", lambda self, samples, predictions: {})
    slow = {r["metric"]: r for r in compare.compare(run, ["fake", "popularity"], resamples=150, permutations=150)}
    assert set(fast) == set(slow) and "NDCG@10" in fast
    differing = [m for m, f in fast.items() if f.get("no_interval") is None and f["lo"] < f["hi"]]
    assert {"valid_rate", "matched_share", "unrecognised_rate"} <= set(differing)  # the fake differs there
    for m, f in fast.items():
        g = slow[m]
        assert not f["generic"] and g["generic"] and f["units"] == 30 and not f["exact"]
        assert (f["value_a"], f["diff"], f["p_perm"]) == pytest.approx((g["value_a"], g["diff"], g["p_perm"]), abs=1e-12)
        if f.get("no_interval") is None:  # (the units know which samples carry a metric; the generic path cannot)
            assert (f["lo"], f["hi"], f["p_boot"]) == pytest.approx((g["lo"], g["hi"], g["p_boot"]), abs=1e-12), m


def test_compare_without_units_on_few_samples_gives_the_exact_swap_test_as_the_units_path(ml1m, tmp_path,
                                                                                          monkeypatch):
    """8 samples: with units, the exact sign-flip test and no bootstrap p; without units the same exact test by
    re-scoring every swap (it gave a bootstrap p beside it, which 8 samples cannot support)."""
    from recharness.tasks.llmrec.sequential import SequentialTask

    run = _fake_run("llmrec", "sequential", "ml-1m", tmp_path / "seq", limit=8)
    fast = {r["metric"]: r for r in compare.compare(run, ["fake", "popularity"], resamples=150, permutations=150)}
    monkeypatch.setattr(SequentialTask, "units", lambda self, samples, predictions: {})
    slow = {r["metric"]: r for r in compare.compare(run, ["fake", "popularity"], resamples=150, permutations=150)}
    checked = 0
    for m, f in fast.items():
        g = slow[m]
        if f.get("p_perm") is None or f.get("no_interval") or g.get("no_interval"):
            continue
        checked += 1
        assert f["exact"] and g["exact"] and g["permutations"] == 256 and f["p_boot"] is None and g["p_boot"] is None
        assert g["p_perm"] == pytest.approx(f["p_perm"], abs=1e-12), m
        assert "paired swap test by re-scoring over all 256 swaps; no bootstrap p-value" in g["note"]
    assert checked >= 3


def test_compare_generic_path_on_user_units_agrees_on_the_points(ctr_run, monkeypatch):
    """CTR's units are users (a user's pairs resampled together) where the generic path resamples pairs: two
    designs, so only the point values agree (the units path is the honest one for correlated pairs)."""
    from recharness.tasks.recbench.ctr import CtrTask

    fast = {r["metric"]: r for r in compare.compare(ctr_run, ["fake", "item_mean"], resamples=150, permutations=150)}
    monkeypatch.setattr(CtrTask, "units", lambda self, samples, predictions: {})
    slow = {r["metric"]: r for r in compare.compare(ctr_run, ["fake", "item_mean"], resamples=150, permutations=150)}
    assert set(fast) == set(slow)
    for m in ("AUC", "logloss", "invalid_rate"):
        f, g = fast[m], slow[m]
        assert not f["generic"] and g["generic"] and g["resamples"] == f["resamples"] == 150
        assert f["value_a"] == pytest.approx(g["value_a"], abs=1e-12) and f["diff"] == pytest.approx(g["diff"], abs=1e-12)
        assert f["units"] == 15 and f["exact"] and 0 < f["p_perm"] <= 1 and 0 < g["p_perm"] <= 1


def test_one_unit_gets_no_zero_width_interval(ml1m, tmp_path):
    """A metric defined on one unit only: every resample is that unit, so no interval, and the table says so."""
    from recharness.metrics.bootstrap import mean_units

    assert mean_units(["a", "b", "c"], [1.0, 0.0, 0.5], [True, False, False]).support() == 1
    row = ScoreRow("m", "t", {"P": 0.25}, 3, extra={"no_interval": {"P": "n too small: 1 unit"}})
    assert "| m | 0.250 (no CI: 1 unit) |" in to_markdown([row])

    class OneUnit(_MeanTask):
        """40 samples, but the metric rests on one independent unit: defined on one sample, or 40 samples of
        one user (a clustered metric: 40 samples carry it, one user is resampled)."""

        def __init__(self, how):
            super().__init__(True)
            self.how = how

        def score(self, samples, predictions):
            vals = self._vals(samples, predictions)
            return {"HR@10": vals[0] if self.how == "defined" else float(np.mean(vals))}

        def units(self, samples, predictions):
            ids, vals = [s["id"] for s in samples], self._vals(samples, predictions)
            if self.how == "defined":
                return {"HR@10": mean_units(ids, vals, [True] + [False] * (len(ids) - 1))}
            return {"HR@10": mean_units(ids, vals, clusters=np.array(["u1"] * len(ids)))}

    samples = [{"id": f"s{i}"} for i in range(40)]
    preds = [{s["id"]: {"x": float(i % q == 0)} for i, s in enumerate(samples)} for q in (2, 3)]
    for how in ("defined", "clustered"):
        task = OneUnit(how)
        assert task.units(samples, preds[0])["HR@10"].support() == (1 if how == "defined" else 40)
        scored = [(ScoreRow(m, "toy", task.score(samples, p), 40), p) for m, p in zip("ab", preds)]
        intervals.add_confidence_intervals(task, samples, scored, resamples=100, seed=0)
        for r, _ in scored:
            assert "HR@10" not in r.ci and r.extra["no_interval"]["HR@10"] == "n too small: 1 unit", how


def test_recbench_plus_history_variants_get_intervals(ml1m, tmp_path):
    """Tables 2/3 per history variant: each cell's interval is the bootstrap over that variant's queries."""
    from recharness.metrics.bootstrap import percentile_ci, resample_counts
    from recharness.tasks.recbench_plus.tables import paper_tables
    from recharness.tasks.registry import get_task

    run = tmp_path / "run"
    pipeline.build("recbench-plus", "ml-1m", run, tasks=["explicit"], seed=0, limit=12)
    pipeline.run(run, FakeBackend("fake"), "fake", use_cache=False)
    rows = pipeline.score(run, resamples=300, ci_seed=3)
    pop = next(r for r in rows if r.method == "popularity")
    bci = pop.extra["breakdown_ci"]
    assert {"history=with", "history=without"} <= set(bci)
    # recompute one by hand: popularity's P over the with-history queries, same counts and seed
    task = get_task("recbench-plus", "explicit")
    samples = [s for s in read_jsonl(run / "samples.jsonl") if s["task"] == "explicit"]
    idx = [i for i, s in enumerate(samples) if "history=with" in s.get("groups", [])]
    recs = task.references(pipeline.load_dataset("ml-1m"), samples, seed=0)["popularity"]
    u = task.units([samples[i] for i in idx], recs)["P"]
    assert u.point() == pytest.approx(pop.extra["breakdown"]["history=with"]["P"])
    r = np.concatenate([u.replicates(w) for w in resample_counts(u.n, 300, 3, u.strata, u.clusters)])
    lo, hi = percentile_ci(r)
    assert bci["history=with"]["P"] == pytest.approx({"lo": lo, "hi": hi})
    assert "breakdown_no_interval" not in pop.extra  # 12 users in each variant: every group has its interval
    # 4 users: a group without an interval says why (fewer than 5 independent units), never silently
    small = tmp_path / "small"
    pipeline.build("recbench-plus", "ml-1m", small, tasks=["explicit"], seed=0, limit=4)
    pipeline.run(small, FakeBackend("fake"), "fake", use_cache=False)
    few = next(r for r in pipeline.score(small, resamples=100) if r.method == "popularity")
    assert few.extra["breakdown_no_interval"]["history=with"]["P"] == "n too small: 4 units"
    assert "P" not in (few.extra.get("breakdown_ci") or {}).get("history=with", {})
    from recharness.report.html import write_report

    html = write_report(pipeline.score(small, resamples=100), small).read_text()
    assert "no error bar where a group has fewer than 5 independent units: with" in html
    text = paper_tables(rows)
    assert "— with history" in text and re.search(r"\d \[\d\.\d{3}, ", text.split("— with history")[1].split("####")[0])
    assert "the averages over query types carry none" in text and "fewer than 5 units (no interval)" in text


def test_a_querys_two_history_answers_are_one_unit(ml1m, tmp_path):
    """RecBench+ asks each query with and without the user's history: two answers, one independent unit."""
    from recharness.tasks.registry import get_task

    run = tmp_path / "run"
    pipeline.build("recbench-plus", "ml-1m", run, tasks=["explicit"], seed=0, limit=12)
    samples = [s for s in read_jsonl(run / "samples.jsonl") if s["task"] == "explicit"]
    task = get_task("recbench-plus", "explicit")
    recs = task.references(pipeline.load_dataset("ml-1m"), samples, seed=0)["popularity"]
    u = task.units(samples, recs)["P"]
    assert u.n == len(samples) and u.independent == len({s["id"][:-2] for s in samples}) < u.n
    w = next(u.counts(50, seed=0))
    for q in {s["id"][:-2] for s in samples}:
        both = [i for i, s in enumerate(samples) if s["id"][:-2] == q]
        assert len(both) == 2 and (w[:, both[0]] == w[:, both[1]]).all()


def test_fine_tuned_rows_say_how_they_were_trained():
    """Issue 12: every fine-tuned row names its base model, adapter settings, examples, steps and training time."""
    ft = {"base": "smollm2-135m", "task": "ctr", "items": "text", "examples": 4096, "steps": 256, "train_s": 1800.0,
          "settings": {"rank": 32, "alpha": 128, "lr": 0.001, "batch": 16}, "weights": "ab12"}
    merged = {"base": "smollm2-135m", "task": "merged", "weights": "cd34",
              "merge": {"method": "ties", "weights": None, "density": 0.5, "sources": ["pointwise", "pairwise", "listwise"]}}
    rows = [ScoreRow("smollm2-ft", "ctr", {"AUC": 0.6}, 10, extra={"model": {"backend": "hf", "finetune": ft}}),
            ScoreRow("merged", "ctr", {"AUC": 0.55}, 10, extra={"model": {"backend": "hf", "finetune": merged}}),
            ScoreRow("smollm2", "ctr", {"AUC": 0.5}, 10, extra={"model": {"backend": "llamacpp"}})]
    md = to_markdown(rows)
    assert ("- smollm2-ft: base smollm2-135m; task ctr (text items); LoRA r=32 α=128, lr 0.001, batch 16; "
            "4,096 training examples; 256 steps; 30.0 min training") in md
    assert "- merged: ties merge (density 0.5) of 3 fine-tunes of smollm2-135m: pointwise, pairwise, listwise" in md
    assert "- smollm2:" not in md


def test_one_group_per_level_gets_no_interval_and_no_winner(ml1m, tmp_path):
    """PerRecBench with one group per difficulty level: 3 independent units in all. No zero-width
    interval, no bold winner, and compare's exact test over the 8 sign flips cannot go below 0.25."""
    run = _fake_run("perrecbench", "list", "ml-1m", tmp_path / "run", limit=1)
    rows = pipeline.score(run, resamples=300)
    assert {r.method for r in rows} >= {"fake", "random"}
    for r in rows:
        assert not r.ci, r.ci  # no interval at all: never "0.444 ± 0.000"
        assert r.extra["no_interval"]["tau"] == "n too small: 3 units"
    md = to_markdown(rows)
    assert "**" not in md.split("### list")[1].split("###")[0]  # no bold winner
    res = {r["metric"]: r for r in compare.compare(run, ["fake", "random"], resamples=300, permutations=300)}
    tau = res["tau"]
    assert tau["exact"] and tau["permutations"] == 8 and tau["p_boot"] is None and tau["p_perm"] >= 0.25


def test_each_metric_is_computed_once_the_table_reads_the_units(caplog, monkeypatch):
    """A task whose `score` says 0.9 while its units say the mean of x: the row reports the units' value
    (the table, its interval and compare read one computation), and the mismatch is logged as a task bug."""
    from recharness.runner.intervals import add_confidence_intervals, checked_units

    class Inconsistent(_MeanTask):
        def score(self, samples, predictions):
            return {"HR@10": 0.9}

    task = Inconsistent(with_units=True)
    samples = [{"id": f"s{i}"} for i in range(20)]
    preds = {s["id"]: {"x": float(i % 2)} for i, s in enumerate(samples)}
    row = ScoreRow("m", "toy", task.score(samples, preds), 20)
    with pytest.raises(AssertionError, match="HR@10 from its units is 0.5, its score 0.9"):  # the tests' strict mode
        checked_units(task, samples, preds, dict(row.metrics))
    monkeypatch.delenv("RECHARNESS_STRICT_UNITS")  # a user's run: the units' value, the mismatch logged
    units = checked_units(task, samples, preds, row.metrics)
    assert row.metrics["HR@10"] == 0.5 and "a bug in the task" in caplog.text
    add_confidence_intervals(task, samples, [(row, preds)], resamples=300, units=[units])
    assert row.ci["HR@10"]["lo"] < 0.5 < row.ci["HR@10"]["hi"]


def test_a_cutoff_placeholder_matches_a_number_only():
    """"NDCG@{k}" names NDCG@10, not "NDCG@10 order spread" (lower is better: read as NDCG it was ranked the
    wrong way round wherever the suite that registers it had not been imported); {acc} still takes any text."""
    from recharness.metrics.registry import _pattern

    assert _pattern("NDCG@{k}").fullmatch("NDCG@10") and not _pattern("NDCG@{k}").fullmatch("NDCG@10 order spread")
    assert _pattern("target at {p}: HR@1").fullmatch("target at 3: HR@1")
    assert not _pattern("target at {p}: HR@1").fullmatch("target at x: HR@1")
    assert _pattern("{acc} head").fullmatch("HR@10 head") and _pattern("faith[{judge}]").fullmatch("faith[gpt-4o]")
