"""What every RecBench+ task needs from a dataset, computed once per build.

The suite's tasks are built (run, scored) one after the other on the same
dataset; the KG, histories, popularity and catalog matcher are shared rather
than rebuilt: the pipeline calls `make_context` (the suite's context factory)
once and hands the result to every task (`BuildConfig.context` for build,
`setup(dataset, context)` before run / parse / score). A task given none
makes its own; nothing is kept at module level.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from recharness.kg import ItemKG

# RecBench+ wording (singular, plural) per dataset domain (recharness.data.store decides the
# domain); a domain without an entry here is worded as products.
DOMAINS = {"movie": ("movie", "movies"), "book": ("book", "books"), "product": ("product", "products")}


def domain_of(dataset) -> str:
    """The DOMAINS key RecBench+ prompts use for a dataset (its `domain`)."""
    return dataset.domain if dataset.domain in DOMAINS else "product"


def display_title(title: str) -> str:
    """"Abyss, The (1989)" -> "The Abyss (1989)": how a person writes it in a query."""
    from recharness.matching.normalize import move_article, split_year

    head, year = split_year(title)
    # "Seven (Se7en)": keep alternative names in brackets as they are
    head = move_article(head)
    return f"{head} ({year})" if year else head


@dataclass
class Context:
    dataset: object
    kg: ItemKG
    domain: str
    titles: dict[str, str]
    users: list[str]
    histories: dict[str, list[str]]  # chronological item ids
    counts: dict[str, int]  # interactions per item over the whole data
    popularity: np.ndarray  # counts aligned with kg.item_ids
    _matcher: object | None = field(default=None, repr=False)
    _same_title: dict[str, tuple[str, ...]] | None = field(default=None, repr=False)
    _hist_idx: dict[str, np.ndarray] | None = field(default=None, repr=False)
    _pop_order: list[str] | None = field(default=None, repr=False)
    _shown: dict[str, str] = field(default_factory=dict, repr=False)
    #: why the dataset has no knowledge graph (no attribute column to derive a relation from), else None: the
    #: condition tasks need one and say this; the profile tasks (interest, demographics) do not
    no_kg: str | None = None

    @classmethod
    def build(cls, dataset) -> "Context":
        no_kg = None
        try:
            kg = ItemKG.from_dataset(dataset)
        except ValueError as e:  # items without attributes (MicroLens): a graph of items with no relation
            if "item_id" not in dataset.items.columns:
                raise
            no_kg = str(e)
            kg = ItemKG(dataset.items["item_id"].cast(pl.Utf8).to_list(), [])
        titles = dict(zip(dataset.items["item_id"].to_list(), dataset.items["title"].to_list()))
        grouped = (
            dataset.interactions.select("user_id", "item_id")
            .group_by("user_id", maintain_order=True)
            .agg(pl.col("item_id"))
        )
        histories = dict(zip(grouped["user_id"].to_list(), grouped["item_id"].to_list()))
        cnt = dataset.interactions.group_by("item_id").len("n")
        counts = dict(zip(cnt["item_id"].to_list(), cnt["n"].to_list()))
        popularity = np.asarray([counts.get(i, 0) for i in kg.item_ids], dtype=np.float64)
        return cls(dataset, kg, domain_of(dataset), titles, sorted(histories), histories, counts, popularity,
                   no_kg=no_kg)

    def history_indices(self) -> dict[str, np.ndarray]:
        """Each user's history as sorted unique KG item indices (items unknown to the KG dropped)."""
        if self._hist_idx is None:
            index = self.kg.item_index
            out = {}
            for u, items in self.histories.items():
                idx = np.fromiter((index.get(i, -1) for i in items), dtype=np.int64, count=len(items))
                out[u] = np.unique(idx[idx >= 0])
            self._hist_idx = out
        return self._hist_idx

    def title(self, item_id: str) -> str:
        return self.titles.get(item_id) or item_id  # items without a title are named by id

    def shown(self, item_id: str) -> str:
        """The title as a person writes it (memoised: histories repeat the same items many times)."""
        t = self._shown.get(item_id)
        if t is None:
            t = self._shown[item_id] = display_title(self.title(item_id))
        return t

    def hidden_with(self, ids: set[str]) -> set[str]:
        """`ids` and every item carrying one of their titles (the matcher's twins: the same title, spacing and case
        aside): a history shown beside a query never holds another edition of a ground-truth item, whose title an
        answer could copy for a hit."""
        if self._same_title is None:  # the matcher's twins, without building the matcher
            from recharness.matching.catalog import same_title_twins

            self._same_title = same_title_twins((i, t) for i, t in self.titles.items() if t)
        out = set(ids)
        for i in ids:
            out.update(self._same_title.get(i, ()))
        return out

    def matcher(self):
        if self._matcher is None:
            from recharness.matching import CatalogMatcher

            self._matcher = CatalogMatcher([(i, t) for i, t in self.titles.items() if t], priority=self.counts)
        return self._matcher

    def popular(self, exclude: set[str] | frozenset[str] = frozenset(), k: int = 10, among: set[str] | None = None) -> list[str]:
        """The k most-interacted items (ties by id), optionally only `among` a set, never `exclude`d ones."""
        if among is not None:
            ranked = sorted((i for i in among if i not in exclude), key=lambda i: (-self.counts.get(i, 0), i))
            return ranked[:k]
        if self._pop_order is None:
            self._pop_order = sorted(self.titles, key=lambda i: (-self.counts.get(i, 0), i))
        out = []
        for i in self._pop_order:
            if i not in exclude:
                out.append(i)
                if len(out) == k:
                    break
        return out


def make_context(dataset, config=None) -> Context:
    """The suite's context factory: one Context per build / run / score. `config` (the build's
    BuildConfig or options dict) is accepted for the factory signature; nothing here depends on it."""
    return Context.build(dataset)
