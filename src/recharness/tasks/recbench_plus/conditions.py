"""Condition-based queries (RecBench+ Sec. 2.2): shared relations in a user's
history, turned into explicit, implicit and misinformed conditions.

Everything here works on KG integer indices and is seeded by the caller's
numpy Generator; phrasing the conditions as text is `phrasing.py`'s job.

* Shared relation: a set of 1-4 (relation, value) pairs shared by >= 2 items
  of the user's history, built by drawing a pair of a *specific* relation
  (director, actor, author, brand) the user has at least twice, then adding
  pairs that at least two of the remaining items share. Anchoring on a
  specific pair keeps the ground truth small and the query meaningful.
* Implicit: one value is replaced by a reference through other catalog items
  outside the ground truth ("the director of The Abyss"). For multi-valued
  relations (cast, genres, languages) references are added until the values
  of that relation the referenced items have in common are exactly the
  hidden one, so the reference resolves to it and to nothing else.
* Misinformed: one condition keeps its value but is said to hold for items
  that do not have it; only items the KG knows that relation for are used,
  so the claim is false in the KG, not merely unknown.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from recharness.kg import ItemKG

# RecBench+ Table 1: queries per condition count (1, 2, 3-4).
TABLE1 = {
    "movie": {"explicit": (2225, 2346, 426), "implicit": (1753, 1552, 344), "misinformed": (1353, 1544, 342)},
    "book": {"explicit": (2260, 2604, 271), "implicit": (1626, 2071, 213), "misinformed": (1626, 2075, 215)},
}
CLASSES = ("1", "2", "3-4")


def condition_class(n: int) -> str:
    return "1" if n <= 1 else "2" if n == 2 else "3-4"


def paper_mix(kind: str, domain: str = "movie") -> np.ndarray:
    """Share of queries with 1, 2 and 3-4 conditions in the paper's Table 1."""
    counts = np.asarray(TABLE1["book" if domain == "book" else "movie"][kind], dtype=float)
    return counts / counts.sum()


@dataclass(frozen=True)
class SharedRelation:
    pairs: tuple[int, ...]  # KG pair ids, the anchoring specific pair first
    items: np.ndarray  # sorted history item indices having every pair (the ground truth)


@dataclass(frozen=True)
class ImplicitRef:
    position: int  # which condition of the shared relation is masked
    refs: tuple[int, ...]  # item indices whose common value of that relation is the hidden one


@dataclass(frozen=True)
class Misinformation:
    position: int  # which condition carries the false claim
    items: tuple[int, ...]  # items said to have (relation, value) but lacking it


