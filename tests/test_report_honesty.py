"""What the report shows is what was scored: an invalid answer is never shown as a hit, the strongest-reference
mark goes where a model row is tested against it, PerRecBench's Avg. needs every cell, the group charts show every
row's groups, a "$" in a label is literal, tied values share a place, and a bad --memorization file is said."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest

from recharness.core.types import ScoreRow

# ------------------------------------------------------------------ 1. an invalid answer is never a hit


def test_invalid_llmrec_direct_answer_is_not_shown_as_a_hit():
    """The parser found the target first, but the list is not most of the answer: invalid, a miss in the tables."""
    from recharness.report.html import _target_and_hit
    from recharness.tasks.registry import get_task

    task = get_task("llmrec", "direct")
    s = {"id": "u1", "task": "direct", "target": "i7", "candidates": ["i7", "i2", "i3"],
         "candidate_titles": ["Fargo (1996)", "Alien (1979)", "Heat (1995)"]}
    text = ("The user watched 12 films from 1990 to 1999 and rated 8 of them 5 stars, which tells me a great deal "
            "about them.\nAmong the 3 candidates, 2 are crime films from the 1990s and 1 is a 1979 science fiction "
            "film, so weigh those.\n1. Fargo (1996)")
    p = task.parse(s, text)
    assert not p.valid
    rec = {"id": "u1", "task": "direct", "parsed": p.value, "valid": p.valid, "error": p.error}
    assert task.score([s], {"u1": rec})["HR@1"] == 0.0
    target, verdict = _target_and_hit(s, rec, task)
    assert target == "Fargo (1996)" and not verdict.startswith("hit") and "invalid" in verdict
    # the same answer valid is a hit
    assert _target_and_hit(s, {**rec, "valid": True}, task)[1] == "hit (rank 1)"


def test_invalid_records_are_not_hits_on_every_branch(tmp_path):
    from recharness.core.io import write_jsonl_atomic
    from recharness.core.rundir import RunDir
    from recharness.report.html import _target_and_hit, examples_section

    bad = {"valid": False, "error": "garbled"}
    target = {"id": "s", "task": "sequential", "target": "7", "history": ["1"]}
    assert _target_and_hit(target, {**bad, "parsed": {"items": ["7"]}})[1] == "not scored: invalid"
    gt = {"id": "q", "task": "explicit", "query": "x", "gt": ["7", "8"]}
    assert _target_and_hit(gt, {**bad, "parsed": {"item_ids": ["7"]}})[1] == "not scored: invalid"
    assert _target_and_hit(gt, {"parsed": {"item_ids": ["7"]}})[1] == "hit (1 of 2)"
    group = {"id": "g", "task": "list", "truth": {"relative_ratings": [5, 3, 1]}}
    assert _target_and_hit(group, {**bad, "parsed": {"ordering": [1, 2, 3]}})[1] == "not scored: invalid"
    assert _target_and_hit(group, {"parsed": {"ordering": [1, 2, 3]}})[1] == "hit"
    ctr = {"id": "c", "task": "ctr", "label": 1}
    assert _target_and_hit(ctr, {**bad, "parsed": {"p_yes": 0.9}})[1] == "not scored: invalid"
    # the page's verdict class: a miss, never the hit colour
    sample = {**target, "messages": []}
    write_jsonl_atomic(RunDir(tmp_path).predictions("m"), [{"id": "s", "task": "sequential", **bad,
                                                             "parsed": {"items": ["7"]}}])
    page = "".join(examples_section(tmp_path, [sample], 3))
    assert "<span class='miss'>not scored: invalid</span>" in page and "class='hit'" not in page


# ------------------------------------------------------------------ 2. the strongest reference needs a model row


def test_a_reference_alone_on_its_own_samples_gets_no_strongest_mark():
    from recharness.report.tables import STRONGEST, to_markdown
    from recharness.runner.intervals import versus_strongest_reference
    from recharness.tasks.registry import get_task

    task = get_task("recbench", "seqrec")
    m = task.headline
    rng = np.random.default_rng(0)

    def row(name, kind, v, cov=None):
        return ScoreRow(method=name, task="seqrec", metrics={m: v}, n=200 if cov is None else cov["answered"],
                        kind=kind, ci={m: {"lo": v - .02, "hi": v + .02}}, coverage=cov)

    a = [row("llm", "model", 0.10), row("sasrec", "reference", 0.08)]
    versus_strongest_reference(task, a, {(0, m): rng.normal(.10, .01, 1000), (1, m): rng.normal(.08, .01, 1000)},
                               {(0, m): "k", (1, m): "k"}, {})
    # title-cbs answered the first 100 samples (sample cap): its own group, with no model row in it
    b = [row("title-cbs", "reference", 0.02, {"answered": 100, "of": 200, "why": "sample cap"})]
    versus_strongest_reference(task, b, {(0, m): rng.normal(.02, .01, 1000)}, {(0, m): "k2"}, {})
    assert a[1].extra["strongest_reference"] == m and a[0].extra["vs_strongest_reference"]["reference"] == "sasrec"
    assert "strongest_reference" not in b[0].extra and "no_verdicts" not in b[0].extra
    md = to_markdown(a + b)
    assert sum(line.count(STRONGEST) for line in md.splitlines() if line.startswith("|")) == 1
    # a model row on other samples than the reference's (another key) is not tested against it: no mark either
    c = [row("llm", "model", 0.10), row("pop", "reference", 0.05)]
    versus_strongest_reference(task, c, {(0, m): rng.normal(.10, .01, 1000), (1, m): rng.normal(.05, .01, 1000)},
                               {(0, m): "k", (1, m): "other"}, {})
    assert "strongest_reference" not in c[1].extra and "vs_strongest_reference" not in c[0].extra


# ------------------------------------------------------------------ 3. PerRecBench Avg. only over every cell


def test_perrecbench_avg_needs_every_cell():
    from recharness.tasks.perrecbench.table import table1_markdown, table1_rows

    lv = {"tau_easy": .60, "tau_medium": .30, "tau_hard": .10}
    rows = [ScoreRow(method="A", task=t, metrics=dict(lv), n=12) for t in ("point", "pair", "list")]
    rows += [ScoreRow(method="B", task="point", metrics=dict(lv), n=12),
             ScoreRow(method="B", task="list", metrics={**lv, "tau_hard": float("nan")}, n=12)]
    body = {r[0]: r for r in table1_rows(rows)}
    assert body["A"][10] == "0.33" and body["B"][10] == "–"
    assert "Avg. – = a cell the other methods have is missing" in table1_markdown(rows)
    # a task no method ran is no missing cell: the average is over the cells every method has
    only = [ScoreRow(method=k, task=t, metrics=dict(lv), n=12) for k in ("A", "B") for t in ("point", "list")]
    assert [r[10] for r in table1_rows(only)] == ["0.33", "0.33"]


# ------------------------------------------------------------------ 4. the group charts draw every row's groups


def test_group_chart_draws_groups_of_every_row(monkeypatch):
    import recharness.report.html as H

    drawn = {}
    orig = H._group_chart

    def spy(rows, metric, family, keys, palette):
        drawn[family] = list(keys)
        return orig(rows, metric, family, keys, palette)

    monkeypatch.setattr(H, "_group_chart", spy)
    m = ScoreRow(method="llm", task="explicit", metrics={"P": .4}, n=20,
                 coverage={"answered": 20, "of": 60, "why": "limit"},
                 extra={"breakdown": {"conditions=1": {"P": .5}, "conditions=2": {"P": .3}}})
    r = ScoreRow(method="popularity", task="explicit", metrics={"P": .2}, n=60, kind="reference",
                 extra={"breakdown": {"conditions=10": {"P": .05}, "conditions=1": {"P": .3},
                                      "conditions=2": {"P": .2}, "conditions=3": {"P": .1}}})
    H.task_section([m, r], "recbench-plus", "explicit")
    assert drawn["conditions"] == ["conditions=1", "conditions=2", "conditions=3", "conditions=10"]


# ------------------------------------------------------------------ 5. "$" in a label is literal text


def test_dollar_in_method_and_run_names_is_literal(monkeypatch, tmp_path):
    import matplotlib

    from recharness.report.html import Palette, _bar_chart, write_leaderboard
    from recharness.report.tables import write_scores

    monkeypatch.setitem(matplotlib.rcParams, "text.parse_math", True)  # as a fresh process has it
    rows = [ScoreRow(method="m [runs/a$\\foo$b]", task="direct", metrics={"NDCG@10": 0.3}, n=50),
            ScoreRow(method="m [runs/x$_1$y]", task="direct", metrics={"NDCG@10": 0.2}, n=50)]
    assert _bar_chart(rows, "NDCG@10", Palette(rows))  # used to raise a mathtext ParseFatalException
    assert matplotlib.rcParams["text.parse_math"] is False
    monkeypatch.setitem(matplotlib.rcParams, "text.parse_math", True)
    runs = []
    for name, v in (("cost_$1_$2", .3), ("cost_$5", .2)):
        d = tmp_path / name
        d.mkdir()
        write_scores([ScoreRow(method="llm", task="direct", metrics={"NDCG@10": v}, n=50)], d)
        runs.append(d)
    paths = write_leaderboard(runs, tmp_path / "out")  # used to crash `eval` / `report --runs`
    assert paths["html"].exists()


def test_fairness_charts_take_dollar_names_and_keep_plain_log_ticks(monkeypatch):
    import matplotlib

    from recharness.report import fairness
    from recharness.report.html import Palette

    monkeypatch.setitem(matplotlib.rcParams, "text.parse_math", True)
    seen = {}
    orig = fairness._chart

    def spy(fig, *a, **k):
        fig.canvas.draw()
        ax = fig.axes[0]
        seen["ticks"] = [t.get_text() for t in ax.get_xticklabels() + ax.get_xticklabels(minor=True)]
        return orig(fig, *a, **k)

    monkeypatch.setattr(fairness, "_chart", spy)
    rows = [ScoreRow(method="a$\\foo$", task="direct", metrics={"NDCG@10": .3, "ARP@10": 5.0}, n=50),
            ScoreRow(method="pop", task="direct", metrics={"NDCG@10": .1, "ARP@10": 900.0}, n=50, kind="reference")]
    parts = fairness.popularity_parts(rows, "NDCG@10", Palette(rows))
    assert parts and "<figure" in "".join(parts)
    assert seen["ticks"] and not any("$" in t for t in seen["ticks"]), seen["ticks"]
    assert "100" in seen["ticks"]


# ------------------------------------------------------------------ 6. tied references share a place


def test_sampled_vs_full_ties_share_a_place():
    from recharness.tasks.llmrec.common import order_swaps, sampled_vs_full

    rows = [ScoreRow(method="popularity", task="direct", kind="reference",
                     metrics={"NDCG@10": 0.2, "NDCG@10 (full)": 0.01}, n=50),
            ScoreRow(method="itemknn", task="direct", kind="reference",
                     metrics={"NDCG@10": 0.2, "NDCG@10 (full)": 0.03}, n=50),
            ScoreRow(method="random", task="direct", kind="reference",
                     metrics={"NDCG@10": 0.1, "NDCG@10 (full)": 0.0}, n=50)]
    assert order_swaps(rows) == []
    md = sampled_vs_full(rows)
    assert "| popularity | 0.2000 | 1= | 0.0100 | 2 |" in md
    assert "| itemknn | 0.2000 | 1= | 0.0300 | 1 |" in md
    assert "| random | 0.1000 | 3 | 0.0000 | 3 |" in md
    assert "keep their order" in md


# ------------------------------------------------------------------ 7. a bad --memorization file is an error


def _probe(dataset="ml-1m"):
    return {"dataset": dataset, "kinds": {"item": {}}, "memorized_items": []}


def test_a_named_bad_memorization_file_is_an_error(tmp_path):
    from recharness.core.errors import RecharnessError
    from recharness.report.fairness import probe_results

    good = tmp_path / "llm.json"
    good.write_text(json.dumps(_probe()))
    assert [n for n, _ in probe_results(good, "ml-1m")] == ["llm"]
    truncated = tmp_path / "truncated.json"
    truncated.write_text(json.dumps(_probe())[:20])
    other_kind = tmp_path / "scores.json"
    other_kind.write_text(json.dumps([{"method": "llm"}]))
    other_ds = tmp_path / "other.json"
    other_ds.write_text(json.dumps(_probe("amazon2023")))
    for f, why in ((truncated, "JSON"), (other_kind, "not a `recharness probe memorization` result"),
                   (other_ds, "'amazon2023'")):
        with pytest.raises(RecharnessError) as ex:
            probe_results(f, "ml-1m")
        assert str(f) in str(ex.value) and why in str(ex.value) and "--memorization" in str(ex.value)


def test_bad_files_in_a_memorization_folder_are_left_out_and_said(tmp_path, caplog):
    from recharness.report.fairness import probe_results

    (tmp_path / "llm.json").write_text(json.dumps(_probe()))
    (tmp_path / "broken.json").write_text("{")
    (tmp_path / "other.json").write_text(json.dumps(_probe("amazon2023")))
    with caplog.at_level(logging.WARNING):
        got = probe_results(tmp_path, "ml-1m")
    assert [n for n, _ in got] == ["llm"]
    said = caplog.text
    assert str(tmp_path / "broken.json") in said and str(tmp_path / "other.json") in said
