"""Top-k ranking metrics for a batch of ranked lists (HR, precision, recall, NDCG, MRR).

Why this module exists: suites score hundreds of thousands of ranked lists
(one per user or per prompt), so every metric is computed in one numpy pass
over the *positions of the hits* instead of a Python loop per list and per k.
The only per-element Python work is the set-membership test that finds those
positions, and in the single-target (leave-one-out) case even that is one
``list.index`` call per list (C speed).

Conventions (the same for every function here):

* Relevance is binary; ranks are 1-based.
* ``k=None`` means "the whole list" (open-length lists, e.g. free-form LLM
  output).  Keys are then written without ``@k`` (``"ndcg"``, ``"hr"`` ...).
* A list shorter than ``k`` is treated as if padded with misses: precision@k
  still divides by ``k`` (the model was asked for ``k`` items); ``k`` larger
  than every list is therefore allowed and simply penalises short lists.
* precision with ``k=None`` divides by the list's own length; an empty list has
  precision 0 (not NaN), so a model that returns nothing is scored as wrong
  rather than dropped from the average.
* Duplicates inside one ranked list: only the first occurrence of an item can
  be a hit; later copies still occupy their slot but count as misses (they do
  not shift later items up).  Otherwise a model could inflate hits or DCG by
  repeating a relevant item.
* NDCG@k: gain 1 for a relevant item at rank ``r`` discounted by
  ``1 / log2(r + 1)``; IDCG places ``min(k, |relevant|)`` relevant items at the
  top (``k=None`` -> all ``|relevant|``), so it does not depend on how long the
  returned list is (a short list cannot "win" a smaller ideal).
* MRR is ``1 / rank`` of the first relevant item (0 if none).  ``mrr@k`` is 0
  when the first hit is below ``k``; ``"mrr"`` (no ``@``) always covers the
  whole list.
* Every sample needs at least one relevant item: recall and NDCG are undefined
  otherwise, so an empty relevant set raises ``ValueError`` (it signals a data
  bug, and silently dropping such rows would change the denominator).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

__all__ = [
    "rank_of_target",
    "ranking_metrics",
    "target_metrics",
    "METRIC_NAMES",
]

METRIC_NAMES = ("hr", "precision", "recall", "ndcg", "mrr")



def _is_single_item(rel: Any) -> bool:
    """A relevant "set" given as one bare item (str, bytes, int ...) rather than a collection."""
    if isinstance(rel, (str, bytes, int, float, np.generic)):
        return True
    return not isinstance(rel, Iterable)


def _key(name: str, k: int | None) -> str:
    return name if k is None else f"{name}@{k}"


def _check_ks(ks: Iterable[int | None]) -> list[int | None]:
    out: list[int | None] = []
    for k in ks:
        if k is not None and (not isinstance(k, (int, np.integer)) or k < 1):
            raise ValueError(f"every k must be a positive int or None, got {k!r}")
        out.append(None if k is None else int(k))
    if not out:
        raise ValueError("ks must not be empty")
    return out


def _index_or_zero(seq: list[Any] | tuple[Any, ...], target: Any) -> int:
    # "in" then "index" beats catching ValueError when most targets are absent.
    return seq.index(target) + 1 if target in seq else 0


def rank_of_target(ranked: Sequence[Sequence[Any]] | np.ndarray, targets: Sequence[Any] | np.ndarray) -> np.ndarray:
    """1-based rank of each target in its ranked list; 0 when the target is absent.

    ``ranked`` is either a sequence of lists (any lengths) or a 2-D numpy array
    (one row per sample, padded with a value that is never a target; with
    ``k=None`` the row width counts as the list length).  Only the
    first occurrence counts, so duplicates further down never matter.  For a 2-D
    array the search is a single vectorised comparison.
    """
    if isinstance(ranked, np.ndarray) and ranked.ndim == 2:
        t = np.asarray(targets)
        if t.shape != (ranked.shape[0],):
            raise ValueError(f"targets has shape {t.shape}, expected ({ranked.shape[0]},)")
        eq = ranked == t[:, None]
        found = eq.any(axis=1)
        return np.where(found, eq.argmax(axis=1) + 1, 0).astype(np.int64)
    n = len(ranked)
    if len(targets) != n:
        raise ValueError(f"{n} ranked lists but {len(targets)} targets")
    seqs = (r if isinstance(r, (list, tuple)) else list(r) for r in ranked)
    return np.fromiter(map(_index_or_zero, seqs, targets), dtype=np.int64, count=n)


def _lengths(ranked: Sequence[Sequence[Any]] | np.ndarray) -> np.ndarray:
    if isinstance(ranked, np.ndarray) and ranked.ndim == 2:
        return np.full(ranked.shape[0], ranked.shape[1], dtype=np.int64)
    return np.fromiter(map(len, ranked), dtype=np.int64, count=len(ranked))


def _finish(per: dict[str, np.ndarray], per_sample: bool) -> dict[str, Any]:
    if per_sample:
        return per
    return {name: float(v.mean()) if v.size else float("nan") for name, v in per.items()}


def target_metrics(
    ranked: Sequence[Sequence[Any]] | np.ndarray,
    targets: Sequence[Any] | np.ndarray,
    ks: Iterable[int | None] = (1, 5, 10),
    per_sample: bool = False,
) -> dict[str, Any]:
    """Leave-one-out metrics: exactly one relevant item per list.

    Everything follows from the target's rank ``r`` (0 = absent):
    HR@k = recall@k = [0 < r <= k], precision@k = HR@k / k,
    NDCG@k = HR@k / log2(r + 1) (IDCG is 1), MRR@k = HR@k / r.
    Returns means (or per-sample arrays with ``per_sample=True``) keyed
    ``"hr@10"``, ``"ndcg@10"``, ... plus ``"mrr"`` over the whole list.
    """
    ks = _check_ks(ks)
    rank = rank_of_target(ranked, targets)
    found = rank > 0
    safe = np.where(found, rank, 1).astype(np.float64)
    inv_rank = np.where(found, 1.0 / safe, 0.0)
    gain = np.where(found, 1.0 / np.log2(safe + 1.0), 0.0)
    lengths = _lengths(ranked) if None in ks else None
    per: dict[str, np.ndarray] = {}
    for k in ks:
        hit = found if k is None else (found & (rank <= k))
        hitf = hit.astype(np.float64)
        if k is None:
            prec = np.divide(hitf, lengths, out=np.zeros_like(hitf), where=lengths > 0)
        else:
            prec = hitf / k
        per[_key("hr", k)] = hitf
        per[_key("precision", k)] = prec
        per[_key("recall", k)] = hitf
        per[_key("ndcg", k)] = np.where(hit, gain, 0.0)
        per[_key("mrr", k)] = np.where(hit, inv_rank, 0.0)
    per["mrr"] = inv_rank
    return _finish(per, per_sample)


def _hit_positions(
    ranked: Sequence[Sequence[Any]] | np.ndarray, relevant: Sequence[Any]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row index and 0-based position of every first-occurrence hit, plus |relevant| per row.

    Rows come out in order and positions ascending within a row.
    """
    rows: list[int] = []
    pos: list[int] = []
    n_rel = np.empty(len(relevant), dtype=np.int64)
    for i, (lst, rel) in enumerate(zip(ranked, relevant)):
        if isinstance(rel, np.ndarray):
            rel = set(rel.tolist())
        elif _is_single_item(rel):
            rel = {rel}
        elif not isinstance(rel, (set, frozenset)):
            rel = set(rel)
        if not rel:
            raise ValueError(f"sample {i} has no relevant items; recall and NDCG are undefined")
        n_rel[i] = len(rel)
        if isinstance(lst, np.ndarray):
            lst = lst.tolist()
        hits = [j for j, x in enumerate(lst) if x in rel]
        if len(hits) > 1:
            seen: set[Any] = set()
            first = []
            for j in hits:
                x = lst[j]
                if x not in seen:
                    seen.add(x)
                    first.append(j)
            hits = first
        if hits:
            rows.extend([i] * len(hits))
            pos.extend(hits)
    return np.asarray(rows, dtype=np.int64), np.asarray(pos, dtype=np.int64), n_rel


