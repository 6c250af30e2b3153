import math
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import log_loss, roc_auc_score

try:
    import recharness  # noqa: F401
except ImportError:  # package not installed: test the source tree
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from recharness.metrics import auc, gauc, group_auc, logloss
from recharness.metrics.classification import GAUC_WEIGHTINGS, gauc_units

TOL = 1e-12


def _sk_log_loss(y, p):
    try:  # scikit-learn >= 1.9 renamed y_pred to y_proba
        return log_loss(y, y_proba=p)
    except TypeError:
        return log_loss(y, p)


# ---------------------------------------------------------------- AUC


def test_auc_hand_worked():
    # positives 0.35 and 0.8 vs negatives 0.1 and 0.4:
    # 0.35 beats 0.1 only (1), 0.8 beats both (2) -> 3 of 4 pairs
    assert auc([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]) == pytest.approx(0.75, abs=TOL)


def test_auc_ties_count_half():
    # pairs (pos, neg): (0.5, 0.5) tie = 0.5, (0.5, 0.2) = 1, (0.9, 0.5) = 1, (0.9, 0.2) = 1 -> 3.5 / 4
    assert auc([0, 1, 0, 1], [0.5, 0.5, 0.2, 0.9]) == pytest.approx(0.875, abs=TOL)
    # every score equal -> 0.5
    assert auc([0, 1, 1, 0, 1], [3, 3, 3, 3, 3]) == pytest.approx(0.5, abs=TOL)


def test_auc_single_class_is_nan():
    assert math.isnan(auc([1, 1, 1], [0.1, 0.2, 0.3]))
    assert math.isnan(auc([0, 0], [0.1, 0.2]))
    assert math.isnan(auc([], []))


def test_auc_input_checks():
    with pytest.raises(ValueError, match="0/1"):
        auc([-1, 1], [0.2, 0.3])
    with pytest.raises(ValueError):
        auc([0, 1], [0.2])
    with pytest.raises(ValueError, match="NaN"):
        auc([0, 1], [0.2, np.nan])
    assert auc(np.array([False, True]), [0.2, 0.3]) == 1.0


@pytest.mark.parametrize("seed,n,levels", [(0, 50, 5), (1, 2000, 20), (2, 20000, 1000), (3, 20000, None)])
def test_auc_matches_sklearn(seed, n, levels):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    s = rng.random(n) + 0.3 * y
    if levels is not None:  # force many ties
        s = np.round(s * levels) / levels
    assert auc(y, s) == pytest.approx(roc_auc_score(y, s), abs=TOL)
    # unbalanced classes
    y2 = (rng.random(n) < 0.03).astype(int)
    y2[0] = 1
    assert auc(y2, s) == pytest.approx(roc_auc_score(y2, s), abs=TOL)


# ---------------------------------------------------------------- GAUC


def test_gauc_hand_worked():
    groups = ["u1", "u1", "u2", "u2", "u2", "u2", "u3", "u3"]
    y = [1, 0, 1, 0, 0, 1, 1, 1]
    s = [0.9, 0.1, 0.2, 0.6, 0.1, 0.3, 0.5, 0.4]
    # u1: 1 pos beats 1 neg -> AUC 1, 2 samples
    # u2: pos 0.2 beats 0.1 only, pos 0.3 beats 0.1 only -> 2/4 = 0.5, 4 samples
    # u3: positives only -> skipped
    # weighted = (2*1 + 4*0.5) / 6 = 2/3 ; unweighted = (1 + 0.5) / 2 = 0.75
    r = gauc(y, s, groups)
    assert r.weighted == pytest.approx(2 / 3, abs=TOL)
    assert r.unweighted == pytest.approx(0.75, abs=TOL)
    assert (r.n_groups, r.n_groups_total, r.n_samples) == (2, 3, 6)
    d = r.as_dict()
    assert d["gauc"] == r.weighted and d["gauc_groups"] == 2
    ids, aucs, sizes = group_auc(y, s, groups)
    assert ids.tolist() == ["u1", "u2", "u3"]
    assert aucs[:2].tolist() == [1.0, 0.5] and math.isnan(aucs[2])
    assert sizes.tolist() == [2, 4, 2]


def test_gauc_no_valid_group():
    r = gauc([1, 0, 1], [0.1, 0.2, 0.3], [1, 2, 3])
    assert math.isnan(r.weighted) and math.isnan(r.unweighted)
    assert (r.n_groups, r.n_groups_total, r.n_samples) == (0, 3, 0)


