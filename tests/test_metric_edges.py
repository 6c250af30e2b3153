"""Metric edges a review found: beyond-accuracy top k is the first k slots, a grouped mean never averages fewer
groups than its point value, a NaN score ranks below every number, fewer unstratified resamples are a prefix of more."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from recharness.metrics.beyond_accuracy import Popularity, beyond_accuracy_units
from recharness.metrics.bootstrap import (
    DEFAULT_RESAMPLES,
    RatioUnits,
    paired_bootstrap,
    percentile_ci,
    pooled_strata,
    resample_counts,
)
from recharness.metrics.full_ranking import target_ranks

# ------------------------------------------------------------------ 1. beyond accuracy: top k slots first


def test_beyond_accuracy_cuts_to_k_before_dropping_repeats_and_unknown_ids():
    # training: a 4 interactions (users u1, u2, u3), b 1, c 1, d 0, e 0; 3 users
    tr = pl.DataFrame({"user_id": ["u1", "u1", "u2", "u3", "u3", "u3"], "item_id": ["a", "b", "a", "a", "c", "a"]})
    pop = Popularity.of(tr, ["a", "b", "c", "d", "e"])
    u = beyond_accuracy_units(["s1", "s2"], [["a", "a", "b", "c"], ["zz", "d", "e"]], ["a", "d"], [1.0, 0.0],
                              pop, k=2)
    # top-2 slots: s1 = a, a (repeat wastes slot 2) -> {a}; s2 = zz (unknown, wastes slot 1), d -> {d}
    assert u["coverage@2"].point() == 2 / 5  # {a, d} of 5 (old: {a, b, d, e} = 0.8)
    # exposures sorted [0, 0, 0, 1, 1], coefficients 2i - m - 1 = -4 -2 0 2 4: (2 + 4) / (5 * 2)
    assert np.isclose(u["Gini@2"].point(), 0.6)  # old: 0.2
    assert np.isclose(u["ARP@2"].point(), (4 + 0) / 2)  # old: ((4 + 1) / 2 + 0) / 2 = 1.25
    # self-information -log2((users_of + 1) / (3 + 1)): a 0, d 2
    assert np.isclose(u["novelty@2"].point(), (0 + 2) / 2)


# ------------------------------------------------------------------ 2. a grouped mean never averages fewer groups


def _levels():
    lv = np.array(["easy"] * 10 + ["medium"] * 10 + ["hard"] * 3)
    tau = np.r_[np.full(10, 0.2), np.full(10, 0.4), np.full(3, 0.9)]
    return lv, tau


def test_tau_rank_resamples_never_average_fewer_levels_than_the_point_value():
    lv, tau = _levels()
    u = RatioUnits([str(i) for i in range(23)], tau, np.ones(23), groups=lv, strata=lv)
    assert np.isclose(u.point(), (0.2 + 0.4 + 0.9) / 3)
    assert "\x00pooled" not in set(pooled_strata(lv)) and len(set(pooled_strata(lv))) == 2  # hard pooled into easy
    w = np.concatenate(list(u.counts(2000, 0)))
    r = u.replicates(w)
    missing = (w[:, lv == "hard"].sum(axis=1) == 0) | (w[:, lv == "easy"].sum(axis=1) == 0)
    # resamples that drew no hard group from the easy+hard pool of 13: about 2000 * (10/13)**13 = 66
    assert 30 < missing.sum() < 110
    # such a resample is undefined, never a mean over 2 levels (0.3); every other one averages all 3 levels
    assert np.isnan(r[missing]).all()
    assert np.allclose(r[~missing], 0.5)
    assert percentile_ci(r) == pytest.approx((0.5, 0.5), abs=1e-12)  # every defined resample is 0.5
    # the paired bootstrap of two methods on the same units leaves those resamples out too
    other = RatioUnits([str(i) for i in range(23)], tau * 0.5, np.ones(23), groups=lv, strata=lv)
    d = paired_bootstrap(u, other, resamples=2000, seed=0)
    assert d["resamples"] == 2000 - missing.sum() and np.isclose(d["lo"], 0.25) and np.isclose(d["hi"], 0.25)


def test_a_group_absent_from_the_point_value_does_not_make_resamples_undefined():
    # a level whose groups were all left out (den 0 everywhere) is not among the levels averaged
    lv, tau = _levels()
    den = np.r_[np.ones(20), np.zeros(3)]
    u = RatioUnits([str(i) for i in range(23)], tau * den, den, groups=lv, strata=lv)
    assert np.isclose(u.point(), 0.3)
    r = u.replicates(np.concatenate(list(u.counts(500, 0))))
    assert np.allclose(r, 0.3)


# ------------------------------------------------------------------ 3. NaN is below every number


def _brute_rank(s: np.ndarray, t: int, ex: list[int]) -> int:
    keep = [j for j in range(s.size) if j == t or j not in ex]
    if np.isnan(s[t]):  # a NaN target loses every tie: every other item is above it
        return len(keep)

    def key(j):
        return (1, 0.0, j) if np.isnan(s[j]) else (0, -s[j], j)

    return sorted(keep, key=key).index(t) + 1


def test_a_scored_target_beats_every_nan_item_even_at_minus_inf():
    assert target_ranks(np.array([[np.nan, -np.inf, 0.5]]), [1]).tolist() == [2]  # old: 3
    assert target_ranks(np.array([[np.nan, np.nan, -np.inf]]), [2]).tolist() == [1]
    # a NaN target still loses every tie (ranks last)
    assert target_ranks(np.array([[np.nan, -np.inf, 0.5]]), [0]).tolist() == [3]
    assert target_ranks(np.array([[-np.inf, np.nan, -np.inf]]), [1]).tolist() == [3]


def test_target_ranks_match_a_brute_force_rank_with_nan_and_infinities():
    rng = np.random.default_rng(0)
    values = np.array([np.nan, -np.inf, np.inf, 0.0, 1.0, 2.0])
    for _ in range(2000):
        rows, items = int(rng.integers(1, 5)), int(rng.integers(1, 9))
        s = values[rng.integers(0, values.size, (rows, items))]
        tg = rng.integers(0, items, rows)
        ex = [rng.integers(0, items, rng.integers(0, 5)).tolist() for _ in range(rows)]
        got = target_ranks(s, tg, ex)
        assert got.tolist() == [_brute_rank(s[r], int(tg[r]), ex[r]) for r in range(rows)], (s, tg, ex)


# ------------------------------------------------------------------ 4. resample streams


def test_unstratified_counts_of_fewer_resamples_are_a_prefix_of_more():
    """The prefix promise holds without strata (with strata a run of another length is another stream, as
    `resample_counts` says: making it a prefix would have moved published intervals over > 2,000 units)."""
    ten = np.concatenate(list(resample_counts(13, 10, 0)))
    assert np.array_equal(np.concatenate(list(resample_counts(13, 3, 0))), ten[:3])
    cl = np.array([f"c{i // 2}" for i in range(13)])
    a = np.concatenate(list(resample_counts(13, 4, 1, clusters=cl)))
    b = np.concatenate(list(resample_counts(13, 40, 1, clusters=cl)))
    assert np.array_equal(a, b[:4])


def test_the_default_stratified_run_keeps_its_stream():
    # DEFAULT_RESAMPLES rows are one block, drawn as before the fix: published stratified intervals do not move
    st = np.array(["easy"] * 200 + ["medium"] * 200 + ["hard"] * 3)
    got = np.concatenate(list(resample_counts(st.size, DEFAULT_RESAMPLES, 0, strata=st)))
    rng = np.random.default_rng(0)
    codes = np.unique(pooled_strata(st), return_inverse=True)[1]
    members = [np.flatnonzero(codes == c) for c in range(codes.max() + 1)]
    draws = np.concatenate([m[rng.integers(0, m.size, size=(DEFAULT_RESAMPLES, m.size))] for m in members], axis=1)
    want = np.stack([np.bincount(d, minlength=st.size) for d in draws]).astype(float)
    assert np.array_equal(got, want)
    # and the stream itself, as literals: a change made alike here and in `resample_counts` (or in NumPy's
    # Generator.integers) would move published intervals, and this says so
    assert got[0, :8].tolist() == [1, 2, 1, 2, 1, 1, 1, 0] and got[1, :8].tolist() == [0, 2, 1, 1, 0, 2, 0, 2]
