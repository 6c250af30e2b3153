"""PerRecBench scoring: hand-made original-format files give hand-computed taus in both modes.

Fixture files: tests/fixtures/perrecbench/{labels,preds}.  Truth orders
(best first) from the relative ratings in the label files:
  easy:   e1 (+1.0, -0.5) -> [1, 2]   e2 (-1.2, +0.4) -> [2, 1]   e3 (+0.8, -0.8) -> [1, 2]
  medium: m1 (+1.0, +2.0, -1.0) -> [2, 1, 3]   m2 (+0.5, -1.5, +1.5) -> [3, 1, 2]
          m3 (-0.7, +0.7, +2.0) -> [3, 2, 1]
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from scipy import stats

from recharness.core.errors import InputError
from recharness.tasks.perrecbench.original import (
    read_labels,
    read_predictions,
    sample_id,
    score_files,
    truth_of,
    write_predictions,
)
from recharness.tasks.perrecbench.scoring import order_from_values, score_groups, summarize

FIX = Path(__file__).parent / "fixtures" / "perrecbench"
LAB = FIX / "labels"
PRED = FIX / "preds"


def lab(level):
    return LAB / f"item2group_avg_diff_sample-{level}.json"


def test_worked_example_orderings_vs_rank_vectors():
    """The docstring example of scoring.py: every pairwise preference wrong."""
    truth = [1.0, 2.0, -1.0]  # users 1, 2, 3
    assert order_from_values(truth) == [2, 1, 3]
    sample = {"id": "x", "level": "medium", "truth": {"relative_ratings": truth, "avg_ratings": [3, 3, 3]}}
    g = score_groups([sample], {"x": {"parsed": {"ordering": [3, 1, 2]}, "valid": True}})[0]
    assert g.tau_rank == pytest.approx(-1.0)
    assert g.tau_compat == pytest.approx(1 / 3)
    # the compat number is scipy on the two orderings, as in the original evaluate_single.py
    assert g.tau_compat == pytest.approx(stats.kendalltau([3, 1, 2], [2, 1, 3]).statistic)
    # and the default is scipy on the per-user values
    assert g.tau_rank == pytest.approx(stats.kendalltau([2, 1, 3], truth).statistic)  # scores n - position


def test_two_users_both_conventions_agree():
    sample = {"id": "x", "level": "easy", "truth": {"relative_ratings": [0.1, 2.0], "avg_ratings": [3, 3]}}
    for order, want in (([1, 2], -1.0), ([2, 1], 1.0)):
        g = score_groups([sample], {"x": {"parsed": {"ordering": order}, "valid": True}})[0]
        assert g.tau_rank == pytest.approx(want) and g.tau_compat == pytest.approx(want)


@pytest.mark.parametrize("compat", [False, True])
def test_point_files(compat):
    metrics, levels = score_files(lab("easy"), PRED / "point-easy.json", "point", compat=compat)
    # e1: predicted relative (1, -0.5) right: +1; e2: (-2.2, +1.4) right: +1; e3: a "format_not_correct"
    assert levels["easy"]["tau_rank"] == pytest.approx(2 / 3)  # (1 + 1 + 0) / 3
    assert levels["easy"]["tau_compat"] == pytest.approx(1.0)  # (1 + 1) / 2, e3 dropped
    assert levels["easy"]["invalid"] == 1 and levels["easy"]["dropped_compat"] == 1
    assert metrics["tau"] == pytest.approx(1.0 if compat else 2 / 3)
    # ratings: e1 (4,4) vs (4,4); e2 (2,4) vs (1,5); e3 (4,-) vs (4,-): |err| 0,0,1,1,0 over 5 rated
    assert metrics["MAE"] == pytest.approx(0.4)
    assert metrics["RMSE"] == pytest.approx(math.sqrt(2 / 5))
    assert metrics["unrated"] == 1


def test_point_medium_ties_and_failures():
    metrics, levels = score_files(lab("medium"), PRED / "point-medium.json", "point")
    row = levels["medium"]
    # m1 exact (+1); m2 all predicted relative -0.5: tau undefined -> 0 (tied); m3 a failure -> 0
    assert row["tau_rank"] == pytest.approx(1 / 3)
    assert row["tied"] == 1 and row["invalid"] == 1
    # original: m2's argsort of equal values is [0,1,2] -> order [3,2,1]; tau vs [3,1,2] = 1/3; m3 dropped
    assert row["tau_compat"] == pytest.approx((1 + 1 / 3) / 2)
    # ratings: m1 0,0,0; m2 (4,2,5) vs 3,3,3: 1,1,2; m3 (-,4,5) vs (-,4,4): 0,1 -> 5 / 8
    assert row["MAE"] == pytest.approx(5 / 8)
    assert row["RMSE"] == pytest.approx(math.sqrt(7 / 8))


def test_point_both_levels_average_of_levels():
    groups = read_labels(lab("easy")) + read_labels(lab("medium"))
    recs = {**read_predictions(PRED / "point-easy.json", "point", groups),
            **read_predictions(PRED / "point-medium.json", "point", groups)}
    samples = [{"id": sample_id("point", g.level, g.item_id), "level": g.level, "item_id": g.item_id,
                "truth": truth_of(g)} for g in groups]
    preds = {sample_id("point", g.level, g.item_id): recs[g.item_id] for g in groups}
    m, _ = summarize(samples, preds, with_ratings=True)
    assert m["tau"] == pytest.approx((2 / 3 + 1 / 3) / 2)
    assert m["tau_compat"] == pytest.approx((1 + 2 / 3) / 2)
    assert m["MAE"] == pytest.approx(7 / 13)
    assert m["RMSE"] == pytest.approx(math.sqrt(9 / 13))
    m_drop, lv = summarize(samples, preds, invalid="drop")
    assert lv["easy"]["tau"] == pytest.approx(1.0)  # e3 dropped
    assert lv["medium"]["tau"] == pytest.approx(0.5)  # m1 = 1, m2 tied = 0, m3 dropped
    assert m_drop["dropped_unparsed"] == 2.0 and "levels_without_tau" not in m_drop and "dropped_unparsed" not in m
    # a level whose every group is dropped has no tau; the headline, the mean of the others, says so
    easy = [s for s in samples if s["level"] == "easy"]
    no_easy = {**preds, **{s["id"]: {"valid": False, "parsed": None} for s in easy}}
    m_none, lv_none = summarize(samples, no_easy, invalid="drop")
    assert math.isnan(lv_none["easy"]["tau"]) and m_none["tau"] == pytest.approx(0.5)
    assert m_none["levels_without_tau"] == 1.0 and m_none["dropped_unparsed"] == len(easy) + 1
    m_c, lv_c = summarize(samples, preds, compat=True)
    assert m_c["tau"] == pytest.approx(5 / 6) and lv_c["medium"]["tau"] == pytest.approx(2 / 3)


def test_group_files_both_modes():
    _, easy = score_files(lab("easy"), PRED / "group-easy.json", "group")
    assert easy["easy"]["tau_rank"] == pytest.approx(2 / 3)  # +1, +1, failure 0
    assert easy["easy"]["tau_compat"] == pytest.approx(1.0)  # failure dropped
    _, med = score_files(lab("medium"), PRED / "group-medium.json", "group")
    # m1 [3,1,2]: -1 on rank vectors, +1/3 on orderings; m2 exact +1; m3 reversed -1
    assert med["medium"]["tau_rank"] == pytest.approx(-1 / 3)
    assert med["medium"]["tau_compat"] == pytest.approx(1 / 9)
    m, _ = score_files(lab("medium"), PRED / "group-medium.json", "group", compat=True)
    assert m["tau"] == pytest.approx(1 / 9)


def test_pair_files_missing_item():
    _, easy = score_files(lab("easy"), PRED / "pair-easy.json", "pair")
    assert easy["easy"]["tau_rank"] == pytest.approx(1 / 3) and easy["easy"]["tau_compat"] == pytest.approx(1 / 3)
    _, med = score_files(lab("medium"), PRED / "pair-medium.json", "pair")
    # m1 exact +1; m2 [1,3,2]: rank vectors 1/3, orderings -1; m3 not in the file
    assert med["medium"]["missing"] == 1
    assert med["medium"]["tau_rank"] == pytest.approx((1 + 1 / 3 + 0) / 3)
    assert med["medium"]["tau_compat"] == pytest.approx(0.0)  # (1 - 1) / 2: the original skips m3


def test_export_roundtrip(tmp_path):
    groups = read_labels(lab("medium"))
    recs = read_predictions(PRED / "group-medium.json", "group", groups)
    samples = [{"id": sample_id("list", g.level, g.item_id), "task": "list", "level": g.level,
                "item_id": g.item_id, "truth": truth_of(g)} for g in groups]
    preds = {sample_id("list", g.level, g.item_id): recs[g.item_id] for g in groups}
    (path,) = write_predictions(samples, preds, tmp_path)
    assert path.name == "group-medium.json"
    assert json.loads(path.read_text()) == json.loads((PRED / "group-medium.json").read_text())
    pt = read_labels(lab("easy"))
    recs = read_predictions(PRED / "point-easy.json", "point", pt)
    samples = [{"id": g.item_id, "task": "point", "level": "easy", "item_id": g.item_id, "truth": truth_of(g)} for g in pt]
    (path,) = write_predictions(samples, {g.item_id: recs[g.item_id] for g in pt}, tmp_path)
    assert json.loads(path.read_text()) == json.loads((PRED / "point-easy.json").read_text())


def test_label_without_rating_key_uses_relative_plus_mean(tmp_path):
    p = tmp_path / "item2group_avg_diff_sample-easy.json"
    p.write_text(json.dumps({"q": [[{"user_id": 7, "relative_rating": 0.5, "avg_rating": 3.5, "history_len": 21},
                                    {"user_id": "8", "relative_rating": -1.0, "avg_rating": 4.0, "history_len": 30}]]}))
    (g,) = read_labels(p)
    assert g.level == "easy" and [m.user_id for m in g.members] == ["7", "8"]
    assert [m.rating for m in g.members] == [4.0, 3.0]


@pytest.mark.parametrize("content, match", [
    ({"q": [[{"user_id": "a", "avg_rating": 3, "history_len": 1}, {}]]}, r"field 'q\[0\]\[0\]\.relative_rating': missing key"),
    ({"q": [[{"user_id": "a", "relative_rating": "x", "avg_rating": 3, "history_len": 1}]]}, r"q\[0\]\[0\]\.relative_rating"),
    ({"q": [[{"user_id": "a", "relative_rating": 1, "avg_rating": 3, "history_len": -1}]]}, r"history_len"),
    ({"q": [[{"user_id": "a", "relative_rating": 1, "avg_rating": 3, "history_len": 2}]]}, r"field 'q': a group needs at least 2"),
    ({"q": {"user_id": "a"}}, r"field 'q': expected \[\[user"),
    ([1, 2], r"expected a JSON object"),
])
def test_bad_label_files_name_file_and_field(tmp_path, content, match):
    p = tmp_path / "labels-easy.json"
    p.write_text(json.dumps(content))
    with pytest.raises(InputError, match=match) as e:
        read_labels(p)
    assert "labels-easy.json" in str(e.value)


def test_bad_prediction_files(tmp_path):
    groups = read_labels(lab("easy"))
    p = tmp_path / "point-easy.json"
    p.write_text(json.dumps({"e1": [[4.0]]}))
    with pytest.raises(InputError, match=r"field 'e1': 1 ratings for a group of 2"):
        read_predictions(p, "point", groups)
    p.write_text(json.dumps({"zz": [[4.0, 3.0]]}))
    with pytest.raises(InputError, match=r"field 'zz': item has no group"):
        read_predictions(p, "point", groups)
    p.write_text(json.dumps({"e1": [[["1", "2"]]]}))
    with pytest.raises(InputError, match=r"e1\[0\]\[0\]"):
        read_predictions(p, "group", groups)
    p.write_text("{not json")
    with pytest.raises(InputError, match="not valid JSON"):
        read_predictions(p, "group", groups)


def test_invalid_and_missing_are_counted_never_dropped_by_default():
    sample = {"id": "x", "level": "hard", "truth": {"relative_ratings": [1, 2, 3, 4], "avg_ratings": [3] * 4}}
    m, lv = summarize([sample, {**sample, "id": "y"}, {**sample, "id": "z"}],
                      {"x": {"parsed": {"ordering": [4, 3, 2, 1]}, "valid": True},
                       "y": {"parsed": {"ordering": None}, "valid": False}})
    assert lv["hard"]["tau"] == pytest.approx(1 / 3)  # (1 + 0 + 0) / 3
    assert (m["invalid"], m["missing"]) == (1, 1)


def test_an_invalid_pairwise_ordering_is_dropped_from_the_compat_tau():
    """Every comparison failed: the heapsort's fixed order is no answer; the original drops a failure
    ("format_not_correct"), it does not score that order (here tau -1 against the truth)."""
    sample = {"id": "x", "level": "easy", "truth": {"relative_ratings": [-1.0, 1.0], "avg_ratings": [3, 3]}}
    ok = {**sample, "id": "y", "truth": {"relative_ratings": [1.0, -1.0], "avg_ratings": [3, 3]}}
    preds = {"x": {"parsed": {"ordering": [1, 2], "failed": 1}, "valid": False},
             "y": {"parsed": {"ordering": [1, 2]}, "valid": True}}
    g = {x.id: x for x in score_groups([sample, ok], preds)}
    assert g["x"].status == "invalid" and g["x"].tau_compat is None
    assert g["y"].tau_compat == pytest.approx(1.0)
    m, _ = summarize([sample, ok], preds, compat=True)
    assert m["tau_compat"] == pytest.approx(1.0) and m["dropped_compat"] == 1


def test_an_item_asked_at_every_level_is_one_unit_of_resampling():
    """items=shared (or the authors' label files): an item's groups at the three levels share the item and most
    members, so the bootstrap draws the item with all three; levels are not strata then. Distinct items keep
    one group a unit, resampled within its level."""
    import numpy as np

    from recharness.tasks.perrecbench.scoring import resampling, tau_units

    def sample(level, item, n):
        return {"id": sample_id("list", level, item), "level": level, "item_id": item,
                "truth": {"relative_ratings": list(range(n)), "avg_ratings": [3] * n}}

    items = [f"i{k}" for k in range(8)]
    shared = [sample(lv, it, n) for lv, n in (("easy", 2), ("medium", 3), ("hard", 4)) for it in items]
    preds = {s["id"]: {"parsed": {"ordering": list(range(len(s["truth"]["avg_ratings"]), 0, -1))
                                  if int(s["item_id"][1:]) % 2 else list(range(1, len(s["truth"]["avg_ratings"]) + 1))},
                       "valid": True} for s in shared}
    strata, clusters, unit = resampling(shared)
    assert strata is None and list(clusters) == [s["item_id"] for s in shared] and "query items" in unit
    u = tau_units(shared, preds)["tau_rank"]
    assert u.independent == 8
    rows = np.concatenate(list(u.counts(200, seed=1))).reshape(200, 3, 8)  # resample x level x item
    assert (rows == rows[:, :1, :]).all()  # an item's three groups are drawn together
    assert (rows[:, 0, :].sum(axis=1) == 8).all() and rows.std() > 0
    # distinct items: the group is the unit, within its level
    distinct = [sample(lv, f"{lv}{it}", n) for lv, n in (("easy", 2), ("hard", 4)) for it in items]
    strata, clusters, unit = resampling(distinct)
    assert clusters is None and list(strata) == ["easy"] * 8 + ["hard"] * 8 and "within levels" in unit
    assert tau_units(distinct, {})["tau_rank"].independent == 16


def test_pairwise_comparison_counts_read_the_scored_samples_only():
    """A subset scored with every record (the report's per-group tables): its disagreement is its own."""
    from recharness.tasks.perrecbench.tasks import PairTask

    def sample(i):
        return {"id": i, "level": "easy", "truth": {"relative_ratings": [1.0, -1.0], "avg_ratings": [3, 3]}}

    preds = {"a": {"parsed": {"ordering": [1, 2], "comparisons": 2, "disagree": 0, "failed": 0}, "valid": True},
             "b": {"parsed": {"ordering": [1, 2], "comparisons": 2, "disagree": 2, "failed": 1}, "valid": True}}
    m = PairTask().score([sample("a")], preds)
    assert m["disagree_rate"] == 0.0 and m["failed_comparisons"] == 0.0 and m["comparisons_per_group"] == 2.0
    both = PairTask().score([sample("a"), sample("b")], preds)
    assert both["disagree_rate"] == 0.5 and both["failed_comparisons"] == 1.0
