"""Most-popular recommender: the floor any personalised method should clear."""

from __future__ import annotations

import polars as pl

from recharness.data.leave_last_out import item_popularity


class PopularityRanker:
    """Ranks items by interaction count on the training part (each user's last item held out)."""

    def __init__(self, interactions: pl.DataFrame):
        pop = item_popularity(interactions)
        self.order: list[str] = pop["item_id"].to_list()
        self.counts: dict[str, int] = dict(zip(self.order, pop["count"].to_list()))

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
