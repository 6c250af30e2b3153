"""CTR-style binary metrics: AUC, group AUC (GAUC) and log loss.

Why this module exists: CTR suites score millions of (user, item, label, score)
rows, and GAUC over ~10^5 users must not loop in Python per user.  Both AUC and
GAUC are computed exactly from one sort: AUC is the Mann-Whitney statistic
(the probability that a random positive outscores a random negative, ties
counting one half), which is what ``sklearn.metrics.roc_auc_score`` returns.
The pair counts are accumulated in integers, so the only rounding is the
final division.

Undefined cases: AUC needs at least one positive and one negative.  ``auc``
returns NaN (as scikit-learn >= 1.6 does, without the warning) when one class
is missing; ``gauc`` skips such groups and reports how many it kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["auc", "gauc", "group_auc", "GAUCResult", "logloss"]


def _binary_labels(y_true: Any) -> np.ndarray:
    y = np.asarray(y_true)
    if y.ndim != 1:
        raise ValueError(f"labels must be 1-D, got shape {y.shape}")
    if y.dtype == bool:
        return y
    if y.size and not np.isin(y, (0, 1)).all():
        bad = np.unique(y[~np.isin(y, (0, 1))])[:5]
        raise ValueError(f"labels must be 0/1 (or bool); found {bad.tolist()}")
    return y.astype(bool)


def _scores(y_score: Any, n: int) -> np.ndarray:
    s = np.asarray(y_score, dtype=np.float64)
    if s.shape != (n,):
        raise ValueError(f"scores have shape {s.shape}, expected ({n},)")
    if np.isnan(s).any():
        raise ValueError("scores contain NaN; AUC needs every sample ranked")
    return s


def _run_starts(*keys: np.ndarray) -> np.ndarray:
    """Start index of each run of equal consecutive key tuples (arrays already sorted)."""
    n = keys[0].size
    change = np.zeros(n, dtype=bool)
    if n:
        change[0] = True
    for k in keys:
        change[1:] |= k[1:] != k[:-1]
    return np.flatnonzero(change)


def auc(y_true: Any, y_score: Any) -> float:
    """Area under the ROC curve, ties in ``y_score`` counted as one half.

    Equal to ``sklearn.metrics.roc_auc_score`` for binary labels; NaN when only
    one class is present.
    """
    y = _binary_labels(y_true)
    s = _scores(y_score, y.size)
    n_pos = int(y.sum())
    n_neg = y.size - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    order = np.argsort(s, kind="stable")
    s, y = s[order], y[order]
    starts = _run_starts(s)
    pos = np.add.reduceat(y.astype(np.int64), starts)
    size = np.diff(np.r_[starts, y.size])
    neg = size - pos
    neg_below = np.cumsum(neg) - neg
    # 2 * (pairs a positive wins) + (tied pairs), all in int64: exact.
    twice = 2 * int(np.dot(pos, neg_below)) + int(np.dot(pos, neg))
    return twice / (2 * n_pos * n_neg)


@dataclass(frozen=True)
class GAUCResult:
    """GAUC over the groups that have both classes.

    ``weighted`` weights each group's AUC by its number of samples (the GAUC of
    DIN and RecBench); ``unweighted`` is the plain mean over kept groups.
    """

    weighted: float
    unweighted: float
    n_groups: int  # groups kept (both classes present)
    n_groups_total: int
    n_samples: int  # samples in kept groups

    def as_dict(self) -> dict[str, float | int]:
        return {
            "gauc": self.weighted,
            "gauc_unweighted": self.unweighted,
            "gauc_groups": self.n_groups,
            "gauc_groups_total": self.n_groups_total,
            "gauc_samples": self.n_samples,
        }


def group_auc(y_true: Any, y_score: Any, groups: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-group AUC in one vectorised pass.

    Returns ``(group_ids, aucs, sizes)`` over every distinct group (sorted);
    ``aucs`` is NaN for a group with a single class.  One lexsort by
    (group, score) then reductions over runs of equal (group, score) and over
    groups; no Python loop per group.
    """
    y = _binary_labels(y_true)
    s = _scores(y_score, y.size)
    g = np.asarray(groups)
    if g.shape != (y.size,):
        raise ValueError(f"groups have shape {g.shape}, expected ({y.size},)")
    if y.size == 0:
        return g[:0], np.zeros(0), np.zeros(0, dtype=np.int64)
    if g.dtype.kind in "iub":
        order = np.lexsort((s, g))
        g_sorted = g[order]
    else:  # strings / objects: encode once, lexsort on the integer codes
        ids, codes = np.unique(g, return_inverse=True)
        order = np.lexsort((s, codes))
        g_sorted = codes[order]
    s, y = s[order], y[order].astype(np.int64)

    run = _run_starts(g_sorted, s)  # runs of tied (group, score)
    pos = np.add.reduceat(y, run)
    size = np.diff(np.r_[run, y.size])
    neg = size - pos
    run_group = g_sorted[run]
    gstart = _run_starts(run_group)  # first run of each group
    cum_neg = np.cumsum(neg)
    before = np.repeat((cum_neg - neg)[gstart], np.diff(np.r_[gstart, run.size]))
    neg_below = cum_neg - neg - before  # negatives with a lower score in the same group
    twice = 2 * pos * neg_below + pos * neg
    g_twice = np.add.reduceat(twice, gstart)
    g_pos = np.add.reduceat(pos, gstart)
    g_size = np.add.reduceat(size, gstart)
    g_neg = g_size - g_pos
    denom = 2 * g_pos * g_neg
    aucs = np.full(gstart.size, np.nan)
    ok = denom > 0
    aucs[ok] = g_twice[ok] / denom[ok]
    gid = run_group[gstart]
    if g.dtype.kind not in "iub":
        gid = ids[gid]
    return gid, aucs, g_size


