"""Bootstrap confidence intervals and paired tests over evaluation units, vectorised.

Every metric in a score table is a function of *evaluation units*: samples for HR@k or AUC,
users for GAUC, groups for PerRecBench's tau. Resampling the units with replacement is the same
as giving each unit an integer weight (its multinomial count), so one resample of every metric
here is a weighted sum over units, and `resamples` resamples are one (resamples x units) count
matrix, drawn in chunks: no Python loop over resamples or units, and no re-scoring.

A metric's units say how it aggregates:

``RatioUnits``   ``sum(w * num) / sum(w * den)``, optionally per group and then averaged over the
                 groups, optionally square-rooted. A mean of per-sample values (HR, NDCG, MRR, P,
                 R, FTR, MAE, log loss, invalid rates: ``den = 1``), a mean over a subset
                 (``den`` = membership: CMR over queries that recommended something, RMSE over
                 valid answers), a pooled ratio (matched_share), GAUC over users (``num`` =
                 per-user AUC times the user's weight, ``den`` = the weight: impressions,
                 positives (RecBole) or 1), PerRecBench tau (per-level means of per-group tau,
                 averaged over levels: ``groups``), RMSE (``sqrt`` of a mean of squared errors).
``AUCUnits``     AUC of (score, label) samples. The samples are sorted once; under count weights
                 the won pairs of every resample are cumulative sums over that one order,
                 O(resamples x n) in all.
``BLEUUnits``    corpus BLEU. Not a mean of sentence scores, but a function of sums of
                 per-sentence statistics (sacrebleu's hypothesis/reference lengths and n-gram
                 matches/totals), so resampling sentences resamples those sums exactly.

Conventions: seeded numpy ``default_rng``; the counts depend only on (seed, number of units,
strata, clusters), so two methods scored on the same units get the same resamples and their
replicates are *paired*; 95% percentile intervals (``numpy.percentile``, as
``scipy.stats.bootstrap(..., method="percentile")``); resamples where a metric is undefined
(e.g. no positive drawn, or no unit of one of the groups a grouped mean averages) are left out of
its interval and counted (the interval's ``resamples`` is the number kept).

The independent unit is resampled, never a part of one: with ``clusters`` (per unit, e.g. the
user of each CTR pair, the query of RecBench+'s with/without-history pair) whole clusters are
drawn and every unit of a drawn cluster carries its count (a cluster bootstrap), so correlated
samples of one user move together. With ``strata`` the independent units are resampled within
each stratum (PerRecBench: within each difficulty level, whose size the design fixes); a stratum
of fewer than ``MIN_UNITS`` independent units is pooled with the other small ones (and, if still
too small, with the smallest large one) rather than resampled alone, and a metric resting on
fewer than ``MIN_UNITS`` independent units in all gets no interval ("n too small"): a bootstrap
of 1 to 4 units claims a certainty the data does not have. A pooled level can then be drawn zero
times; a mean over groups (``RatioUnits(groups=...)``, PerRecBench's mean over levels) is undefined
in such a resample rather than a mean over fewer groups, so an interval never mixes quantities.

Paired comparisons of two methods A and B on the same units:

* bootstrap: the difference of the two methods' replicates under the same counts; its
  percentile interval, and the two-sided p-value that inverts it,
  ``p = min(1, 2 * min(P(d* <= 0), P(d* >= 0)))`` (the smallest level at which the interval
  excludes 0);
* permutation: under "no difference", each unit's two answers are exchangeable; swap them on a
  random subset of units (``scipy.stats.permutation_test(..., permutation_type="samples")``),
  or on every subset when there are at most `permutations` of them (exact test). p-values as
  scipy computes them: ``(hits + 1) / (permutations + 1)`` when random, ``hits / 2**n`` when
  exact, two-sided ``min(1, 2 * min(p_less, p_greater))``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from recharness.core.types import is_number  # noqa: F401 - read from here by the runner and report

__all__ = [
    "AUCUnits", "BLEUUnits", "DEFAULT_RESAMPLES", "EXACT_MAX_COSTLY_UNITS", "EXACT_MAX_UNITS", "MIN_UNITS",
    "RatioUnits", "Units",
    "bleu_from_stats", "bleu_units", "cluster_codes", "pooled_strata",
    "bootstrap_p", "generic_replicates", "mean_units", "paired_bootstrap", "paired_permutation",
    "percentile_ci", "resample_counts", "swap_masks", "weighted_auc",
]

DEFAULT_RESAMPLES = 1000
ALPHA = 0.05
#: fewest independent units (overall, and per stratum before small strata are pooled) a bootstrap rests on
MIN_UNITS = 5
#: up to this many independent units the paired permutation test is exact (all 2**n sign flips)
EXACT_MAX_UNITS = 20
#: the same for units whose every flip costs a row of Python work (AUC's, ~15 µs: 2**16 flips about 1 s a
#: comparison, 2**20 took 16 s, one per row of a table); past it, exact only when 2**n <= the permutations asked
EXACT_MAX_COSTLY_UNITS = 16
#: entries of one chunk of the (resamples x units) count matrix
_CHUNK_ENTRIES = 2_000_000


# ------------------------------------------------------------------ resampling weights


def _chunk_rows(n: int) -> int:
    """Rows per chunk: a function of n only, so the stream of counts is the same for any `resamples`."""
    return max(1, _CHUNK_ENTRIES // max(n, 1))


def cluster_codes(clusters) -> tuple[np.ndarray, int]:
    """(each unit's cluster as 0..C-1 in order of first appearance, C)."""
    c = np.asarray(clusters)
    _, first, inv = np.unique(c, return_index=True, return_inverse=True)
    order = np.argsort(np.argsort(first))  # codes by first appearance: stable whatever the labels are
    codes = order[inv.reshape(-1)]
    return codes, int(codes.max()) + 1 if codes.size else 0


def pooled_strata(strata: np.ndarray, min_size: int = MIN_UNITS) -> np.ndarray:
    """Strata with fewer than `min_size` members pooled: the small ones together, and that pool, if
    still small, with the smallest large stratum; a single unit is never a stratum of its own."""
    s = np.asarray(strata).astype(str)
    labels, counts = np.unique(s, return_counts=True)
    small = {lab for lab, c in zip(labels, counts) if c < min_size}
    if not small:
        return s
    out = np.where(np.isin(s, list(small)), "\x00pooled", s)
    pooled = int(np.sum(out == "\x00pooled"))
    big = [(c, lab) for lab, c in zip(labels, counts) if lab not in small]
    if pooled < min_size and big:
        out = np.where(out == "\x00pooled", min(big)[1], out)
    return out


def resample_counts(n: int, resamples: int, seed: int = 0, strata: np.ndarray | None = None,
                    clusters: np.ndarray | None = None) -> Iterator[np.ndarray]:
    """Multinomial counts of `n` units in `resamples` resamples, as (rows, n) float64 chunks.

    Each row sums to n (to each stratum's size within it, with `strata`). Without `strata` the
    first k rows are the same whatever `resamples` is, so a shorter run is a prefix of a longer
    one; with `strata` each block draws one stratum after another, so a run of another length is
    another stream (nothing pairs stratified runs of different lengths; keeping the published
    default stream came first). With
    `clusters` the clusters are drawn (within strata, a cluster taking its first unit's
    stratum) and each unit gets its cluster's count. Strata smaller than MIN_UNITS are pooled.
    """
    if clusters is not None:
        codes, c = cluster_codes(clusters)
        cstrata = None
        if strata is not None:
            # each cluster's first unit (`np.unique` guarantees the first index; an assignment through repeated
            # indices would leave which write stands to numpy's unspecified order)
            _, first = np.unique(codes, return_index=True)
            cstrata = np.asarray(strata)[first]
        for w in resample_counts(c, resamples, seed, cstrata):
            yield w[:, codes]
        return
    if strata is not None:
        strata = pooled_strata(strata)
    rng = np.random.default_rng(seed)
    step = _chunk_rows(n)
    members = None
    if strata is not None:
        codes = np.unique(np.asarray(strata), return_inverse=True)[1].reshape(-1)
        members = [np.flatnonzero(codes == c) for c in range(int(codes.max()) + 1 if codes.size else 0)]
    done = 0
    while done < resamples:
        rows = min(step, resamples - done)
        if n == 0:
            yield np.zeros((rows, 0))
        else:
            if members is None:
                draws = rng.integers(0, n, size=(rows, n))
            else:
                draws = np.concatenate([m[rng.integers(0, m.size, size=(rows, m.size))] for m in members], axis=1)
            counts = np.empty((rows, n))
            for r in range(rows):  # per row: a cache-sized bincount beats one over the whole chunk
                counts[r] = np.bincount(draws[r], minlength=n)
            yield counts
        done += rows


def swap_masks(n: int, permutations: int, seed: int = 0, *, exact_ok: bool = True
               ) -> tuple[Iterator[np.ndarray], bool, int]:
    """Which units swap their two answers, as (rows, n) bool chunks; (chunks, exact, count).

    Exact (every one of the 2**n subsets, identity included) when n <= EXACT_MAX_UNITS or 2**n <=
    permutations, as scipy does with n_resamples=inf; else (or with `exact_ok=False`: a caller that cannot
    afford them all, never a first part of them, which would not be a sample of the null) `permutations` random
    subsets, each unit swapped with probability 1/2.
    """
    if exact_ok and n < 63 and (n <= EXACT_MAX_UNITS or 2**n <= permutations):
        total = 2**n
        bits = np.arange(n, dtype=np.int64)

        def exact() -> Iterator[np.ndarray]:
            step = max(1, _CHUNK_ENTRIES // max(n, 1))
            for start in range(0, total, step):
                codes = np.arange(start, min(total, start + step), dtype=np.int64)
                yield ((codes[:, None] >> bits) & 1).astype(bool)

        return exact(), True, total
    rng = np.random.default_rng(seed)

    def random() -> Iterator[np.ndarray]:
        step = _chunk_rows(n)
        done = 0
        while done < permutations:
            rows = min(step, permutations - done)
            yield rng.random((rows, n)) < 0.5
            done += rows

    return random(), False, permutations


# ------------------------------------------------------------------ intervals and p-values


def percentile_ci(reps: np.ndarray, alpha: float = ALPHA) -> tuple[float, float] | None:
    """The (alpha/2, 1 - alpha/2) percentiles of the finite replicates; None if fewer than half are finite."""
    r = np.asarray(reps, dtype=np.float64)
    ok = r[np.isfinite(r)]
    if ok.size == 0 or ok.size < 0.5 * r.size:
        return None
    lo, hi = np.percentile(ok, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    return float(lo), float(hi)


def bootstrap_p(diff_reps: np.ndarray) -> float:
    """Two-sided p-value of "difference 0" from paired bootstrap differences: the smallest level at
    which the percentile interval excludes 0, ``min(1, 2 * min(P(d <= 0), P(d >= 0)))``."""
    d = np.asarray(diff_reps, dtype=np.float64)
    d = d[np.isfinite(d)]
    if d.size == 0:
        return float("nan")
    return float(min(1.0, 2.0 * min(np.mean(d <= 0), np.mean(d >= 0))))


def permutation_p(null: np.ndarray, observed: float, exact: bool) -> float:
    """scipy.stats.permutation_test's two-sided p-value (its tolerance for float ties, its +1 when random)."""
    null = null[np.isfinite(null)]
    if null.size == 0 or not np.isfinite(observed):
        return float("nan")
    # scipy's relative tolerance (100 float64 eps, 2.2e-14): a null value equal in theory but not in its last bits
    # counts as a tie
    gamma = abs(100 * np.finfo(np.float64).eps * observed)
    adj = 0 if exact else 1
    less = (np.sum(null <= observed + gamma) + adj) / (null.size + adj)
    greater = (np.sum(null >= observed - gamma) + adj) / (null.size + adj)
    return float(min(1.0, 2.0 * min(less, greater)))


# ------------------------------------------------------------------ units


class Units:
    """The evaluation units of one metric for one method, and how the metric aggregates them.

    `ids` name the units (sample ids, user ids, group ids) so two methods' units can be checked
    to line up; `strata` (optional, per unit) resamples within each stratum.
    """

    ids: Sequence[Any]
    strata: np.ndarray | None = None
    #: the independent unit of each unit (a user, a query), resampled whole; None: every unit is one
    clusters: np.ndarray | None = None
    #: how the metric aggregates, shown in notes ("mean", "AUC", "corpus BLEU", ...)
    how: str = ""
    #: each sign flip of `swapped` costs a row of Python work (AUC): the paired test is exact up to
    #: EXACT_MAX_COSTLY_UNITS units
    costly_flips = False

    @property
    def n(self) -> int:
        return len(self.ids)

    @property
    def independent(self) -> int:
        """How many independent units there are (clusters, or units)."""
        return cluster_codes(self.clusters)[1] if self.clusters is not None else self.n

    def independent_support(self) -> int:
        """How many independent units carry the metric (below MIN_UNITS: no interval)."""
        if self.clusters is None:
            return self.support()
        carrying = self._carrying()
        return int(np.unique(np.asarray(self.clusters)[carrying]).size) if carrying.any() else 0

    def _carrying(self) -> np.ndarray:
        return np.ones(self.n, dtype=bool)

    def counts(self, resamples: int, seed: int = 0) -> Iterator[np.ndarray]:
        """This metric's resampling weights (its strata and clusters)."""
        return resample_counts(self.n, resamples, seed, self.strata, self.clusters)

    def point(self) -> float:
        return float(self.replicates(np.ones((1, self.n)))[0])

    def support(self) -> int:
        """How many units carry the metric: below 2 a bootstrap interval has zero width by construction."""
        return self.n

    def subset(self) -> bytes | None:
        """Which units the metric is over when that is a part of them (a mean over each method's own valid
        answers), else None: two methods whose subsets differ are not scored on the same samples."""
        return None

    def replicates(self, counts: np.ndarray) -> np.ndarray:
        """The metric under each row of unit weights (rows, n) → (rows,)."""
        raise NotImplementedError

    def swapped(self, other: "Units", swap: np.ndarray) -> np.ndarray:
        """self's metric minus other's when the units in each row of `swap` (rows, n) exchange answers."""
        raise NotImplementedError

    def key(self) -> tuple:
        """Units with the same key are resampled identically (same ids, same strata)."""
        ids = hash(tuple(map(str, self.ids)))
        st = None if self.strata is None else hash(np.asarray(self.strata).astype(str).tobytes())
        cl = None if self.clusters is None else hash(np.asarray(self.clusters).astype(str).tobytes())
        return (self.n, ids, st, cl)


@dataclass(eq=False)
class RatioUnits(Units):
    """``transform(sum(w * num) / sum(w * den))``; with `groups`, that ratio per group label,
    then the plain mean over groups where it is defined (den > 0).

    With `groups`, a resample is undefined (NaN: left out of the interval and counted, as any
    undefined resample) when a group that carries the point value (den > 0) has no weight in it: a
    mean over fewer groups is another quantity (PerRecBench tau_rank over 2 levels instead of 3), and
    mixing it in would move the interval (a small level pooled with another stratum can be drawn
    zero times). Keeping the pooling and dropping such resamples, rather than resampling a small
    group's stratum within itself, keeps the variability of the few units a small group rests on; with
    more than half the resamples undefined there is no interval (`percentile_ci`).
    """

    ids: Sequence[Any]
    num: np.ndarray
    den: np.ndarray | None = None
    groups: np.ndarray | None = None
    transform: str | None = None  # None or "sqrt"
    strata: np.ndarray | None = None
    how: str = "mean"
    clusters: np.ndarray | None = None
    _g: np.ndarray | None = field(default=None, init=False, repr=False)
    _live: np.ndarray | None = field(default=None, init=False, repr=False)

    def __post_init__(self):
        self.num = np.asarray(self.num, dtype=np.float64).reshape(-1)
        self.den = np.ones_like(self.num) if self.den is None else np.asarray(self.den, dtype=np.float64).reshape(-1)
        if not (self.num.size == self.den.size == len(self.ids)):
            raise ValueError(f"{len(self.ids)} units but {self.num.size} numerators and {self.den.size} denominators")
        if not (np.isfinite(self.num).all() and np.isfinite(self.den).all()):
            raise ValueError("unit values must be finite (put undefined units in den = 0)")
        if self.groups is not None:
            codes = np.unique(np.asarray(self.groups), return_inverse=True)[1].reshape(-1)
            k = int(codes.max()) + 1 if codes.size else 0
            g = np.zeros((codes.size, k))
            g[np.arange(codes.size), codes] = 1.0
            self._g = g
            self._live = (self.den @ g) > 0  # the groups the point value averages over
        if self.transform not in (None, "sqrt"):
            raise ValueError(f"unknown transform {self.transform!r}")

    def _stat(self, num_sums: np.ndarray, den_sums: np.ndarray, all_groups: bool = False) -> np.ndarray:
        """The statistic per row of sums; `all_groups`: NaN unless every group of the point value is defined."""
        with np.errstate(invalid="ignore", divide="ignore"):
            r = np.where(den_sums > 0, num_sums / np.where(den_sums > 0, den_sums, 1.0), np.nan)
        if self._g is not None:
            ok = np.isfinite(r)
            cnt = ok.sum(axis=1)
            mean = np.where(cnt > 0, np.where(ok, r, 0.0).sum(axis=1) / np.maximum(cnt, 1), np.nan)
            r = np.where(ok[:, self._live].all(axis=1), mean, np.nan) if all_groups else mean
        return np.sqrt(r) if self.transform == "sqrt" else r

    def _sums(self, w: np.ndarray, num: np.ndarray, den: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self._g is None:
            return w @ num, w @ den
        return w @ (num[:, None] * self._g), w @ (den[:, None] * self._g)

    def support(self) -> int:
        return int(np.count_nonzero(self.den > 0))

    def _carrying(self) -> np.ndarray:
        return self.den > 0

    def subset(self) -> bytes | None:
        # the denominators themselves, not only where they are > 0: a pooled mean (PerRecBench MAE over the users
        # each group's answer rated) rests on other units when the counts differ, even where both are > 0
        return None if (self.den == 1).all() else self.den.tobytes() + self.n.to_bytes(8, "little")

    def point(self) -> float:
        ns, ds = self._sums(np.ones((1, self.n)), self.num, self.den)
        return float(self._stat(ns, ds)[0])

    def replicates(self, counts: np.ndarray) -> np.ndarray:
        return self._stat(*self._sums(counts, self.num, self.den), all_groups=True)

    def swapped(self, other: "Units", swap: np.ndarray) -> np.ndarray:
        o = _same(self, other)
        s = swap.astype(np.float64)
        base = np.ones((1, self.n))
        a_n, a_d = self._sums(base, self.num, self.den)
        b_n, b_d = self._sums(base, o.num, o.den)
        dn, dd = self._sums(s, o.num - self.num, o.den - self.den)
        return self._stat(a_n + dn, a_d + dd) - self._stat(b_n - dn, b_d - dd)


def mean_units(ids: Sequence[Any], values, defined=None, *, groups=None, strata=None, clusters=None,
               how: str = "mean") -> RatioUnits:
    """The mean of per-unit `values` over the units where `defined` (default: all)."""
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    if defined is None:
        return RatioUnits(ids, v, None, groups=groups, strata=strata, how=how, clusters=clusters)
    d = np.asarray(defined, dtype=bool).reshape(-1)
    return RatioUnits(ids, np.where(d, v, 0.0), d.astype(np.float64), groups=groups, strata=strata, how=how,
                      clusters=clusters)


def _auc_blocks(scores: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, int]:
    """Each unit's column among 2K: its score block k (equal scores, ascending) among the positives'
    K columns, or K + k among the negatives'; and K."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=bool)
    uniq, block = np.unique(s, return_inverse=True)
    k = uniq.size
    return block.reshape(-1) + np.where(y, 0, k), k


def _auc_from_blocks(sums: np.ndarray, k: int) -> np.ndarray:
    """AUC per row from the positive and negative weight of each score block (ascending)."""
    posw, negw = sums[:, :k], sums[:, k:]
    below = np.cumsum(negw, axis=1) - negw
    won = (posw * (below + 0.5 * negw)).sum(axis=1)
    pairs = posw.sum(axis=1) * negw.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(pairs > 0, won / np.where(pairs > 0, pairs, 1.0), np.nan)


def weighted_auc(scores: np.ndarray, labels: np.ndarray, counts: np.ndarray, _blocks=None) -> np.ndarray:
    """AUC (ties count one half) of the samples weighted by each row of `counts` (rows, n).

    Samples with equal scores form blocks (one sort, done once); the weights of each row summed per
    block and class are one weighted bincount, and the won pairs are sum over blocks of (positive
    weight) x (negative weight in lower blocks + half the block's): O(rows x n) in all.
    """
    col, k = _blocks or _auc_blocks(scores, labels)
    counts = np.atleast_2d(np.asarray(counts, dtype=np.float64))
    sums = np.empty((counts.shape[0], 2 * k))
    for r in range(counts.shape[0]):  # a weighted bincount per row: faster than a sparse product here
        sums[r] = np.bincount(col, weights=counts[r], minlength=2 * k)
    return _auc_from_blocks(sums, k)


def _auc_rows(codes: np.ndarray, labels: np.ndarray, k: int) -> np.ndarray:
    """AUC of each row of a (rows, n) matrix of dense score ranks (0..k-1, shared by all rows: the
    ranks of both methods' scores pooled) against one label vector; ties count one half. Per row a
    histogram of the negatives' ranks and its cumulative sum: O(n + k), no sort."""
    y = np.asarray(labels, dtype=bool)
    p, q = int(y.sum()), int((~y).sum())
    if p == 0 or q == 0:
        return np.full(codes.shape[0], np.nan)
    neg, pos = codes[:, ~y], codes[:, y]
    out = np.empty(codes.shape[0])
    for r in range(codes.shape[0]):
        h = np.bincount(neg[r], minlength=k)
        below = np.cumsum(h) - h
        out[r] = (2 * int(below[pos[r]].sum()) + int(h[pos[r]].sum())) / (2 * p * q)
    return out


@dataclass(eq=False)
class AUCUnits(Units):
    """AUC over samples: one score and one 0/1 label per unit."""

    costly_flips = True
    ids: Sequence[Any]
    scores: np.ndarray
    labels: np.ndarray
    strata: np.ndarray | None = None
    how: str = "AUC"
    clusters: np.ndarray | None = None
    _blocks: Any = field(default=None, init=False, repr=False)
    _pooled: Any = field(default=None, init=False, repr=False)

    def __post_init__(self):
        self.scores = np.asarray(self.scores, dtype=np.float64).reshape(-1)
        self.labels = np.asarray(self.labels).astype(bool).reshape(-1)
        if not (self.scores.size == self.labels.size == len(self.ids)):
            raise ValueError("AUCUnits: ids, scores and labels differ in length")

    def replicates(self, counts: np.ndarray) -> np.ndarray:
        if self._blocks is None:
            self._blocks = _auc_blocks(self.scores, self.labels)
        return weighted_auc(self.scores, self.labels, counts, self._blocks)

    def swapped(self, other: "Units", swap: np.ndarray) -> np.ndarray:
        o = _same(self, other)
        if not np.array_equal(self.labels, o.labels):
            raise ValueError("AUC units of the two methods have different labels")
        if self._pooled is None or self._pooled[0] is not o:
            # each method's scores as its own percentile ranks (mid-ranks / n) before they are swapped: AUC is
            # invariant to a monotone transform, so each side's AUC is unchanged, and a swapped sample keeps its
            # place in the order instead of bringing a score of another scale (a probability among mean ratings)
            # — raw scores would make every permuted list noisier than either method and the test lose power
            from scipy.stats import rankdata

            mine, theirs = rankdata(self.scores) / self.n, rankdata(o.scores) / o.n
            codes = np.unique(np.concatenate([mine, theirs]), return_inverse=True)[1].reshape(-1)
            self._pooled = (o, codes[: self.n], codes[self.n:], int(codes.max()) + 1 if codes.size else 0)
        _, ca, cb, k = self._pooled
        a = np.where(swap, cb, ca)
        b = np.where(swap, ca, cb)
        return _auc_rows(a, self.labels, k) - _auc_rows(b, self.labels, k)


def bleu_from_stats(sums: np.ndarray, max_order: int) -> np.ndarray:
    """sacrebleu's corpus BLEU (``smooth_method="exp"``, no effective order: its corpus defaults)
    from summed statistics, one row per resample: columns hyp_len, ref_len, correct_1..N, total_1..N."""
    sums = np.atleast_2d(np.asarray(sums, dtype=np.float64))
    n = max_order
    sys_len, ref_len = sums[:, 0], sums[:, 1]
    correct, total = sums[:, 2:2 + n], sums[:, 2 + n:2 + 2 * n]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        bp = np.where(sys_len < ref_len, np.where(sys_len > 0, np.exp(1 - ref_len / np.where(sys_len > 0, sys_len, 1)),
                                                  0.0), 1.0)
        live = np.cumprod(total > 0, axis=1).astype(bool)  # sacrebleu stops at the first order with no n-grams
        zero = (correct == 0) & live
        doublings = np.cumsum(zero, axis=1)
        safe_total = np.where(total > 0, total, 1.0)
        prec = np.where(correct > 0, 100.0 * correct / safe_total, 100.0 / (2.0 ** doublings * safe_total))
        prec = np.where(live, prec, 0.0)
        logs = np.where(prec > 0, np.log(np.where(prec > 0, prec, 1.0)), -9999999999.0)
        acc = np.zeros(sums.shape[0])
        for k in range(n):  # in order, as sacrebleu's sum()
            acc = acc + logs[:, k]
        score = bp * np.exp(acc / n)
    return np.where((correct > 0).any(axis=1), score, 0.0)


@dataclass(eq=False)
class BLEUUnits(Units):
    """Corpus BLEU over sentences: `stats` (n, 2 + 2N) per-sentence sufficient statistics."""

    ids: Sequence[Any]
    stats: np.ndarray
    max_order: int = 4
    strata: np.ndarray | None = None
    how: str = "corpus BLEU (sentence statistics resampled)"
    clusters: np.ndarray | None = None

    def __post_init__(self):
        self.stats = np.asarray(self.stats, dtype=np.float64).reshape(len(self.ids), 2 + 2 * self.max_order)

    def replicates(self, counts: np.ndarray) -> np.ndarray:
        return bleu_from_stats(counts @ self.stats, self.max_order)

    def swapped(self, other: "Units", swap: np.ndarray) -> np.ndarray:
        o = _same(self, other)
        a, b = self.stats.sum(axis=0), o.stats.sum(axis=0)
        d = swap.astype(np.float64) @ (o.stats - self.stats)
        return bleu_from_stats(a + d, self.max_order) - bleu_from_stats(b - d, self.max_order)


def bleu_units(ids: Sequence[Any], hypotheses: Sequence[str], references: Sequence[str], max_order: int = 4,
               lowercase: bool = False) -> BLEUUnits:
    """Per-sentence statistics of sacrebleu's corpus BLEU (one reference per sentence)."""
    from sacrebleu.metrics import BLEU

    metric = BLEU(max_ngram_order=max_order, lowercase=lowercase)
    stats = metric._extract_corpus_statistics(list(hypotheses), [list(references)]) if len(hypotheses) else []
    arr = np.asarray(stats, dtype=np.float64).reshape(len(hypotheses), 2 + 2 * max_order)
    return BLEUUnits(ids, arr, max_order)


def _same(a: Units, b: Units):
    if (a.clusters is None) != (b.clusters is None) or (
            a.clusters is not None and list(map(str, a.clusters)) != list(map(str, b.clusters))):
        raise ValueError("the two methods' units are clustered differently: pair them on the same design")
    if type(a) is not type(b) or a.n != b.n:
        raise ValueError(f"cannot pair {type(a).__name__} of {a.n} units with {type(b).__name__} of {b.n}")
    if list(map(str, a.ids)) != list(map(str, b.ids)):
        raise ValueError("the two methods' units differ: pair them on the same samples")
    return b


# ------------------------------------------------------------------ paired comparisons


def paired_bootstrap(a: Units, b: Units, resamples: int = DEFAULT_RESAMPLES, seed: int = 0,
                     alpha: float = ALPHA) -> dict[str, float]:
    """A's metric minus B's on the same units: the difference, its percentile CI and bootstrap p-value."""
    _same(a, b)
    diffs = np.concatenate([a.replicates(w) - b.replicates(w)
                            for w in a.counts(resamples, seed)]) if resamples else np.zeros(0)
    ci = percentile_ci(diffs, alpha) if resamples else None
    return {"diff": a.point() - b.point(), "lo": ci[0] if ci else float("nan"), "hi": ci[1] if ci else float("nan"),
            "p": bootstrap_p(diffs) if resamples else float("nan"), "resamples": int(np.isfinite(diffs).sum())}


def _per_cluster(u: Units) -> RatioUnits | None:
    """A plain ratio of sums over clusters' summed numerators and denominators (None: not that kind)."""
    if type(u) is not RatioUnits or u.groups is not None or u.clusters is None:
        return None
    codes, c = cluster_codes(u.clusters)
    return RatioUnits([f"cluster {k}" for k in range(c)], np.bincount(codes, u.num, c), np.bincount(codes, u.den, c),
                      transform=u.transform, how=u.how)


def paired_permutation(a: Units, b: Units, permutations: int = DEFAULT_RESAMPLES, seed: int = 0) -> dict[str, float]:
    """Permutation test of A's metric minus B's: each independent unit's two answers (a cluster's
    all together) swapped at random, or every way (exact) up to EXACT_MAX_UNITS units (for units whose flips
    are costly, AUC's, up to EXACT_MAX_COSTLY_UNITS, or while every way is no more than `permutations`)."""
    _same(a, b)
    observed = a.point() - b.point()
    if a.clusters is not None and _per_cluster(a) is not None and _per_cluster(b) is not None:
        # a ratio of sums moves with whole clusters: the clusters' own sums give the same null, n times faster
        a, b = _per_cluster(a), _per_cluster(b)
    n = cluster_codes(a.clusters)[1] if a.clusters is not None else a.n
    exact_ok = not a.costly_flips or n <= EXACT_MAX_COSTLY_UNITS or (n < 63 and 2**n <= permutations)
    if a.clusters is not None:
        codes, c = cluster_codes(a.clusters)
        chunks, exact, count = swap_masks(c, permutations, seed, exact_ok=exact_ok)
        chunks = (s[:, codes] for s in chunks)
    else:
        chunks, exact, count = swap_masks(a.n, permutations, seed, exact_ok=exact_ok)
    null = np.concatenate([a.swapped(b, s) for s in chunks]) if count else np.zeros(0)
    return {"diff": observed, "p": permutation_p(null, observed, exact), "permutations": count, "exact": exact,
            "units": a.independent}


# ------------------------------------------------------------------ the generic (slow) path


def generic_replicates(score: Callable[[np.ndarray], dict[str, float]], n: int, metrics: Sequence[str],
                       resamples: int, seed: int = 0, *, budget_s: float | None = None,
                       min_resamples: int = 200) -> dict[str, np.ndarray]:
    """Replicates by re-scoring: `score(indices)` gets the resampled unit indices (with repeats).

    For metrics without units. With `budget_s`, the number of resamples is cut so the whole
    takes about that long (never below `min_resamples`); the arrays' length says how many were done.
    """
    import time

    out: dict[str, list[float]] = {m: [] for m in metrics}
    done = 0
    limit = resamples
    t0 = time.perf_counter()
    for w in resample_counts(n, resamples, seed):
        for row in w:
            if done >= limit:
                break
            vals = score(np.repeat(np.arange(n), row.astype(np.int64)))
            for m in metrics:
                v = vals.get(m)
                out[m].append(float(v) if isinstance(v, (int, float)) else float("nan"))
            done += 1
            if budget_s is not None and done == 5:
                per = (time.perf_counter() - t0) / done
                limit = min(resamples, max(min_resamples, int(budget_s / per) if per > 0 else resamples))
        if done >= limit:
            break
    return {m: np.asarray(v) for m, v in out.items()}


