"""metrics.bootstrap against the references: scipy.stats.bootstrap / permutation_test on the same data,
scikit-learn / sacrebleu for the point values and for single resamples written out in full.

Intervals of two independent Monte-Carlo runs agree only within Monte-Carlo error: with 4,000
resamples each, a 2.5% / 97.5% percentile has a standard deviation of about 1% of the interval's
width, so endpoints are compared to within 8% of the width. Exact permutation tests (2^n subsets
no more than the permutations asked for) must agree exactly.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import roc_auc_score

from recharness.metrics.bootstrap import (
    AUCUnits,
    RatioUnits,
    bleu_from_stats,
    bleu_units,
    bootstrap_p,
    mean_units,
    paired_bootstrap,
    paired_permutation,
    percentile_ci,
    pooled_strata,
    resample_counts,
    swap_masks,
    weighted_auc,
)
from recharness.metrics.classification import GAUC_WEIGHTINGS, gauc, gauc_units

B = 4000


def _ci(units, resamples=B, seed=0):
    return percentile_ci(np.concatenate([units.replicates(w) for w in resample_counts(units.n, resamples, seed,
                                                                                       units.strata)]))


def _close(ours, ref, tol=0.08):
    width = ref[1] - ref[0]
    assert abs(ours[0] - ref[0]) <= tol * width and abs(ours[1] - ref[1]) <= tol * width, (ours, ref)


def _auc_ref(y, s, axis=-1):
    """AUC by the Mann-Whitney U of average ranks (vectorised along `axis`, for scipy's resamplers);
    equal to roc_auc_score, checked below."""
    y = np.moveaxis(np.asarray(y), axis, -1).astype(bool)
    r = stats.rankdata(np.moveaxis(np.asarray(s, dtype=float), axis, -1), axis=-1)
    p = y.sum(-1)
    q = y.shape[-1] - p
    with np.errstate(invalid="ignore", divide="ignore"):
        return ((r * y).sum(-1) - p * (p + 1) / 2) / (p * q)


def _scipy_ci(data, statistic, **kw):
    res = stats.bootstrap(data, statistic, n_resamples=B, method="percentile", random_state=1, **kw)
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


# ---------------------------------------------------------------- resampling


def test_counts_are_multinomial_seeded_and_prefix_stable():
    a = np.concatenate(list(resample_counts(50, 30, seed=3)))
    assert a.shape == (30, 50) and (a.sum(axis=1) == 50).all() and (a >= 0).all()
    assert np.array_equal(a, np.concatenate(list(resample_counts(50, 30, seed=3))))
    assert not np.array_equal(a, np.concatenate(list(resample_counts(50, 30, seed=4))))
    longer = np.concatenate(list(resample_counts(50, 80, seed=3)))
    assert np.array_equal(longer[:30], a)  # fewer resamples are a prefix of more
    big = np.concatenate(list(resample_counts(30_000, 150, seed=0)))  # several chunks
    assert big.shape == (150, 30_000) and (big.sum(axis=1) == 30_000).all()
    assert abs(big.mean() - 1.0) < 1e-12 and abs(big.var() - 1.0) < 0.01  # multinomial(n, 1/n): variance ~ 1


def test_stratified_counts_keep_each_stratum_size():
    strata = np.array(["easy"] * 5 + ["hard"] * 6 + ["easy"] * 2)
    w = np.concatenate(list(resample_counts(13, 200, seed=0, strata=strata)))
    assert (w[:, strata == "easy"].sum(axis=1) == 7).all() and (w[:, strata == "hard"].sum(axis=1) == 6).all()


def test_a_stratum_under_five_units_is_pooled_never_resampled_alone():
    # hard has 3 units: resampled alone its mean would barely move; pooled with easy (the only large one)
    strata = np.array(["easy"] * 7 + ["hard"] * 3)
    w = np.concatenate(list(resample_counts(10, 400, seed=0, strata=strata)))
    assert (w.sum(axis=1) == 10).all() and len(set(w[:, strata == "hard"].sum(axis=1))) > 1
    assert list(pooled_strata(np.array(["a"] * 2 + ["b"] * 2 + ["c"] * 6))) == ["c"] * 10  # a+b pooled = 4 < 5: into c
    assert list(pooled_strata(np.array(["a"] * 3 + ["b"] * 3 + ["c"] * 6))).count("\x00pooled") == 6


def test_cluster_counts_move_a_users_samples_together():
    users = np.array(["u1", "u1", "u1", "u2", "u3", "u3"])
    w = np.concatenate(list(resample_counts(6, 300, seed=2, clusters=users)))
    assert (w[:, 0] == w[:, 1]).all() and (w[:, 1] == w[:, 2]).all() and (w[:, 4] == w[:, 5]).all()
    # each row draws 3 clusters: the weights of the first units of u1, u2, u3 sum to 3
    assert (w[:, 0] + w[:, 3] + w[:, 4] == 3).all()


def test_cluster_bootstrap_by_hand():
    """Two users: u1 with values (1, 1), u2 with (0). Clusters drawn: {u1,u1} → 1, {u2,u2} → 0, {u1,u2} →
    2/3 (three samples, two of them 1). Uniform over the 4 ordered draws: P(1) = P(0) = 1/4, P(2/3) = 1/2."""
    u = mean_units(["a", "b", "c"], [1.0, 1.0, 0.0], clusters=["u1", "u1", "u2"])
    reps = np.concatenate([u.replicates(w) for w in u.counts(4000, seed=1)])
    vals, cnt = np.unique(np.round(reps, 6), return_counts=True)
    assert list(vals) == [0.0, round(2 / 3, 6), 1.0]
    assert abs(cnt[0] / 4000 - 0.25) < 0.03 and abs(cnt[1] / 4000 - 0.5) < 0.03 and abs(cnt[2] / 4000 - 0.25) < 0.03
    assert u.independent == 2 and u.independent_support() == 2


def test_swap_masks_exact_when_few():
    chunks, exact, count = swap_masks(4, 100)
    m = np.concatenate(list(chunks))
    assert exact and count == 16 and len({tuple(r) for r in m}) == 16
    chunks, exact, count = swap_masks(20, 100, seed=1)  # up to 20 units: exact whatever the budget
    assert exact and count == 2**20
    chunks, exact, count = swap_masks(21, 100, seed=1)
    assert not exact and count == 100 and np.concatenate(list(chunks)).shape == (100, 21)


@pytest.mark.parametrize("n", [3, 8, 14])
def test_the_exact_sign_flip_test_equals_scipy(n):
    """With at most 20 units, every one of the 2**n sign flips: scipy's permutation_test (paired,
    n_resamples=inf) gives the same p-value to 1e-9, on the same data."""
    from scipy.stats import permutation_test

    rng = np.random.default_rng(n)
    a, b = rng.random(n), rng.random(n) * 0.8
    ids = [f"s{i}" for i in range(n)]
    ours = paired_permutation(mean_units(ids, a), mean_units(ids, b), permutations=1000)
    ref = permutation_test((a, b), lambda x, y: np.mean(x) - np.mean(y), permutation_type="samples",
                           n_resamples=np.inf, alternative="two-sided")
    assert ours["exact"] and ours["permutations"] == 2**n
    assert abs(ours["p"] - ref.pvalue) < 1e-9, (ours["p"], ref.pvalue)
    if n == 3:
        assert ours["p"] >= 0.25  # with 3 units no smaller p exists


# ---------------------------------------------------------------- point values


def test_weighted_auc_equals_sklearn_on_resampled_data():
    rng = np.random.default_rng(0)
    n = 400
    y = rng.integers(0, 2, n)
    s = np.round(rng.random(n) + 0.4 * y, 1)  # many ties
    assert AUCUnits(list(range(n)), s, y).point() == roc_auc_score(y, s)
    for w in next(resample_counts(n, 5, seed=2)):
        idx = np.repeat(np.arange(n), w.astype(int))
        assert weighted_auc(s, y, w[None])[0] == pytest.approx(roc_auc_score(y[idx], s[idx]), abs=1e-12)
    s2 = rng.random(n)  # no ties: the other branch
    w = next(resample_counts(n, 1, seed=3))
    idx = np.repeat(np.arange(n), w[0].astype(int))
    assert weighted_auc(s2, y, w)[0] == pytest.approx(roc_auc_score(y[idx], s2[idx]), abs=1e-12)
    assert math.isnan(weighted_auc(s, np.ones(n), np.ones((1, n)))[0])  # one class: undefined


def test_ratio_units_groups_and_sqrt():
    ids = list("abcdef")
    u = RatioUnits(ids, [1, 0, 1, 4, 0, 2], [1, 1, 1, 2, 0, 1], groups=["x", "x", "y", "y", "z", "z"])
    # x: 1/2, y: 5/3, z: 2/1 -> mean of the three
    assert u.point() == pytest.approx((0.5 + 5 / 3 + 2) / 3)
    err = np.array([1.0, -2.0, 0.5])
    assert RatioUnits(list("abc"), err ** 2, transform="sqrt").point() == pytest.approx(math.sqrt(np.mean(err ** 2)))
    m = mean_units(list("abcd"), [0.2, 9.0, 0.4, 0.6], [True, False, True, True])
    assert m.point() == pytest.approx(0.4)
    with pytest.raises(ValueError):
        RatioUnits(list("ab"), [1.0, float("nan")])


@pytest.mark.parametrize("order", [1, 4])
def test_bleu_from_sentence_statistics_equals_sacrebleu(order):
    from sacrebleu.metrics import BLEU

    hyps = ["the cat sat on the mat", "a dog", "", "great product works as described", "i love it so much",
            "not what i expected at all", "five stars", "the mat sat on the cat"]
    refs = ["the cat is on the mat", "the dog barked", "nothing here", "works as described great value",
            "love it", "it was not what i expected", "four stars", "a cat on a mat"]
    metric = BLEU(max_ngram_order=order, lowercase=True)
    u = bleu_units(list(range(len(hyps))), hyps, refs, order, lowercase=True)
    assert u.point() == pytest.approx(metric.corpus_score(hyps, [refs]).score, rel=1e-12, abs=1e-12)
    for w in np.concatenate(list(resample_counts(len(hyps), 40, seed=5))):
        idx = np.repeat(np.arange(len(hyps)), w.astype(int))
        want = metric.corpus_score([hyps[i] for i in idx], [[refs[i] for i in idx]]).score
        assert u.replicates(w[None])[0] == pytest.approx(want, rel=1e-12, abs=1e-12)


def test_bleu_edge_cases():
    # no match at all -> 0; a 4-gram order with no n-grams (total 0) -> 0; exp smoothing when a count is 0
    assert bleu_from_stats([[5, 5, 0, 0, 0, 0, 5, 4, 3, 2]], 4)[0] == 0.0
    assert bleu_from_stats([[2, 2, 2, 1, 0, 0, 2, 1, 0, 0]], 4)[0] == 0.0
    from sacrebleu.metrics.bleu import BLEU

    want = BLEU.compute_bleu([4, 2, 0, 0], [5, 4, 3, 2], 5, 6, smooth_method="exp").score
    assert bleu_from_stats([[5, 6, 4, 2, 0, 0, 5, 4, 3, 2]], 4)[0] == pytest.approx(want, rel=1e-12)


# ---------------------------------------------------------------- intervals vs scipy.stats.bootstrap


def test_mean_ci_matches_scipy():
    rng = np.random.default_rng(0)
    hits = (rng.random(300) < 0.3).astype(float)
    _close(_ci(mean_units(list(range(300)), hits)), _scipy_ci((hits,), np.mean, vectorized=True, axis=-1))


def test_auc_ci_matches_scipy():
    rng = np.random.default_rng(1)
    n = 300
    y = rng.integers(0, 2, n)
    s = np.round(rng.random(n) + 0.3 * y, 2)
    assert _auc_ref(y, s) == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    ref = _scipy_ci((y, s), _auc_ref, paired=True, vectorized=True)
    _close(_ci(AUCUnits(list(range(n)), s, y)), ref)


def test_rmse_ci_matches_scipy():
    rng = np.random.default_rng(2)
    err = rng.normal(0, 1, 250) * rng.choice([0.5, 2.0], 250)
    ref = _scipy_ci((err,), lambda e, axis=-1: np.sqrt(np.mean(e ** 2, axis=axis)), vectorized=True)
    _close(_ci(RatioUnits(list(range(250)), err ** 2, transform="sqrt")), ref)


def test_gauc_ci_over_users_matches_scipy():
    rng = np.random.default_rng(3)
    users = np.repeat(np.arange(120), rng.integers(2, 9, 120))
    y = rng.integers(0, 2, users.size)
    s = rng.random(users.size) + 0.2 * y
    from recharness.metrics.classification import group_auc

    _, aucs, sizes = group_auc(y, s, users)
    ok = ~np.isnan(aucs)
    # the same units as gauc_units: every user, one without both classes weighing 0 (resampled all the same)
    num, den = np.where(ok, aucs * sizes, 0.0), np.where(ok, sizes, 0).astype(float)
    ref = _scipy_ci((num, den), lambda x, w, axis=-1: x.sum(axis) / w.sum(axis), paired=True, vectorized=True)
    u = gauc_units(y, s, users, "impressions")
    assert u.point() == pytest.approx(gauc(y, s, users).weighted, abs=1e-12)
    assert u.point() == pytest.approx(num.sum() / den.sum(), abs=1e-12) and (~ok).any()
    _close(_ci(u), ref)


def test_paired_difference_ci_matches_scipy():
    rng = np.random.default_rng(4)
    n = 300
    a = (rng.random(n) < 0.35).astype(float)
    b = np.where(rng.random(n) < 0.8, a, 1 - a)
    ref = _scipy_ci((a, b), lambda x, y, axis=-1: x.mean(axis) - y.mean(axis), paired=True, vectorized=True)
    res = paired_bootstrap(mean_units(list(range(n)), a), mean_units(list(range(n)), b), B)
    _close((res["lo"], res["hi"]), ref)
    assert res["diff"] == pytest.approx(a.mean() - b.mean())
    # the p-value inverts the interval: 0 outside the interval <=> p < 0.05; by hand from the same counts
    w = np.concatenate(list(resample_counts(n, B, 0)))
    d = (w @ a - w @ b) / n
    assert res["p"] == pytest.approx(min(1.0, 2 * min(np.mean(d <= 0), np.mean(d >= 0))), abs=1e-12)
    assert res["p"] > 0.05 and res["lo"] < 0 < res["hi"]  # here a tie
    # and a clear difference: b loses 15% of a's ones
    ones = np.flatnonzero(a)
    c = a.copy()
    c[ones[: int(0.15 * ones.size) + 1]] = 0
    res = paired_bootstrap(mean_units(list(range(n)), a), mean_units(list(range(n)), c), B)
    assert res["p"] < 0.05 and res["lo"] > 0


def test_bootstrap_p_edges():
    assert bootstrap_p(np.zeros(100)) == 1.0  # identical methods
    assert bootstrap_p(np.ones(100)) == 0.0
    assert bootstrap_p(np.r_[np.ones(90), -np.ones(10)]) == pytest.approx(0.2)


# ---------------------------------------------------------------- permutation tests vs scipy.stats.permutation_test


def _scipy_perm(x, y, statistic, n_resamples=9999):
    return stats.permutation_test((x, y), statistic, permutation_type="samples", n_resamples=n_resamples,
                                  vectorized=True, random_state=0).pvalue


def test_permutation_exact_equals_scipy_mean():
    rng = np.random.default_rng(5)
    a, b = rng.random(11), rng.random(11) + 0.2
    ua, ub = mean_units(list(range(11)), a), mean_units(list(range(11)), b)
    ours = paired_permutation(ua, ub, permutations=9999)
    assert ours["exact"] and ours["permutations"] == 2 ** 11
    ref = _scipy_perm(a, b, lambda x, y, axis=-1: x.mean(axis) - y.mean(axis))
    assert ours["p"] == pytest.approx(ref, abs=1e-12)


def test_permutation_exact_equals_scipy_auc():
    rng = np.random.default_rng(6)
    n = 12
    y = np.array([0, 1] * 6)
    sa = rng.random(n) + 0.5 * y
    sb = rng.random(n)
    ours = paired_permutation(AUCUnits(list(range(n)), sa, y), AUCUnits(list(range(n)), sb, y), permutations=9999)
    # what is swapped is each method's percentile rank (AUCUnits.swapped), the same statistic in scipy
    ref = _scipy_perm(stats.rankdata(sa) / n, stats.rankdata(sb) / n,
                      lambda p, q, axis=-1: _auc_ref(np.broadcast_to(y, p.shape), p, axis)
                      - _auc_ref(np.broadcast_to(y, q.shape), q, axis))
    assert ours["exact"] and ours["p"] == pytest.approx(ref, abs=1e-12)


def test_permutation_random_agrees_with_scipy():
    rng = np.random.default_rng(7)
    n = 200
    a = (rng.random(n) < 0.4).astype(float)
    b = np.where(rng.random(n) < 0.85, a, (rng.random(n) < 0.3).astype(float))
    ours = paired_permutation(mean_units(list(range(n)), a), mean_units(list(range(n)), b), permutations=B)["p"]
    ref = _scipy_perm(a, b, lambda x, y, axis=-1: x.mean(axis) - y.mean(axis), n_resamples=B)
    assert abs(ours - ref) <= 4 * math.sqrt(max(ref * (1 - ref), 1e-4) / B) * math.sqrt(2) + 2 / B


def test_permutation_auc_and_bleu_swaps_agree_with_rescoring():
    """The vectorised swaps (AUC re-ranked per row, BLEU sums shifted) equal re-scoring the swapped answers."""
    from sacrebleu.metrics import BLEU

    rng = np.random.default_rng(8)
    n = 30
    y = rng.integers(0, 2, n)
    sa, sb = np.round(rng.random(n), 1), np.round(rng.random(n), 1)  # ties within and across the methods
    ua, ub = AUCUnits(list(range(n)), sa, y), AUCUnits(list(range(n)), sb, y)
    sw = rng.random((3, n)) < 0.5
    ra, rb = stats.rankdata(sa) / n, stats.rankdata(sb) / n  # each method's percentile ranks are swapped
    for row, d in zip(sw, ua.swapped(ub, sw)):
        assert d == pytest.approx(roc_auc_score(y, np.where(row, rb, ra)) - roc_auc_score(y, np.where(row, ra, rb)))
    refs = ["a b c d", "e f g", "h i j k l", "m n"] * 2
    ha = ["a b c", "e f", "h i j", "x"] * 2
    hb = ["a b c d", "f g", "k l", "m n"] * 2
    ids = list(range(8))
    ba, bb = bleu_units(ids, ha, refs, 4), bleu_units(ids, hb, refs, 4)
    sw = rng.random((3, 8)) < 0.5
    metric = BLEU(max_ngram_order=4)
    for row, d in zip(sw, ba.swapped(bb, sw)):
        a2 = [h2 if x else h1 for h1, h2, x in zip(ha, hb, row)]
        b2 = [h1 if x else h2 for h1, h2, x in zip(ha, hb, row)]
        assert d == pytest.approx(metric.corpus_score(a2, [refs]).score - metric.corpus_score(b2, [refs]).score)


def test_pairing_needs_the_same_units():
    with pytest.raises(ValueError, match="differ"):
        paired_bootstrap(mean_units(["a", "b"], [1, 0]), mean_units(["a", "c"], [1, 0]), 10)


# ---------------------------------------------------------------- GAUC weightings


def test_gauc_recbole_hand_worked_case():
    """RecBole's tests/metrics/test_rank_metrics.py, case 0: users of 2, 3 and 5 items with 1, 2 and 3
    positives whose ranks (best first) sum to 1, 4 and 9, i.e. per-user AUC 1, 0.5 and 0.5.
    RecBole weights by positives: (1*1 + 2*0.5 + 3*0.5) / 6 = 0.5833; by impressions
    (2*1 + 3*0.5 + 5*0.5) / 10 = 0.6; unweighted 0.6667. Scores here are one ordering with those
    ranks: user 0 [pos, neg], user 1 [pos, neg, pos], user 2 [pos, neg, pos, neg, pos], best first."""
    users = [0, 0, 1, 1, 1, 2, 2, 2, 2, 2]
    y = [1, 0, 1, 0, 1, 1, 0, 1, 0, 1]
    s = [0.9, 0.1, 0.9, 0.5, 0.1, 0.9, 0.8, 0.7, 0.6, 0.5]
    r = gauc(y, s, users)
    assert round(r.by("positives"), 4) == 0.5833 and r.positive_weighted == pytest.approx(3.5 / 6)
    assert r.by("impressions") == pytest.approx(0.6) and r.impression_weighted == r.weighted
    assert r.by("uniform") == pytest.approx(2 / 3)
    for w in GAUC_WEIGHTINGS:
        assert gauc_units(y, s, users, w).point() == pytest.approx(r.by(w))
    with pytest.raises(ValueError, match="weighting"):
        r.by("users")
    # case 1: a user without positives and one with only positives are skipped; the one left has AUC 0
    r1 = gauc([1, 0, 0] + [0] * 6 + [1] * 4, [0.1, 0.5, 0.9] + [0.5] * 6 + [0.5] * 4, [0] * 3 + [1] * 6 + [2] * 4)
    assert r1.n_groups == 1 and r1.positive_weighted == r1.weighted == r1.unweighted == 0.0


def test_exact_test_on_clusters_equals_scipy_on_the_clusters_sums():
    """A mean over samples whose users swap together: the exact sign-flip test over 12 users equals scipy's
    paired permutation test of the users' summed values (the per-cluster shortcut), to 1e-9."""
    from scipy.stats import permutation_test

    from recharness.metrics.bootstrap import mean_units, paired_permutation

    rng = np.random.default_rng(3)
    n, users = 300, 12
    cl = rng.integers(0, users, n)
    a = rng.random(n)
    b = a + rng.normal(0.05, 0.3, n)
    got = paired_permutation(mean_units(range(n), a, clusters=cl), mean_units(range(n), b, clusters=cl))
    sa, sb = np.bincount(cl, a, users), np.bincount(cl, b, users)
    ref = permutation_test((sa, sb), lambda x, y, axis: (x.sum(axis=axis) - y.sum(axis=axis)) / n,
                           permutation_type="samples", vectorized=True, n_resamples=np.inf, alternative="two-sided")
    assert got["exact"] and got["units"] == users and got["permutations"] == 2**users
    assert got["diff"] == pytest.approx(ref.statistic, abs=1e-12)
    assert abs(got["p"] - ref.pvalue) < 1e-9