class ConditionSampler:
    """Draws shared relations and their implicit / misinformed variants from one KG."""

    def __init__(self, kg: ItemKG, popularity: np.ndarray, *, min_items: int = 2, max_items: int = 10,
                 require_specific: bool = True, max_tries: int = 30, ref_top: int = 5, max_refs: int = 3,
                 misinfo_top: int = 100, twins: dict[int, tuple[int, ...]] | None = None):
        if min_items < 2:
            raise ValueError("min_items must be >= 2 (a shared relation needs two items)")
        if max_items < min_items:
            raise ValueError(f"max_items ({max_items}) < min_items ({min_items})")
        self.kg = kg
        self.min_items = min_items
        self.max_items = max_items
        self.require_specific = require_specific and bool(kg.specific_relations)
        self.max_tries = max_tries
        self.ref_top = ref_top
        self.max_refs = max_refs
        self.misinfo_top = misinfo_top
        #: item -> the items carrying its title (another edition): never an implicit query's reference film for a
        #: ground truth of that title, whose title an answer could copy from the query for a hit
        self.twins = twins or {}
        pop = np.asarray(popularity, dtype=np.float64)
        if pop.shape != (len(kg),):
            raise ValueError(f"popularity has shape {pop.shape}, expected ({len(kg)},)")
        self.popularity = pop
        # most popular first; ties by catalog order so the order is deterministic
        self.pop_order = np.lexsort((np.arange(len(kg)), -pop))
        self.pop_rank = np.empty(len(kg), dtype=np.int64)
        self.pop_rank[self.pop_order] = np.arange(len(kg))
        self._pair_sets: dict[int, frozenset[int]] = {}
        self._item_pairs = [tuple(kg.item_pairs(i).tolist()) for i in range(len(kg))]
        self._pair_rel = kg.pair_relation.tolist()
        # per relation: which items have at least one value of it
        self.knows = np.zeros((len(kg.relations), len(kg)), dtype=bool)
        for p in range(len(kg.pairs)):
            self.knows[kg.pair_relation[p], kg.pair_items(p)] = True

    # ------------------------------------------------------------ shared relations

    def _frequent(self, items: np.ndarray, exclude: tuple[int, ...] = ()) -> np.ndarray:
        pids, counts = np.unique(self.kg.pairs_of_items(items), return_counts=True)
        keep = counts >= self.min_items
        if exclude:
            keep &= ~np.isin(pids, exclude)
        return pids[keep]

    def seeds(self, history: np.ndarray) -> np.ndarray:
        """Pairs that can anchor a shared relation for this history."""
        f = self._frequent(history)
        return f[self.kg.pair_specific[f]] if self.require_specific else f

    def _items_of(self, p: int) -> frozenset[int]:
        s = self._pair_sets.get(p)
        if s is None:
            s = self._pair_sets[p] = frozenset(self.kg.pair_items(p).tolist())
        return s

    def sample(self, history: np.ndarray, n: int, rng: np.random.Generator, seeds: np.ndarray | None = None,
               history_set: set[int] | None = None) -> SharedRelation | None:
        """A shared relation with exactly `n` conditions, or None if none was found.

        Item sets here are small (a user's films by one director), so plain
        Python sets beat numpy's per-call overhead."""
        if history_set is None:
            history_set = set(np.asarray(history, dtype=np.int64).tolist())
        if seeds is None:
            seeds = self.seeds(np.asarray(sorted(history_set), dtype=np.int64))
        if seeds.size == 0:
            return None
        for t in rng.permutation(seeds.size)[: self.max_tries]:
            p = int(seeds[t])
            items = history_set & self._items_of(p)
            chosen = [p]
            while len(chosen) < n:
                cnt = Counter(q for i in items for q in self._item_pairs[i])
                cand = sorted(q for q, c in cnt.items() if c >= self.min_items and q not in chosen)
                if not cand:
                    break
                q = cand[int(rng.integers(len(cand)))]
                chosen.append(q)
                items = items & self._items_of(q)
            if len(chosen) == n and self.min_items <= len(items) <= self.max_items:
                return SharedRelation(tuple(chosen), np.asarray(sorted(items), dtype=np.int64))
        return None

    def all_seeds(self, histories: list[np.ndarray]) -> list[np.ndarray]:
        """`seeds` for many histories at once: one sparse (users x items) @ (items x pairs) product."""
        from scipy.sparse import csr_matrix

        lens = np.fromiter((h.size for h in histories), dtype=np.int64, count=len(histories))
        ptr = np.concatenate(([0], np.cumsum(lens)))
        cols = np.concatenate(histories) if histories else np.zeros(0, dtype=np.int64)
        users = csr_matrix((np.ones(cols.size, dtype=np.int32), cols, ptr), shape=(len(histories), len(self.kg)))
        counts = (users @ self.kg.pairs_matrix()).tocsr()
        out = []
        for u in range(len(histories)):
            pids = counts.indices[counts.indptr[u] : counts.indptr[u + 1]]
            c = counts.data[counts.indptr[u] : counts.indptr[u + 1]]
            keep = c >= self.min_items
            if self.require_specific:
                keep &= self.kg.pair_specific[pids]
            out.append(np.sort(pids[keep]).astype(np.int64))
        return out

    def sample_class(self, history: np.ndarray, cls: str, rng: np.random.Generator,
                     seeds: np.ndarray | None = None) -> SharedRelation | None:
        """A shared relation in condition class "1", "2" or "3-4"; falls back to fewer conditions.
        `history` must hold unique item indices (pass `seeds` from `all_seeds` to save work)."""
        hist = np.unique(np.asarray(history, dtype=np.int64))
        seeds = self.seeds(hist) if seeds is None else seeds
        if seeds.size == 0:
            return None
        hset = set(hist.tolist())
        if cls == "3-4":
            order = [3, 4] if rng.random() < 0.5 else [4, 3]
            order += [2, 1]
        else:
            order = list(range(int(cls), 0, -1))
        for n in order:
            sr = self.sample(hist, n, rng, seeds, hset)
            if sr is not None:
                return sr
        return None

    # ------------------------------------------------------------ implicit

    def _order(self, sr: SharedRelation, rng: np.random.Generator) -> list[int]:
        """Condition positions to transform: specific relations first, each group shuffled."""
        spec = [k for k, p in enumerate(sr.pairs) if self.kg.pair_specific[p]]
        other = [k for k, p in enumerate(sr.pairs) if not self.kg.pair_specific[p]]
        return [spec[i] for i in rng.permutation(len(spec))] + [other[i] for i in rng.permutation(len(other))]

    def _same_relation(self, item: int, rel: int) -> set[int]:
        rels = self._pair_rel
        return {q for q in self._item_pairs[item] if rels[q] == rel}

    def implicit(self, sr: SharedRelation, rng: np.random.Generator) -> ImplicitRef | None:
        kg = self.kg
        for k in self._order(sr, rng):
            p = sr.pairs[k]
            rel = int(kg.pair_relation[p])
            taken = sr.items
            if self.twins:
                taken = np.union1d(sr.items, [j for i in sr.items for j in self.twins.get(int(i), ())]).astype(
                    np.asarray(sr.items).dtype)
            pool = np.setdiff1d(kg.pair_items(p), taken, assume_unique=True)
            if pool.size == 0:
                continue
            pool = pool[np.argsort(self.pop_rank[pool], kind="stable")]
            first = int(pool[rng.integers(min(self.ref_top or pool.size, pool.size))])
            refs = [first]
            common = self._same_relation(first, rel)
            while common != {p} and len(refs) < self.max_refs:
                best, best_common = None, common
                for c in pool[:200]:
                    c = int(c)
                    if c in refs:
                        continue
                    inter = common & self._same_relation(c, rel)
                    if len(inter) < len(best_common):
                        best, best_common = c, inter
                        if len(inter) == 1:
                            break
                if best is None:
                    break
                refs.append(best)
                common = best_common
            if common == {p}:
                return ImplicitRef(k, tuple(refs))
        return None

    # ------------------------------------------------------------ misinformed

    def misinform(self, sr: SharedRelation, rng: np.random.Generator, n_items: int = 1) -> Misinformation | None:
        kg = self.kg
        for k in self._order(sr, rng):
            p = sr.pairs[k]
            rel = int(kg.pair_relation[p])
            bad = np.zeros(len(kg), dtype=bool)
            bad[kg.pair_items(p)] = True
            bad[sr.items] = True
            order = self.pop_order
            pool = order[self.knows[rel, order] & ~bad[order]][: self.misinfo_top or None]
            if pool.size < n_items:
                continue
            picks = rng.choice(pool.size, size=n_items, replace=False)
            return Misinformation(k, tuple(int(pool[i]) for i in sorted(picks)))
        return None
