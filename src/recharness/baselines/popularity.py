"""Most-popular recommender: the floor any personalised method should clear."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Self

import polars as pl

from recharness.baselines.base import Ranker, TrainData
from recharness.core.errors import ConfigError
from recharness.data.leave_last_out import item_popularity


class PopularityRanker(Ranker):
    """Ranks items by interaction count on the training part (each user's last item held out).

    `PopularityRanker(interactions)` counts all interactions but each user's last;
    `PopularityRanker().fit(train)` counts `train.interactions`, already the training part (for
    RecBench CTR: the positive training pairs, so a ctr score is the item's clicks over the most).
    """

    name = "popularity"
    click_probabilities = False  # the item's clicks over the most any item has: a ranking score

    def __init__(self, interactions: pl.DataFrame | None = None):
        self.order: list[str] = []
        self.counts: dict[str, int] = {}
        self.on_pairs = False
        if interactions is not None:
            self._count(item_popularity(interactions))

    def fit(self, train: TrainData) -> Self:
        self._count(item_popularity(train.interactions, exclude_last=False))
        self.on_pairs = train.pairs is not None
        return self

    def _count(self, pop: pl.DataFrame) -> None:
        self.order = pop["item_id"].to_list()
        self.counts = dict(zip(self.order, pop["count"].to_list()))
        self.position = {item: k for k, item in enumerate(self.order)}

    def target_rank(self, target: str, history: list[str], *, user: str | None = None) -> int | None:
        """The target's rank in the popularity order with the history removed, in O(history): the
        seqrec answer. An item without a training count comes after every counted one; its place
        among the uncounted is unknown without the catalog, so it is unranked (None, scored 0)."""
        p = self.position.get(target)
        if p is None:
            return None
        return p + 1 - sum(1 for h in set(history) if self.position.get(h, p) < p)

    def top_k(self, k: int, exclude: set[str] = frozenset(), *, user: str | None = None,
              history: Sequence[str] = ()) -> list[str]:
        out = []
        for i in self.order:
            if i not in exclude:
                out.append(i)
                if len(out) == k:
                    break
        return out

    def p_click(self, sample: dict) -> float:
        """Training clicks on the item over the most any item has: a ranking score, not a calibrated probability."""
        if not self.on_pairs:
            raise ConfigError("popularity answers click requests only when fitted on the build's training pairs "
                              "(<run>/<suite>/train.parquet), which this training data does not hold")
        top = self.counts[self.order[0]] if self.order else 0
        return self.counts.get(sample["item_id"], 0) / top if top else 0.0

    def rank(self, candidates: list[str], *, user: str | None = None, history: Sequence[str] = ()) -> list[str]:
        """Candidates by popularity; ties broken by item id so the order is reproducible."""
        return sorted(candidates, key=lambda i: (-self.counts.get(i, 0), i))