def _gauc_loop(y, s, g):
    """(by impressions, uniform, groups kept, their impressions, by positives: RecBole's GAUC)."""
    aucs, weights, positives = [], [], []
    for u in np.unique(g):
        m = g == u
        if len(np.unique(y[m])) < 2:
            continue
        aucs.append(roc_auc_score(y[m], s[m]))
        weights.append(m.sum())
        positives.append(y[m].sum())
    aucs, weights, positives = np.array(aucs), np.array(weights, dtype=float), np.array(positives, dtype=float)
    return (float(np.dot(aucs, weights) / weights.sum()), float(aucs.mean()), len(aucs), int(weights.sum()),
            float(np.dot(aucs, positives) / positives.sum()))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gauc_matches_sklearn_loop(seed):
    rng = np.random.default_rng(seed)
    n = 3000
    g = rng.integers(0, 150, n)
    y = (rng.random(n) < 0.3).astype(int)
    s = np.round(rng.random(n) + 0.2 * y, 1)  # heavy ties within users
    w, u, kept, samples, wp = _gauc_loop(y, s, g)
    r = gauc(y, s, g)
    assert r.weighted == pytest.approx(w, abs=TOL)
    assert r.unweighted == pytest.approx(u, abs=TOL)
    assert r.positive_weighted == pytest.approx(wp, abs=TOL)
    # the bootstrap's units give each weighting's point value
    for weighting, value in zip(GAUC_WEIGHTINGS, (w, wp, u)):
        assert gauc_units(y, s, g, weighting).point() == pytest.approx(value, abs=TOL) == r.by(weighting)
    assert (r.n_groups, r.n_samples) == (kept, samples)
    assert r.n_groups_total == len(np.unique(g))
    # large / negative integer ids take the np.unique path: same answer
    rl = gauc(y, s, g * 10**9 - 5 * 10**11)
    assert rl.weighted == pytest.approx(w, abs=TOL) and rl.n_groups == kept
    # string group ids give the same answer (up to summation order)
    rs = gauc(y, s, np.array([f"user-{x}" for x in g]))
    assert rs.weighted == pytest.approx(w, abs=TOL) and rs.n_groups == kept
    # per-group values
    ids, aucs, _ = group_auc(y, s, g)
    for gid, a in zip(ids[:50], aucs[:50]):
        m = g == gid
        if len(np.unique(y[m])) == 2:
            assert a == pytest.approx(roc_auc_score(y[m], s[m]), abs=TOL)
        else:
            assert math.isnan(a)


# ---------------------------------------------------------------- log loss


def test_logloss_hand_worked():
    # -(ln 0.8 + ln(1 - 0.3)) / 2 = (0.2231435513 + 0.3566749439) / 2 = 0.2899092476
    assert logloss([1, 0], [0.8, 0.3]) == pytest.approx(0.2899092476264711, abs=TOL)
    # clipping: p = 0 for a positive costs -ln(eps); eps = 1e-15 -> 34.5387763949
    assert logloss([1], [0.0], eps=1e-15) == pytest.approx(-math.log(1e-15), abs=1e-9)
    assert math.isfinite(logloss([1, 0], [0.0, 1.0]))


def test_logloss_input_checks():
    with pytest.raises(ValueError):
        logloss([1, 0], [1.2, 0.1])
    with pytest.raises(ValueError):
        logloss([1, 0], [np.nan, 0.1])
    assert math.isnan(logloss([], []))


@pytest.mark.parametrize("seed", [0, 1])
def test_logloss_matches_sklearn(seed):
    rng = np.random.default_rng(seed)
    n = 5000
    y = rng.integers(0, 2, n)
    p = rng.random(n)
    p[:20] = 0.0  # exercise clipping at both ends
    p[20:40] = 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = _sk_log_loss(y, p)
    assert logloss(y, p) == pytest.approx(ref, rel=1e-12)


def test_recbench_gauc_is_the_plain_mean_of_the_users_sklearn_auc():
    """RecBench's code (`MetricPool.calculate`, Jyonn/RecBench-MD utils/metrics.py) averages each user's
    `roc_auc_score` plainly: that is GAUC_unweighted, labelled so; the impression-weighted GAUC is DIN's. With
    users of 6 and 2 pairs (AUC 1 and 0) the two differ: 0.5 against 0.75."""
    from sklearn.metrics import roc_auc_score

    from recharness.metrics.registry import header

    y = [1, 1, 1, 0, 0, 0, 1, 0]
    s = [.9, .8, .7, .3, .2, .1, .1, .9]
    g = list("aaaaaabb")
    recbench = float(np.mean([roc_auc_score([y[i] for i in range(8) if g[i] == u], [s[i] for i in range(8) if g[i] == u])
                              for u in "ab"]))
    r = gauc(y, s, g)
    assert recbench == 0.5 and r.unweighted == pytest.approx(recbench) and r.weighted == pytest.approx(0.75)
    assert header("GAUC_unweighted") == "GAUC (mean) ↑" and header("GAUC") == "GAUC (impr.) ↑"