def ranking_metrics(
    ranked_lists: Sequence[Sequence[Any]] | np.ndarray,
    relevant_sets: Sequence[Any],
    ks: Iterable[int | None] = (1, 5, 10),
    per_sample: bool = False,
) -> dict[str, Any]:
    """HR, precision, recall, NDCG and MRR at each k for a batch of ranked lists.

    ``relevant_sets[i]`` is a collection (set, list, tuple, array) of the items
    relevant to list ``i``, or a single bare item (str, int ...) meaning ``{item}``.
    If every entry is a bare item the leave-one-out fast path :func:`target_metrics` is used, which gives the
    same numbers.  ``k=None`` in ``ks`` scores the whole list (see the module
    docstring for precision on open-length lists).  Returns the mean of each
    metric, or with ``per_sample=True`` a dict of per-sample float arrays so
    callers can average per group.  Keys: ``"hr@k"``, ``"precision@k"``,
    ``"recall@k"``, ``"ndcg@k"``, ``"mrr@k"`` for each k and ``"mrr"``.
    """
    ks = _check_ks(ks)
    n = len(ranked_lists)
    if len(relevant_sets) != n:
        raise ValueError(f"{n} ranked lists but {len(relevant_sets)} relevant sets")
    if (isinstance(relevant_sets, np.ndarray) and relevant_sets.ndim == 1 and relevant_sets.dtype != object) or all(
        map(_is_single_item, relevant_sets)
    ):
        return target_metrics(ranked_lists, relevant_sets, ks, per_sample)

    rows, pos, n_rel = _hit_positions(ranked_lists, relevant_sets)
    lengths = _lengths(ranked_lists)
    max_ideal = int(n_rel.max()) if n else 0
    # discount[j] for 0-based position j; ideal_dcg[m] = DCG of m hits at the top.
    disc = 1.0 / np.log2(np.arange(2, max(int(pos.max()) + 1 if pos.size else 0, max_ideal) + 2, dtype=np.float64))
    ideal_dcg = np.concatenate(([0.0], np.cumsum(disc[:max_ideal])))
    hit_disc = disc[pos] if pos.size else np.zeros(0)

    # First hit per row: rows are grouped and positions ascend, so it is the first entry of each run.
    first_rank = np.zeros(n, dtype=np.int64)
    if rows.size:
        starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
        first_rank[rows[starts]] = pos[starts] + 1
    found = first_rank > 0
    inv_first = np.where(found, 1.0 / np.where(found, first_rank, 1), 0.0)

    per: dict[str, np.ndarray] = {}
    for k in ks:
        if k is None:
            sel_rows, sel_disc = rows, hit_disc
            ideal = ideal_dcg[n_rel]
        else:
            m = pos < k
            sel_rows, sel_disc = rows[m], hit_disc[m]
            ideal = ideal_dcg[np.minimum(n_rel, k)]
        n_hits = np.bincount(sel_rows, minlength=n).astype(np.float64)
        dcg = np.bincount(sel_rows, weights=sel_disc, minlength=n)
        if k is None:
            prec = np.divide(n_hits, lengths, out=np.zeros(n), where=lengths > 0)
            first_in = found
        else:
            prec = n_hits / k
            first_in = found & (first_rank <= k)
        per[_key("hr", k)] = (n_hits > 0).astype(np.float64)
        per[_key("precision", k)] = prec
        per[_key("recall", k)] = n_hits / n_rel
        per[_key("ndcg", k)] = dcg / ideal
        per[_key("mrr", k)] = np.where(first_in, inv_first, 0.0)
    per["mrr"] = inv_first
    return _finish(per, per_sample)
