"""RecBench CTR: an answer without a usable P(Yes) counts one half in every pair it is in (AUC, GAUC), a coin
flip, and log 2 in log loss. Scored 0.5, it used to tie only with other 0.5s: with the valid scores above 0.5
and the failures on negatives, an uninformative model's AUC rose from 0.53 to 0.70 (below)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from recharness.tasks.recbench.ctr import CtrTask

BAD = {"valid": False, "parsed": {"p_yes": None}}


def _case(rows):
    """rows: (user, label, p_yes or None)."""
    samples = [{"id": f"s{k}", "task": "ctr", "user_id": u, "label": y} for k, (u, y, _) in enumerate(rows)]
    preds = {f"s{k}": ({"valid": True, "parsed": {"p_yes": p}} if p is not None else BAD)
             for k, (_, _, p) in enumerate(rows)}
    return samples, preds


def test_a_pair_with_an_invalid_answer_counts_one_half_hand_worked():
    # positives A 0.9, B 0.7; negatives C 0.8, D invalid. Pairs: A>C 1, B<C 0, A?D 1/2, B?D 1/2 -> 2/4
    samples, preds = _case([("u", 1, 0.9), ("u", 1, 0.7), ("u", 0, 0.8), ("u", 0, None)])
    m = CtrTask().score(samples, preds)
    assert m["AUC"] == pytest.approx(0.5) and m["GAUC"] == pytest.approx(0.5)  # scored 0.5, D lost to both: 0.75
    assert m["invalid_rate"] == 0.25
    assert m["logloss"] == pytest.approx(-(math.log(0.9) + math.log(0.7) + math.log(0.2) + math.log(0.5)) / 4)
    # two invalid answers of opposite labels (E, D): their own pair is one half too, by hand:
    # A>C 1, A?D 1/2, E?C 1/2, E?D 1/2 -> 2.5/4
    samples, preds = _case([("u", 1, 0.9), ("u", 1, None), ("u", 0, 0.8), ("u", 0, None)])
    assert CtrTask().score(samples, preds)["AUC"] == pytest.approx(2.5 / 4)


def test_all_valid_is_sklearns_auc_and_an_uninformative_model_stays_near_one_half():
    rng = np.random.default_rng(0)
    users = rng.integers(0, 100, 400).astype(str)
    y = (rng.random(400) < 0.7).astype(int)
    p = rng.uniform(0.6, 1.0, 400)
    rows = list(zip(users, y, p))
    samples, preds = _case(rows)
    task = CtrTask()
    m = task.score(samples, preds)
    assert m["AUC"] == pytest.approx(roc_auc_score(y, p))
    # a third of the negatives unanswered: the exact rule, not a rise
    drop = (y == 0) & (rng.random(400) < 1 / 3)
    samples, preds = _case([(u, t, None if d else q) for (u, t, q), d in zip(rows, drop)])
    m2 = task.score(samples, preds)
    v = ~drop
    P, N, Pv, Nv = (y == 1).sum(), (y == 0).sum(), ((y == 1) & v).sum(), ((y == 0) & v).sum()
    exact = (roc_auc_score(y[v], p[v]) * Pv * Nv + 0.5 * (P * N - Pv * Nv)) / (P * N)
    assert m2["AUC"] == pytest.approx(exact) and abs(m2["AUC"] - m["AUC"]) < 0.05
    # the old rule, an invalid answer scored 0.5 (below every valid score here), read this uninformative model's
    # 0.53 as 0.70 (the README's example)
    assert m["AUC"] == pytest.approx(0.5280, abs=1e-4)
    assert roc_auc_score(y, np.where(drop, 0.5, p)) == pytest.approx(0.7033, abs=1e-4)
    units = task.units(samples, preds)
    assert units["AUC"].point() == pytest.approx(m2["AUC"]) and units["GAUC"].point() == pytest.approx(m2["GAUC"])


def test_every_casing_counts_and_a_missing_option_is_bounded_by_the_smallest_returned():
    from recharness.models.openai_compat import bounded_options, option_logprobs

    top = [("yes", -0.05), ("Yes", -4.0), ("no", -3.2), (" No", -3.5)]
    lp = option_logprobs(top, ["Yes", "No"])
    p_yes = math.exp(lp["Yes"]) / (math.exp(lp["Yes"]) + math.exp(lp["No"]))
    want = (math.exp(-0.05) + math.exp(-4.0)) / (math.exp(-0.05) + math.exp(-4.0) + math.exp(-3.2) + math.exp(-3.5))
    assert p_yes == pytest.approx(want) and p_yes > 0.9  # "Yes"/"No" alone: 0.378
    assert option_logprobs([("YES", -0.1), ("NO", -2.5)], ["Yes", "No"]) == pytest.approx({"Yes": -0.1, "No": -2.5})
    # "No" not among the top: each of its 8 spellings (No, no, NO, nO, with and without a space) at most the
    # smallest returned probability, 8 e^-5 = 0.054 in all, which could pass Yes's e^-3 = 0.050: the least
    # confident value the reply allows is then 0.5 (before: 0.48, a preference for the option never returned)
    top = [("I", -0.2), ("Yes", -3.0), ("The", -3.4), ("Sure", -5.0)]
    assert option_logprobs(top, ["Yes", "No"]) == pytest.approx({"Yes": -3.0, "No": -3.0})
    top2 = [("I", -1.5), ("Yes", -1.2), ("Sure", -5.0)]  # the spellings' bound below Yes and what is left: it stands
    assert option_logprobs(top2, ["Yes", "No"]) == pytest.approx({"Yes": -1.2, "No": -5.0 + math.log(8)})
    # the review's case: Yes at -0.05, 19 others at -6: they leave 1 - e^-0.05 - 19 e^-6 = 0.00167 for every
    # other token, "No" included, tighter than its 8 spellings' 8 e^-6 = 0.0198
    lp = option_logprobs([("Yes", -0.05)] + [(f"t{k}", -6.0) for k in range(19)], ["Yes", "No"])
    left = 1 - math.exp(-0.05) - 19 * math.exp(-6.0)
    assert lp["No"] == pytest.approx(math.log(left))
    # a server that returns one token: "No" at -1e-4 leaves 1e-4 for "Yes" (before: 16 e^-1e-4, P(Yes) 0.94)
    lp = option_logprobs([("No", -1e-4)], ["Yes", "No"])
    p = math.exp(lp["Yes"]) / (math.exp(lp["Yes"]) + math.exp(lp["No"]))
    assert p == pytest.approx(1e-4, rel=1e-3)
    assert bounded_options(top, ["Yes", "No"]) == ["No"]
    # returned probabilities whose rounded sum reaches 1 leave no bound to go by, not "nothing left": P(Yes) stays
    # below a certain 1.0 (before: exactly 1.0 from -9.2 on, 0.99999 at -9.3)
    lp = option_logprobs([("Yes", -1e-4), ("Sure", -9.2)], ["Yes", "No"])
    assert lp["No"] == pytest.approx(-9.2 + math.log(8))
    # neither option returned: nothing to bound against, no answer
    assert option_logprobs([("I", -0.1)], ["Yes", "No"]) == {"Yes": -math.inf, "No": -math.inf}
    assert bounded_options([("I", -0.1)], ["Yes", "No"]) == []


def test_a_bounded_answer_is_counted_in_the_scores():
    from recharness.core.types import OptionScores

    task = CtrTask()
    samples, _ = _case([("u", 1, 0.9), ("u", 0, 0.2)])
    parsed = [task.parse_options(samples[0], OptionScores({"Yes": -3.0, "No": -5.0}, extra={"bounded": ["No"]})),
              task.parse_options(samples[1], OptionScores({"Yes": -1.0, "No": -0.5}))]
    assert parsed[0].value["bounded"] == ["No"] and "bounded" not in parsed[1].value
    preds = {s["id"]: {"valid": True, "parsed": p.value} for s, p in zip(samples, parsed)}
    assert task.score(samples, preds)["bounded_rate"] == 0.5


def test_a_reference_whose_click_scores_are_a_ranking_shows_no_log_loss():
    """Popularity's click score is the item's clicks over the most any item has, a history scorer's the item's
    place in the user's order: an order, not a probability, so the row gets AUC and no log loss (it showed 1.78
    for popularity against random's 0.96); item_mean's smoothed CTR is a probability and keeps it."""
    import polars as pl

    from recharness.baselines import TrainData
    from recharness.baselines.item_mean import ItemMeanCtr
    from recharness.baselines.popularity import PopularityRanker

    pairs = pl.DataFrame({"user_id": ["u1", "u1", "u2", "u2"], "item_id": ["a", "b", "a", "c"], "label": [1, 0, 1, 0],
                          "timestamp": [1, 2, 3, 4]})
    train = TrainData(pairs.filter(pl.col("label") == 1).drop("label"), ["a", "b", "c"], pairs)
    samples, _ = _case([("u3", 1, None), ("u3", 0, None)])
    for s, item in zip(samples, ["a", "b"]):
        s.update(item_id=item, history=[])
    task = CtrTask()
    for model, has_loss in ((PopularityRanker().fit(train), False), (ItemMeanCtr().fit(train), True)):
        recs = {s["id"]: {"valid": True, "parsed": a} for s, a in zip(samples, task.reference_answers(model, samples))}
        m, units = task.score(samples, recs), task.units(samples, recs)
        assert m["AUC"] == 1.0 and ("logloss" in m) == has_loss and ("logloss" in units) == has_loss


def test_a_diverged_reference_s_nan_is_no_answer_and_score_goes_on():
    """The review of 2026-11-30: a trained reference whose P(click) came out NaN was stored as a valid answer,
    which the typed answers then refused, stopping the whole `score`; it is now null, an unusable answer."""
    from recharness.core.types import reference_record
    from recharness.tasks.base import answer_problem

    class Diverged:
        def p_clicks(self, samples):
            return [0.8, float("nan"), 0.2, float("inf")]

    task = CtrTask()
    samples = [{"id": f"s{k}", "user_id": "u", "label": y} for k, y in enumerate([1, 1, 0, 0])]
    answers = task.reference_answers(Diverged(), samples)
    assert [a["p_yes"] for a in answers] == [0.8, None, 0.2, None]
    assert all(answer_problem(task.answer_type, a) is None for a in answers)
    m = task.score(samples, {s["id"]: reference_record(s["id"], a) for s, a in zip(samples, answers)})
    assert m["invalid_rate"] == 0.5
    # the unusable two win half of every pair they are in (`halved`): pairs (s0, s2) 1, (s0, s3) 1/2, (s1, s2)
    # 1/2, (s1, s3) 1/2 → 2.5 / 4; sklearn on the doubled rows (an unusable one at -1 and 2) agrees
    assert m["AUC"] == pytest.approx(0.625, abs=1e-12)
    assert m["AUC"] == pytest.approx(roc_auc_score([1, 1, 1, 1, 0, 0, 0, 0], [0.8, 0.8, -1, 2, 0.2, 0.2, -1, 2]),
                                     abs=1e-12)
