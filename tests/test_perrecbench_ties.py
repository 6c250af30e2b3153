"""PerRecBench pointwise answers with ties: each tie counts as a coin flip (the expected tau of the paper's argsort
ranking), not as tau-b, whose smaller denominator scored a hedging answer above that expectation."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.stats import kendalltau

from recharness.tasks.perrecbench.scoring import score_groups, tau_ties_as_coin_flips


def _group(ratings, truth, means):
    sample = {"id": "g", "level": "medium", "truth": {"relative_ratings": truth, "avg_ratings": means}}
    return score_groups([sample], {"g": {"valid": True, "parsed": {"ratings": ratings}}})[0]


def test_a_hedging_answer_scores_the_expectation_of_random_tie_breaks():
    # truth 1.5 > 0.2 > -1.0; predicted relative ratings 1, 0, 0: pairs 1-2 and 1-3 concordant, 2-3 a coin flip
    g = _group([4, 3, 3], [1.5, 0.2, -1.0], [3.0, 3.0, 3.0])
    assert g.status == "ok" and g.tau_rank == pytest.approx(2 / 3)  # tau-b gave 0.816
    # the same number as the mean tau over every way of breaking the tie
    x, y = np.array([1.0, 0.0, 0.0]), np.array([1.5, 0.2, -1.0])
    broken = [kendalltau(x + np.array(eps), y).statistic for eps in ([0, 0, 1e-9], [0, 1e-9, 0])]
    assert g.tau_rank == pytest.approx(np.mean(broken))


def test_without_ties_it_is_scipys_tau_b_and_a_constant_answer_is_tied():
    rng = np.random.default_rng(0)
    for n in (2, 3, 4, 6):
        for _ in range(20):
            x, y = rng.permutation(n).astype(float), rng.normal(size=n)
            assert tau_ties_as_coin_flips(x, y) == pytest.approx(kendalltau(x, y).statistic)
    # truth ties keep tau-b's truth-side correction: with no prediction ties, scipy's tau-b for every ordering;
    # by hand, [4, 3, 2, 1]: the 5 pairs the truth orders all concordant, sqrt(n0 (n0 - 1 truth tie)) = sqrt(6 * 5)
    y = np.array([1.0, 1.0, 0.0, -1.0])
    for p in itertools.permutations(range(4)):
        x = np.array(p, dtype=float)
        assert tau_ties_as_coin_flips(x, y) == pytest.approx(kendalltau(x, y).statistic)
    assert tau_ties_as_coin_flips(np.array([4.0, 3, 2, 1]), y) == pytest.approx(5 / np.sqrt(30))  # 0.9129
    g = _group([3, 3, 3], [1.5, 0.2, -1.0], [3.0, 3.0, 3.0])
    assert g.status == "tied" and g.tau_rank == 0.0
