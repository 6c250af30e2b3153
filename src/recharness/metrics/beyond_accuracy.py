"""Beyond accuracy: what a ranking method recommends, not only whether it hits the target.

For the top-k lists of one method over a task's samples, against the item popularity of the
training data (interactions per item). A list's top k are its first k slots: a repeated item or an
id outside the catalog spends its slot (as in `metrics.ranking`) and is then not counted.

- **coverage@k**: distinct recommended items / catalog size. With several candidate orders (`--orders K`)
  coverage and Gini are each order's lists' own, averaged over the orders: a union over a user's K lists
  would reward a method for answering the same candidates differently under each order.
- **ARP@k** (average recommended popularity, Abdollahpouri et al. 2019): per sample, the mean
  training popularity of its list; averaged over samples with a non-empty list.
- **Gini@k** of exposure: how unequally the catalog's items appear in the lists, 0 = every item
  equally often, up to (m − 1)/m when one item takes all (the standard, uncorrected formula, as
  RecBole's; 0.75 for m = 4); over every catalog item (never-recommended ones at 0):
  G = Σᵢ (2i − m − 1)·xᵢ / (m · Σ x) over exposures x sorted ascending, i = 1..m.
- **novelty@k**: mean self-information −log₂ p(i) of the recommended items, p(i) = (nᵢ + 1)/(U + 1)
  with nᵢ the training users of item i and U the training users (add-one, so an item nobody had is
  finite); per sample, then averaged over samples with a non-empty list.
- **head / tail accuracy**: the hit rate split by the target's popularity: head = the top 20% of
  items by training interactions (ties by item id), tail = the rest.

All come from the lists themselves, so imported predictions get them too, and each is a `Units`
over samples (the user's samples moving together where given). ARP, novelty and head/tail accuracy
are means and get intervals; coverage and Gini are statistics of the whole set of lists, and a
bootstrap of them is biased (resampling with replacement repeats lists, so fewer distinct items
appear: the percentile interval of coverage falls below its own value), so the tables show them
without one (`ExposureUnits` still gives the exact paired permutation test of two methods).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import polars as pl
import scipy.sparse as sp

from recharness.metrics.bootstrap import Units, mean_units

HEAD_SHARE = 0.2


@dataclass(frozen=True)
class Popularity:
    """Training popularity of each catalog item: interactions, distinct users, and the head set."""

    catalog: tuple[str, ...]
    interactions: dict[str, int]
    users_of: dict[str, int]
    users: int
    head: frozenset[str]

    @classmethod
    def of(cls, interactions: pl.DataFrame, catalog: Sequence[str], head_share: float = HEAD_SHARE) -> Popularity:
        cat = tuple(dict.fromkeys(catalog))
        counts = dict(interactions.group_by("item_id").len().iter_rows())
        users_of = dict(interactions.unique(["user_id", "item_id"]).group_by("item_id").len().iter_rows())
        order = sorted(cat, key=lambda i: (-counts.get(i, 0), i))
        head = frozenset(order[: int(round(head_share * len(order)))])
        return cls(cat, {i: int(counts.get(i, 0)) for i in cat}, {i: int(users_of.get(i, 0)) for i in cat},
                   int(interactions["user_id"].n_unique()), head)

    def self_information(self, item: str) -> float:
        return float(-np.log2((self.users_of.get(item, 0) + 1) / (self.users + 1)))


def gini(exposure: np.ndarray) -> np.ndarray:
    """Gini index of each row of non-negative exposures (rows, m) → (rows,); NaN for an all-zero row."""
    x = np.sort(np.atleast_2d(np.asarray(exposure, dtype=np.float64)), axis=1)
    m = x.shape[1]
    coef = 2.0 * np.arange(1, m + 1) - m - 1
    total = x.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, (x @ coef) / (m * total), np.nan)


@dataclass(eq=False)
class ExposureUnits(Units):
    """coverage@k or Gini@k of the lists under unit weights: the exposure of item j under weights w
    is Σ_s w_s · [j in list_s], one sparse product for all resamples at once."""

    ids: Sequence
    incidence: sp.csr_matrix = None  # (samples, catalog) 0/1
    stat: str = "coverage"  # or "gini"
    strata: np.ndarray | None = None
    how: str = "over the catalog"
    clusters: np.ndarray | None = None
    #: each sample's candidate order (`--orders K`): the statistic is each order's lists' own, averaged over the
    #: orders (a union over a user's K lists would raise coverage for a method that answers each order otherwise);
    #: None: all lists together
    orders: np.ndarray | None = None
    _m: int = field(default=0, init=False, repr=False)
    _parts: list = field(default_factory=list, init=False, repr=False)

    def __post_init__(self):
        self.incidence = sp.csr_matrix(self.incidence, dtype=np.float64)
        self._m = self.incidence.shape[1]
        if self.orders is None:
            self._parts = [None]
        else:
            o = np.asarray(self.orders)
            self._parts = [np.flatnonzero(o == v) for v in np.unique(o)]

    def _of(self, exposure: np.ndarray) -> np.ndarray:
        if self.stat == "coverage":
            return (exposure > 0).sum(axis=1) / self._m
        return gini(exposure)

    def _over_orders(self, value) -> np.ndarray:
        """The mean over the orders of `value(rows)` (the statistic of those samples' lists)."""
        return np.mean([value(rows) for rows in self._parts], axis=0)

    def replicates(self, counts: np.ndarray) -> np.ndarray:
        w = np.asarray(counts, dtype=np.float64)

        def value(rows):
            inc = self.incidence if rows is None else self.incidence[rows]
            return self._of(np.asarray(inc.T @ (w if rows is None else w[:, rows]).T).T)

        return self._over_orders(value)

    def swapped(self, other: Units, swap: np.ndarray) -> np.ndarray:
        s = np.asarray(swap, dtype=np.float64)

        def value(rows):
            mine = (self.incidence if rows is None else self.incidence[rows]).T
            theirs = (other.incidence if rows is None else other.incidence[rows]).T
            ss = s if rows is None else s[:, rows]
            a = np.asarray(mine @ (1 - ss).T + theirs @ ss.T).T
            b = np.asarray(theirs @ (1 - ss).T + mine @ ss.T).T
            return self._of(a) - self._of(b)

        return self._over_orders(value)

    def support(self) -> int:
        return int((np.asarray(self.incidence.sum(axis=1)).ravel() > 0).sum())

    def _carrying(self) -> np.ndarray:
        return np.asarray(self.incidence.sum(axis=1)).ravel() > 0


def beyond_accuracy_units(ids: Sequence, lists: Sequence[Sequence[str]], targets: Sequence[str] | None,
                          hits: Sequence[float] | None, pop: Popularity, k: int = 10, clusters=None,
                          accuracy: str = "HR@10", orders: Sequence[int] | None = None) -> dict[str, Units]:
    """The metrics of the module docstring for top-`k` lists; `hits` the per-sample accuracy that
    head / tail split (e.g. HR@10), named `accuracy`. The list is cut to its first `k` slots before
    anything is dropped: a repeated item or an id outside the catalog keeps (wastes) its slot, as in
    `metrics.ranking`, and is then not counted, so an item ranked below k is never pulled in.
    `targets` None (samples without one target, e.g. a set of relevant items): no head / tail split.
    `orders` (each sample's candidate order, `--orders K`): coverage and Gini are each order's, averaged."""
    code = {i: j for j, i in enumerate(pop.catalog)}
    tops = [[i for i in dict.fromkeys(list(lst)[:k]) if i in code] for lst in lists]
    rows = [r for r, t in enumerate(tops) for _ in t]
    cols = [code[i] for t in tops for i in t]
    inc = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(tops), len(pop.catalog)))
    nonempty = [bool(t) for t in tops]
    arp = [float(np.mean([pop.interactions[i] for i in t])) if t else 0.0 for t in tops]
    nov = [float(np.mean([pop.self_information(i) for i in t])) if t else 0.0 for t in tops]
    head = [t in pop.head for t in targets] if targets is not None else [False] * len(tops)
    hits = np.asarray(hits if targets is not None else np.zeros(len(tops)), dtype=np.float64)
    cl = clusters
    several = orders is not None and len(set(orders)) > 1
    per = ", each candidate order's, averaged over the orders" if several else ""
    o = np.asarray(orders) if several else None
    out = {
        f"coverage@{k}": ExposureUnits(ids, inc, "coverage", clusters=cl, orders=o,
                                       how="distinct recommended items / catalog" + per),
        f"Gini@{k}": ExposureUnits(ids, inc, "gini", clusters=cl, orders=o,
                                   how="Gini of item exposure over the catalog" + per),
        f"ARP@{k}": mean_units(ids, arp, nonempty, clusters=cl, how="mean over samples with a list"),
        f"novelty@{k}": mean_units(ids, nov, nonempty, clusters=cl, how="mean over samples with a list"),
        f"{accuracy} head": mean_units(ids, hits, head, clusters=cl, how="mean over samples whose target is a head item"),
        f"{accuracy} tail": mean_units(ids, hits, [not h for h in head], clusters=cl,
                                       how="mean over samples whose target is a tail item"),
    }
    # a metric no sample carries (no list at all, no head target) is left out, not reported as NaN
    if not any(nonempty):
        for name in (f"coverage@{k}", f"Gini@{k}", f"ARP@{k}", f"novelty@{k}"):
            out.pop(name)
    for part, n in (("head", sum(head)), ("tail", len(head) - sum(head))):
        if not n or targets is None:
            out.pop(f"{accuracy} {part}")
    return out
