"""Full-catalog ranking: the target's rank among every item, and the metrics read from that rank.

Next-item tasks scored without sampled candidates (RecBench list-wise) rank the whole catalog: a
model scores every item, the items the user already had are taken out the same way for every
method, and the held-out target's 1-based rank decides HR@k, NDCG@k, Recall@k and MRR. Scoring
from the rank is exact (MRR is the true reciprocal rank over the full ranking, not a top-k cut)
and vectorised: one comparison of the target's score with the row's scores, no sort.

Conventions (the same for every function here):

* Ranks are 1-based. A target that is not ranked at all (an LLM that never named it) has rank
  ``inf``; `rank_metrics` also reads 0, a negative number or NaN as "not ranked" (as
  `metrics.ranking.rank_of_target` writes 0), contributing 0 to every metric.
* Ties: an item beats the target when its score is higher, or equal and its catalog index is lower,
  i.e. the target's place in a stable sort by descending score. Deterministic, and the rank
  ``np.argsort(-scores, kind="stable")`` gives; `-inf` scores take part like any other value. A NaN
  score is below every number; a target whose own score is NaN loses every tie (ranks last among
  the NaN and -inf items), so a model that scores nothing never hits by catalog order.
* Exclusions (the user's history) remove items from the ranking before the target is placed; the
  target itself is never excluded, and an item listed twice is removed once.
* One target per row, so Recall@k equals HR@k; both are reported under their usual names.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

__all__ = ["pad_exclusions", "rank_metrics", "target_ranks"]


def pad_exclusions(exclude: Sequence[Sequence[int]] | np.ndarray, rows: int) -> np.ndarray:
    """A (rows, width) int64 matrix of item indices from ragged lists, padded with -1."""
    if isinstance(exclude, np.ndarray) and exclude.ndim == 2:
        if exclude.shape[0] != rows:
            raise ValueError(f"{rows} score rows but {exclude.shape[0]} exclusion rows")
        return exclude.astype(np.int64, copy=False)
    if len(exclude) != rows:
        raise ValueError(f"{rows} score rows but {len(exclude)} exclusion lists")
    width = max((len(e) for e in exclude), default=0)
    out = np.full((rows, width), -1, dtype=np.int64)
    for r, e in enumerate(exclude):
        out[r, : len(e)] = e
    return out


def target_ranks(scores: np.ndarray, targets: Sequence[int] | np.ndarray,
                 exclude: Sequence[Sequence[int]] | np.ndarray | None = None) -> np.ndarray:
    """The 1-based rank of each row's target among all items (columns), excluded items removed.

    scores: (rows, items) float; targets: (rows,) column index of each row's target; exclude: per
    row the column indices to take out (ragged lists, or a matrix padded with negative numbers).
    Returns int64 ranks in [1, items]. See the module docstring for ties and exclusions.
    """
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 2:
        raise ValueError(f"scores must be a (rows, items) matrix, got shape {scores.shape}")
    rows, n_items = scores.shape
    targets = np.asarray(targets, dtype=np.int64)
    if targets.shape != (rows,):
        raise ValueError(f"{rows} score rows but {targets.shape[0] if targets.ndim else 0} targets")
    if rows and (targets.min() < 0 or targets.max() >= n_items):
        raise ValueError(f"a target index is outside the {n_items} items")
    t_score = scores[np.arange(rows), targets][:, None]
    cols = np.arange(n_items)[None, :]
    # a NaN compares False with everything, so a NaN item never beats a scored target (NaN is below every
    # number, -inf included); a target without a score (NaN) is beaten by every other item (it loses every
    # tie, with the NaN and -inf items too), so a model that scored nothing (all NaN, a diverged net) ranks
    # its target last, not at its catalog index
    t_nan = np.isnan(t_score)
    beats = np.where(t_nan, cols != targets[:, None],
                     (scores > t_score) | ((scores == t_score) & (cols < targets[:, None])))
    count = beats.sum(axis=1)
    if exclude is not None:
        ex = pad_exclusions(exclude, rows)
        if ex.size:
            if ex.max(initial=-1) >= n_items:
                raise ValueError(f"an excluded index is outside the {n_items} items")
            ex = np.sort(np.where((ex >= 0) & (ex != targets[:, None]), ex, -1), axis=1)
            keep = ex >= 0
            keep[:, 1:] &= ex[:, 1:] != ex[:, :-1]  # an item listed twice is removed once
            removed = np.take_along_axis(beats, np.where(keep, ex, 0), axis=1) & keep
            count = count - removed.sum(axis=1)
    return count.astype(np.int64) + 1


def rank_metrics(ranks: Iterable[float] | np.ndarray, ks: Iterable[int] = (5, 10, 20),
                 per_sample: bool = False) -> dict[str, float | np.ndarray]:
    """HR@k, Recall@k, NDCG@k for each k and MRR from each sample's target rank.

    Keys ``"hr@k"``, ``"recall@k"``, ``"ndcg@k"``, ``"mrr"``: the means, or with ``per_sample=True``
    per-sample float arrays. NDCG@k is ``1 / log2(rank + 1)`` for a rank within k (one relevant
    item, so the ideal DCG is 1), MRR ``1 / rank`` over the whole ranking; an unranked target
    (inf, 0, negative, NaN) scores 0 everywhere. An empty input gives NaN means.
    """
    ks = list(ks)
    if not ks or any(not isinstance(k, (int, np.integer)) or k < 1 for k in ks):
        raise ValueError(f"ks must be positive ints, got {ks!r}")
    r = np.asarray(ranks, dtype=np.float64).reshape(-1)
    found = np.isfinite(r) & (r >= 1)
    safe = np.where(found, r, 1.0)
    per: dict[str, np.ndarray] = {}
    for k in ks:
        hit = found & (safe <= k)
        per[f"hr@{k}"] = hit.astype(np.float64)
        per[f"recall@{k}"] = per[f"hr@{k}"]
        per[f"ndcg@{k}"] = np.where(hit, 1.0 / np.log2(safe + 1.0), 0.0)
    per["mrr"] = np.where(found, 1.0 / safe, 0.0)
    if per_sample:
        return dict(per)
    return {key: float(v.mean()) if v.size else float("nan") for key, v in per.items()}