def test_auc_permutation_swaps_ranks_not_raw_scores_of_another_scale():
    """Two methods with the same order on different scales are the same method to AUC: every swap leaves the
    difference at 0 (raw scores mixed a probability into a list of mean ratings); one swap checked by sklearn."""
    from scipy.stats import rankdata
    from sklearn.metrics import roc_auc_score

    from recharness.metrics.bootstrap import AUCUnits

    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 300)
    x = rng.normal(size=300) + y
    ids = list(range(300))
    a, same = AUCUnits(ids, x, y), AUCUnits(ids, 10 * x + 5, y)  # a monotone transform of a
    swaps = rng.integers(0, 2, (50, 300)).astype(bool)
    assert np.allclose(a.swapped(same, swaps), 0.0)
    other = rng.normal(size=300) + 0.3 * y  # a weaker method, on a scale of its own
    b = AUCUnits(ids, 100 + other, y)
    ra, rb = rankdata(x) / 300, rankdata(100 + other) / 300
    s = swaps[0]
    want = roc_auc_score(y, np.where(s, rb, ra)) - roc_auc_score(y, np.where(s, ra, rb))
    assert a.swapped(b, swaps[:1])[0] == pytest.approx(want, abs=1e-12)
    assert a.point() == pytest.approx(roc_auc_score(y, x)) and b.point() == pytest.approx(roc_auc_score(y, other))


