import math
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import kendalltau

try:
    import recharness  # noqa: F401
except ImportError:  # package not installed: test the source tree
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from recharness.metrics import kendall_tau, kendall_tau_groups, mean_kendall_tau

TOL = 1e-12


def _scipy_tau(x, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return kendalltau(x, y).statistic


def test_hand_worked_no_ties():
    # 6 pairs, only (2nd, 3rd) is discordant: C = 5, D = 1 -> tau = (5 - 1) / 6
    assert kendall_tau([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(4 / 6, abs=TOL)
    assert kendall_tau([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0, abs=TOL)


def test_hand_worked_tau_b_ties():
    # x = 1 1 2 3, y = 1 2 2 3: pair (1,2) tied in x, pair (2,3) tied in y, the other 4 concordant.
    # tau_b = (C - D) / sqrt((n0 - n1)(n0 - n2)) = 4 / sqrt(5 * 5) = 0.8
    assert kendall_tau([1, 1, 2, 3], [1, 2, 2, 3]) == pytest.approx(0.8, abs=TOL)


def test_undefined_cases_are_nan():
    assert math.isnan(kendall_tau([1], [2]))
    assert math.isnan(kendall_tau([], []))
    assert math.isnan(kendall_tau([1, 1, 1], [1, 2, 3]))  # constant x
    with pytest.raises(ValueError):
        kendall_tau([1, 2], [1])
    with pytest.raises(ValueError, match="NaN"):
        kendall_tau([1, np.nan], [1, 2])


@pytest.mark.parametrize("seed", range(6))
def test_matches_scipy(seed):
    rng = np.random.default_rng(seed)
    for n, vals in ((2, 3), (7, 3), (40, 5), (300, 1000), (5000, 10)):
        x = rng.integers(0, vals, n)
        y = rng.integers(0, vals, n) + (x if seed % 2 else -x)
        ref = _scipy_tau(x, y)
        got = kendall_tau(x, y)
        if math.isnan(ref):
            assert math.isnan(got)
        else:
            assert got == pytest.approx(ref, abs=TOL)
    x, y = rng.random(1000), rng.random(1000)  # continuous, no ties
    assert kendall_tau(x, y) == pytest.approx(_scipy_tau(x, y), abs=TOL)


@pytest.mark.parametrize("seed", [0, 1])
def test_groups_match_scipy_loop(seed):
    rng = np.random.default_rng(seed)
    n = 4000
    g = rng.integers(0, 300, n)
    x = rng.integers(0, 5, n)
    y = x + rng.integers(-2, 3, n)
    ids, taus, sizes = kendall_tau_groups(x, y, g)
    ref = np.array([_scipy_tau(x[g == u], y[g == u]) for u in ids])
    np.testing.assert_array_equal(np.isnan(taus), np.isnan(ref))
    ok = ~np.isnan(ref)
    np.testing.assert_allclose(taus[ok], ref[ok], rtol=0, atol=TOL)
    assert sizes.tolist() == [int((g == u).sum()) for u in ids]
    m = mean_kendall_tau(x, y, g)
    assert m["kendall_tau"] == pytest.approx(ref[ok].mean(), abs=TOL)
    assert m["kendall_tau_groups"] == ok.sum() and m["kendall_tau_groups_total"] == ids.size


def test_mean_over_ragged_vectors():
    xs = [[1, 2, 3, 4], [1, 1, 2, 3], [5, 5], [1]]
    ys = [[1, 3, 2, 4], [1, 2, 2, 3], [1, 2], [1]]
    # taus: 2/3, 0.8, NaN (constant x), NaN (single item) -> mean over 2 = (2/3 + 0.8) / 2
    m = mean_kendall_tau(xs, ys)
    assert m["kendall_tau"] == pytest.approx((2 / 3 + 0.8) / 2, abs=TOL)
    assert (m["kendall_tau_groups"], m["kendall_tau_groups_total"]) == (2, 4)
    with pytest.raises(ValueError, match="group 1"):
        mean_kendall_tau([[1, 2], [1, 2]], [[1, 2], [1]])
