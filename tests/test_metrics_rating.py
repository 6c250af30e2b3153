import math
import sys
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import mean_absolute_error, mean_squared_error

try:
    import recharness  # noqa: F401
except ImportError:  # package not installed: test the source tree
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from recharness.metrics import mae, rating_errors, rmse

TOL = 1e-12


def test_hand_worked():
    # errors |2-1|, |2-2|, |5-3| = 1, 0, 2 -> MAE = 1, RMSE = sqrt((1 + 0 + 4) / 3) = 1.2909944487
    assert mae([1, 2, 3], [2, 2, 5]) == pytest.approx(1.0, abs=TOL)
    assert rmse([1, 2, 3], [2, 2, 5]) == pytest.approx(1.2909944487358056, abs=TOL)
    assert rating_errors([1, 2, 3], [2, 2, 5]) == {"rmse": pytest.approx(1.2909944487358056, abs=TOL), "mae": 1.0}


def test_clipping_to_scale():
    # predictions 0 and 6 on a 1-5 scale clip to 1 and 5: no error left
    assert mae([1, 5], [0, 6], clip=(1, 5)) == 0.0
    assert rmse([1, 5], [0, 6], clip=(1, 5)) == 0.0
    # unclipped: errors 1 and 1
    assert mae([1, 5], [0, 6]) == pytest.approx(1.0, abs=TOL)
    # truth 4: 4.7 stays (error 0.7), 7 -> 5 (error 1) -> MAE 0.85, RMSE sqrt((0.49 + 1) / 2)
    assert mae([4, 4], [4.7, 7], clip=(1, 5)) == pytest.approx(0.85, abs=TOL)
    assert rmse([4, 4], [4.7, 7], clip=(1, 5)) == pytest.approx(math.sqrt(1.49 / 2), abs=TOL)


def test_errors_and_edge_cases():
    with pytest.raises(ValueError, match="NaN"):
        rmse([1, 2], [np.nan, 2])
    with pytest.raises(ValueError):
        mae([1, 2], [1])
    with pytest.raises(ValueError):
        mae([1], [1], clip=(5, 1))
    assert math.isnan(rmse([], []))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_sklearn(seed):
    rng = np.random.default_rng(seed)
    t = rng.integers(1, 6, 10000).astype(float)
    p = rng.normal(3, 1.5, 10000)
    assert rmse(t, p) == pytest.approx(math.sqrt(mean_squared_error(t, p)), rel=1e-12)
    assert mae(t, p) == pytest.approx(mean_absolute_error(t, p), rel=1e-12)
    pc = np.clip(p, 1, 5)
    assert rmse(t, p, clip=(1, 5)) == pytest.approx(math.sqrt(mean_squared_error(t, pc)), rel=1e-12)
    assert mae(t, p, clip=(1, 5)) == pytest.approx(mean_absolute_error(t, pc), rel=1e-12)