def test_permutation_p_counts_a_near_tie_as_scipy_does():
    """A null value 1.5e-14 relatively below the observed one is a tie under scipy's tolerance (100 float64 eps,
    2.2e-14), not under the 1e-14 used before; the p-value is scipy's on the same null."""
    from recharness.metrics.bootstrap import permutation_p

    observed = 0.3
    null = np.array([observed * (1 - 1.5e-14), 0.0, 0.1, -0.1, 0.05, -0.05, 0.2, -0.2])
    assert not null[0] >= observed  # not a tie to the letter
    # scipy.stats.permutation_test's comparison (stats/_resampling.py), on this null
    eps = 100 * np.finfo(np.float64).eps
    greater = np.mean(null >= observed - abs(eps * observed))
    less = np.mean(null <= observed + abs(eps * observed))
    assert greater == 1 / 8  # the near tie counted (0 under a 1e-14 tolerance)
    assert permutation_p(null, observed, exact=True) == pytest.approx(2 * min(less, greater)) == pytest.approx(2 / 8)


def test_auc_permutation_is_exact_only_when_all_flips_fit_the_permutations_asked():
    """The review of 2026-11-30: AUC's flips each cost a row of Python work, and the exact test over 20 users
    (2**20 flips) took about 16 s a comparison, one per row of a table. Exact now up to 16 users, or when
    2**users <= permutations; else random flips, whose p agrees with the exact one."""
    rng = np.random.default_rng(11)
    n, users = 220, 17
    cl = rng.integers(0, users, n)
    y = rng.random(n) < 0.4
    sa = rng.random(n) + 0.3 * y
    sb = rng.random(n) + 0.1 * y
    ua, ub = AUCUnits(list(range(n)), sa, y, clusters=cl), AUCUnits(list(range(n)), sb, y, clusters=cl)
    exact = paired_permutation(ua, ub, permutations=2**users)
    sampled = paired_permutation(ua, ub, permutations=2000)
    assert exact["exact"] and exact["permutations"] == 2**users
    assert not sampled["exact"] and sampled["permutations"] == 2000
    assert exact["diff"] == sampled["diff"]
    assert abs(sampled["p"] - exact["p"]) < 4 * np.sqrt(exact["p"] * (1 - exact["p"]) / 2000) + 1e-3
    # means stay exact up to EXACT_MAX_UNITS units (their flips are one matrix product), AUC up to 16 users
    assert paired_permutation(mean_units(range(n), sa, clusters=cl), mean_units(range(n), sb, clusters=cl),
                              permutations=100)["exact"]
    few = cl < 16
    ids = list(range(int(few.sum())))
    assert paired_permutation(AUCUnits(ids, sa[few], y[few], clusters=cl[few]),
                              AUCUnits(ids, sb[few], y[few], clusters=cl[few]), permutations=100)["exact"]
