"""CTR-style binary metrics: AUC, group AUC (GAUC) and log loss.

Why this module exists: CTR suites score millions of (user, item, label, score)
rows, and GAUC over ~10^5 users must not loop in Python per user.  AUC is the
Mann-Whitney statistic (the probability that a random positive outscores a
random negative, ties counting one half), which is what
``sklearn.metrics.roc_auc_score`` returns; both AUC and GAUC count won pairs
with sorts and ``searchsorted``, in integers, so the only rounding is the
final division.

Undefined cases: AUC needs at least one positive and one negative.  ``auc``
returns NaN (as scikit-learn >= 1.6 does, without the warning) when one class
is missing; ``gauc`` skips such groups and reports how many it kept.

GAUC weightings (``GAUC_WEIGHTINGS``; every one averages per-group AUC over the
groups with both classes):

* ``"impressions"``: by the group's samples (DIN's: the ``GAUC`` column);
* ``"positives"``: by the group's positives (RecBole's ``GAUC``);
* ``"uniform"``: the plain mean over groups (``GAUC_unweighted``; RecBench's own code averages its groups'
  AUCs this way).

RecBole's hand-worked case (tests/metrics/test_rank_metrics.py there): users of 2, 3
and 5 items with 1, 2 and 3 positives and AUCs 1, 0.5, 0.5 give 0.5833 by positives,
0.6 by impressions and 0.6667 unweighted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["auc", "gauc", "group_auc", "GAUCResult", "GAUC_WEIGHTINGS", "logloss"]

GAUC_WEIGHTINGS = ("impressions", "positives", "uniform")


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


def _dense_rank(s: np.ndarray) -> np.ndarray:
    """0-based dense rank of each score (ties share a rank)."""
    rank = np.empty(s.size, dtype=np.int64)
    if s.size:
        order = np.argsort(s)
        ss = s[order]
        rank[order] = np.cumsum(np.r_[0, ss[1:] != ss[:-1]])
    return rank


def auc(y_true: Any, y_score: Any) -> float:
    """Area under the ROC curve, ties in ``y_score`` counted as one half.

    Equal to ``sklearn.metrics.roc_auc_score`` for binary labels; NaN when only
    one class is present.  Sort the negatives' scores once; for each positive,
    ``searchsorted`` left/right gives the negatives strictly below / not above
    it, and their sum is twice its (tie-halved) number of won pairs.
    """
    y = _binary_labels(y_true)
    s = _scores(y_score, y.size)
    neg = np.sort(s[~y])
    pos = np.sort(s[y])  # sorted queries: cache-friendly searchsorted
    if pos.size == 0 or neg.size == 0:
        return float("nan")
    twice = int(np.searchsorted(neg, pos, "left").sum()) + int(np.searchsorted(neg, pos, "right").sum())
    return twice / (2 * pos.size * neg.size)


@dataclass(frozen=True)
class GAUCResult:
    """GAUC over the groups that have both classes.

    ``weighted`` weights each group's AUC by its number of samples, i.e. its
    impressions (DIN's GAUC; also ``impression_weighted``);
    ``positive_weighted`` by its positives (RecBole's GAUC); ``unweighted`` is the
    plain mean over kept groups (RecBench's code).  ``by(name)`` picks one of ``GAUC_WEIGHTINGS``.
    """

    weighted: float
    unweighted: float
    n_groups: int  # groups kept (both classes present)
    n_groups_total: int
    n_samples: int  # samples in kept groups
    positive_weighted: float = float("nan")

    @property
    def impression_weighted(self) -> float:
        return self.weighted

    def by(self, weighting: str) -> float:
        """The GAUC under one named weighting: "impressions", "positives" (RecBole) or "uniform"."""
        values = {"impressions": self.weighted, "positives": self.positive_weighted, "uniform": self.unweighted}
        if weighting not in values:
            raise ValueError(f"unknown GAUC weighting {weighting!r}; one of {', '.join(GAUC_WEIGHTINGS)}")
        return values[weighting]

    def as_dict(self) -> dict[str, float | int]:
        return {
            "gauc": self.weighted,
            "gauc_positive_weighted": self.positive_weighted,
            "gauc_unweighted": self.unweighted,
            "gauc_groups": self.n_groups,
            "gauc_groups_total": self.n_groups_total,
            "gauc_samples": self.n_samples,
        }


def _group_codes(groups: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """Integer code per sample; the second value maps codes back to ids (None: code is the id)."""
    if groups.dtype.kind in "iu" and groups.size and groups.min() >= 0 and groups.max() <= 2 * groups.size:
        return groups.astype(np.int64, copy=False), None
    ids, codes = np.unique(groups, return_inverse=True)
    return codes.reshape(-1).astype(np.int64), ids


def group_auc(y_true: Any, y_score: Any, groups: Any, *, positives: bool = False):
    """Per-group AUC in one vectorised pass.

    Returns ``(group_ids, aucs, sizes)`` over every distinct group (sorted), and
    with ``positives=True`` also each group's number of positives;
    ``aucs`` is NaN for a group with a single class.  Scores become dense
    ranks and each sample the int64 key ``group * n_ranks + rank``, so the
    sorted negative keys of a group form one contiguous block: ``searchsorted``
    counts, for every positive, the negatives of its own group below / not
    above it (minus those of earlier groups).  Sums per group use bincount;
    there is no Python loop over groups.
    """
    y = _binary_labels(y_true)
    s = _scores(y_score, y.size)
    g = np.asarray(groups)
    if g.shape != (y.size,):
        raise ValueError(f"groups have shape {g.shape}, expected ({y.size},)")
    if y.size == 0:
        empty = (g[:0], np.zeros(0), np.zeros(0, dtype=np.int64))
        return (*empty, np.zeros(0, dtype=np.int64)) if positives else empty
    code, ids = _group_codes(g)
    n_codes = int(code.max()) + 1
    rank = _dense_rank(s)
    n_ranks = int(rank.max()) + 1
    if n_codes * n_ranks >= 2**62:
        raise ValueError("too many groups x distinct scores for an int64 key")
    key = code * n_ranks + rank
    neg = np.sort(key[~y])
    pos = np.sort(key[y])
    pos_code = pos // n_ranks
    base = np.searchsorted(neg, pos_code * n_ranks, "left")  # negatives of earlier groups
    twice = np.searchsorted(neg, pos, "left") + np.searchsorted(neg, pos, "right") - 2 * base
    g_twice = np.bincount(pos_code, weights=twice, minlength=n_codes).round().astype(np.int64)
    g_pos = np.bincount(pos_code, minlength=n_codes)
    g_size = np.bincount(code, minlength=n_codes)
    present = np.flatnonzero(g_size)
    g_twice, g_pos, g_size = g_twice[present], g_pos[present], g_size[present]
    denom = 2 * g_pos * (g_size - g_pos)
    aucs = np.full(present.size, np.nan)
    ok = denom > 0
    aucs[ok] = g_twice[ok] / denom[ok]
    gid = present.astype(g.dtype) if ids is None else ids[present]
    if positives:
        return gid, aucs, g_size.astype(np.int64), g_pos.astype(np.int64)
    return gid, aucs, g_size.astype(np.int64)


def gauc(y_true: Any, y_score: Any, groups: Any) -> GAUCResult:
    """Group AUC: per-group (usually per-user) AUC averaged over groups with both classes,
    under each of ``GAUC_WEIGHTINGS`` (see GAUCResult).

    Groups with a single class are skipped (their AUC is undefined); the result
    reports how many were kept.  All NaN if no group qualifies.
    """
    _, aucs, sizes, pos = group_auc(y_true, y_score, groups, positives=True)
    ok = ~np.isnan(aucs)
    kept = int(ok.sum())
    if kept == 0:
        return GAUCResult(float("nan"), float("nan"), 0, int(aucs.size), 0)
    w = sizes[ok].astype(np.float64)
    wp = pos[ok].astype(np.float64)
    return GAUCResult(
        weighted=float(np.dot(aucs[ok], w) / w.sum()),
        unweighted=float(aucs[ok].mean()),
        n_groups=kept,
        n_groups_total=int(aucs.size),
        n_samples=int(sizes[ok].sum()),
        positive_weighted=float(np.dot(aucs[ok], wp) / wp.sum()),
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


def gauc_units(y_true: Any, y_score: Any, groups: Any, weighting: str = "impressions"):
    """GAUC as a ratio over groups (users), for bootstrap intervals over users: a
    ``metrics.bootstrap.RatioUnits`` with num = AUC x weight, den = weight (0 for a group
    with a single class, which GAUC skips). Its point value is ``gauc(...).by(weighting)``."""
    from recharness.metrics.bootstrap import RatioUnits

    gid, aucs, sizes, pos = group_auc(y_true, y_score, groups, positives=True)
    ok = ~np.isnan(aucs)
    w = {"impressions": sizes, "positives": pos, "uniform": np.ones_like(sizes)}.get(weighting)
    if w is None:
        raise ValueError(f"unknown GAUC weighting {weighting!r}; one of {', '.join(GAUC_WEIGHTINGS)}")
    w = np.where(ok, w, 0).astype(np.float64)
    return RatioUnits(list(gid), np.where(ok, aucs, 0.0) * w, w, how=f"GAUC over users ({weighting})")
