"""The item knowledge graph: items linked to attribute values by typed relations.

Stored both ways (item -> (relation, value) pairs, and (relation, value) ->
items) as sorted integer arrays, so query construction can intersect item
sets and count shared pairs over a user's history in numpy, while the public
API speaks item ids and strings.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from recharness.kg.schema import RelationSpec, specs_for

Condition = tuple[str, str]  # (relation, value)


@dataclass(frozen=True)
class RelationStats:
    relation: str
    specific: bool
    items: int  # items with at least one value
    values: int
    edges: int


class ItemKG:
    """Typed item-attribute graph. Build with `from_dataset` or `from_items`."""

    def __init__(self, item_ids: Sequence[str], edges: Iterable[tuple[str, str, str]], specific: set[str] | frozenset[str] = frozenset()):
        """`edges`: (item_id, relation, value) triples; items without edges are still nodes."""
        self.item_ids: list[str] = [str(i) for i in item_ids]
        self.item_index: dict[str, int] = {i: n for n, i in enumerate(self.item_ids)}
        if len(self.item_index) != len(self.item_ids):
            raise ValueError("duplicate item ids in the knowledge graph")
        pair_index: dict[Condition, int] = {}
        rows: list[int] = []
        cols: list[int] = []
        seen: set[tuple[int, int]] = set()
        relations: list[str] = []
        for item, rel, val in edges:
            i = self.item_index.get(str(item))
            if i is None:
                raise KeyError(f"edge for unknown item {item!r}")
            key = (rel, val)
            p = pair_index.get(key)
            if p is None:
                p = pair_index[key] = len(pair_index)
                if rel not in relations:
                    relations.append(rel)
            if (i, p) not in seen:
                seen.add((i, p))
                rows.append(i)
                cols.append(p)
        self.relations: tuple[str, ...] = tuple(relations)
        self.specific_relations = frozenset(r for r in relations if r in specific)
        self.pairs: list[Condition] = list(pair_index)
        self.pair_index = pair_index
        n_items, n_pairs = len(self.item_ids), len(self.pairs)
        r = np.asarray(rows, dtype=np.int64)
        c = np.asarray(cols, dtype=np.int64)
        # item -> pairs (CSR by item) and pair -> items (CSR by pair), both sorted
        self._item_ptr, self._item_pairs = _csr(r, c, n_items)
        self._pair_ptr, self._pair_items = _csr(c, r, n_pairs)
        rel_code = {rel: k for k, rel in enumerate(self.relations)}
        self.pair_relation = np.asarray([rel_code[p[0]] for p in self.pairs], dtype=np.int32)
        self.pair_specific = np.asarray([p[0] in self.specific_relations for p in self.pairs], dtype=bool)
        self.pair_size = np.diff(self._pair_ptr)

    # ------------------------------------------------------------ building

    @classmethod
    def from_items(cls, items: pl.DataFrame, specs: Sequence[RelationSpec] | None = None) -> "ItemKG":
        """Build from an item table (item_id + attribute columns, lists or scalars)."""
        if "item_id" not in items.columns:
            raise ValueError("item table has no 'item_id' column")
        specs = tuple(specs) if specs is not None else specs_for(items.columns)
        if not specs:
            raise ValueError(
                "no knowledge-graph relation can be derived from the item columns "
                f"{items.columns}: expected some of directors, cast, genres, languages, certificate, year "
                "(movies) or store, main_category, categories, author (Amazon)"
            )
        ids = items["item_id"].cast(pl.Utf8).to_list()
        edges: list[tuple[str, str, str]] = []
        for spec in specs:
            col = items[spec.column]
            cells = col.to_list()
            cache: dict[object, str | None] = {}
            for item, cell in zip(ids, cells):
                if cell is None:
                    continue
                for raw in cell if isinstance(cell, list) else (cell,):
                    if raw is None:
                        continue
                    if raw not in cache:
                        cache[raw] = spec.transform(raw) if spec.transform else str(raw)
                    v = cache[raw]
                    if v:
                        edges.append((item, spec.name, v))
        return cls(ids, edges, specific={s.name for s in specs if s.specific})

    @classmethod
    def from_dataset(cls, dataset, specs: Sequence[RelationSpec] | None = None) -> "ItemKG":
        return cls.from_items(dataset.items, specs)

    # ------------------------------------------------------------ string API

    def __len__(self) -> int:
        return len(self.item_ids)

    def __contains__(self, item_id: str) -> bool:
        return item_id in self.item_index

    def is_specific(self, relation: str) -> bool:
        return relation in self.specific_relations

    def facts(self, item_id: str) -> list[Condition]:
        """Every (relation, value) of an item; [] for unknown items."""
        i = self.item_index.get(item_id)
        if i is None:
            return []
        return [self.pairs[p] for p in self._item_pairs[self._item_ptr[i] : self._item_ptr[i + 1]]]

    def values(self, item_id: str, relation: str) -> frozenset[str]:
        return frozenset(v for r, v in self.facts(item_id) if r == relation)

    def knows(self, item_id: str, relation: str) -> bool:
        """True if the graph has any value of `relation` for the item (so a missing edge is a real 'no')."""
        return any(r == relation for r, _ in self.facts(item_id))

    def items_with(self, relation: str, value: str) -> frozenset[str]:
        p = self.pair_index.get((relation, value))
        if p is None:
            return frozenset()
        return frozenset(self.item_ids[i] for i in self.pair_items(p))

    def has(self, item_id: str, relation: str, value: str) -> bool:
        i = self.item_index.get(item_id)
        p = self.pair_index.get((relation, value))
        if i is None or p is None:
            return False
        row = self.item_pairs(i)
        k = np.searchsorted(row, p)
        return bool(k < row.size and row[k] == p)

    def satisfies(self, item_id: str, conditions: Iterable[Condition]) -> bool:
        return all(self.has(item_id, r, v) for r, v in conditions)

    def satisfying(self, conditions: Iterable[Condition]) -> set[str]:
        """Every catalog item that has all the conditions (empty conditions: no items)."""
        ids = [self.pair_index.get((r, v)) for r, v in conditions]
        if not ids or any(p is None for p in ids):
            return set()
        return {self.item_ids[i] for i in self.intersect_pairs(ids)}  # type: ignore[arg-type]

    def stats(self) -> list[RelationStats]:
        out = []
        for k, rel in enumerate(self.relations):
            mask = self.pair_relation == k
            pids = np.flatnonzero(mask)
            items = np.unique(np.concatenate([self.pair_items(p) for p in pids])) if pids.size else np.zeros(0)
            out.append(RelationStats(rel, rel in self.specific_relations, int(items.size), int(pids.size), int(self.pair_size[mask].sum())))
        return out

    # ------------------------------------------------------------ integer API (fast paths)

    def item_pairs(self, i: int) -> np.ndarray:
        return self._item_pairs[self._item_ptr[i] : self._item_ptr[i + 1]]

    def pairs_of_items(self, items: np.ndarray) -> np.ndarray:
        """The (relation, value) pair ids of every item index in `items`, concatenated: a pair appears
        once per item that has it (count them to find pairs shared by several items)."""
        if len(items) == 0:
            return np.zeros(0, dtype=np.int64)
        ptr, flat = self._item_ptr, self._item_pairs
        return np.concatenate([flat[ptr[i] : ptr[i + 1]] for i in items])

    def pair_items(self, p: int) -> np.ndarray:
        return self._pair_items[self._pair_ptr[p] : self._pair_ptr[p + 1]]

    def intersect_pairs(self, pair_ids: Sequence[int]) -> np.ndarray:
        """Sorted item indices having every pair (smallest set first)."""
        order = sorted(pair_ids, key=lambda p: self.pair_size[p])
        cur = self.pair_items(order[0])
        for p in order[1:]:
            if cur.size == 0:
                break
            cur = np.intersect1d(cur, self.pair_items(p), assume_unique=True)
        return cur

    def indices(self, item_ids: Iterable[str]) -> np.ndarray:
        """Sorted unique indices of the known ids among `item_ids` (unknown ids are skipped)."""
        idx = [self.item_index[i] for i in item_ids if i in self.item_index]
        return np.unique(np.asarray(idx, dtype=np.int64))

    def pairs_matrix(self):
        """items x pairs 0/1 matrix (scipy CSR), for counting shared pairs over many histories at once."""
        from scipy.sparse import csr_matrix

        data = np.ones(self._item_pairs.size, dtype=np.int32)
        return csr_matrix((data, self._item_pairs, self._item_ptr), shape=(len(self.item_ids), len(self.pairs)))


def _csr(rows: np.ndarray, cols: np.ndarray, n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Row pointer and column indices, sorted within each row."""
    order = np.lexsort((cols, rows))
    counts = np.bincount(rows, minlength=n_rows) if rows.size else np.zeros(n_rows, dtype=np.int64)
    ptr = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    return ptr, cols[order].astype(np.int64)
