"""Most-popular recommender: the floor any personalised method should clear."""

from __future__ import annotations

from typing import Self

import polars as pl

from recharness.baselines.base import Ranker, TrainData
from recharness.data.leave_last_out import item_popularity


class PopularityRanker(Ranker):
    """Ranks items by interaction count on the training part (each user's last item held out).

    `PopularityRanker(interactions)` counts all interactions but each user's last;
    `PopularityRanker().fit(train)` counts `train.interactions`, already the training part.
    """

    name = "popularity"

    def __init__(self, interactions: pl.DataFrame | None = None):
        self.order: list[str] = []
        self.counts: dict[str, int] = {}
        if interactions is not None:
            self._count(item_popularity(interactions))

    def fit(self, train: TrainData) -> Self:
        self._count(item_popularity(train.interactions, exclude_last=False))
        return self

    def _count(self, pop: pl.DataFrame) -> None:
        self.order = pop["item_id"].to_list()
        self.counts = dict(zip(self.order, pop["count"].to_list()))

    def top_k(self, k: int, exclude: set[str] = frozenset()) -> list[str]:
        out = []
        for i in self.order:
            if i not in exclude:
                out.append(i)
                if len(out) == k:
                    break
        return out

    def rank(self, candidates: list[str]) -> list[str]:
        """Candidates by popularity; ties broken by item id so the order is reproducible."""
        return sorted(candidates, key=lambda i: (-self.counts.get(i, 0), i))