def gauc(y_true: Any, y_score: Any, groups: Any) -> GAUCResult:
    """Group AUC: per-group (usually per-user) AUC averaged over groups with both classes.

    Groups with a single class are skipped (their AUC is undefined); the result
    reports how many were kept.  All NaN if no group qualifies.
    """
    _, aucs, sizes = group_auc(y_true, y_score, groups)
    ok = ~np.isnan(aucs)
    kept = int(ok.sum())
    if kept == 0:
        return GAUCResult(float("nan"), float("nan"), 0, int(aucs.size), 0)
    w = sizes[ok].astype(np.float64)
    return GAUCResult(
        weighted=float(np.dot(aucs[ok], w) / w.sum()),
        unweighted=float(aucs[ok].mean()),
        n_groups=kept,
        n_groups_total=int(aucs.size),
        n_samples=int(sizes[ok].sum()),
    )


def logloss(y_true: Any, y_prob: Any, eps: float | None = None) -> float:
    """Mean binary cross-entropy (natural log) of predicted P(label = 1).

    Probabilities are clipped to ``[eps, 1 - eps]`` so a confident wrong answer
    costs a large but finite loss; the default ``eps`` is float64 machine
    epsilon, which is what ``sklearn.metrics.log_loss`` uses, and like it the
    negative-class probability is ``clip(1 - p)``.
    """
    y = _binary_labels(y_true)
    p = np.asarray(y_prob, dtype=np.float64)
    if p.shape != y.shape:
        raise ValueError(f"probabilities have shape {p.shape}, expected {y.shape}")
    if y.size == 0:
        return float("nan")
    if np.isnan(p).any() or (p < 0).any() or (p > 1).any():
        raise ValueError("probabilities must lie in [0, 1] (no NaN)")
    e = np.finfo(np.float64).eps if eps is None else float(eps)
    p_true = np.where(y, p, 1.0 - p)
    return float(-np.mean(np.log(np.clip(p_true, e, 1.0 - e))))
