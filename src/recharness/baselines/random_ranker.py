"""Uniform random recommender: the chance level each metric should be read against."""

from __future__ import annotations

import numpy as np


class RandomRanker:
    def __init__(self, items: list[str], seed: int = 0):
        self.items = np.asarray(items, dtype=object)
        self.distinct = frozenset(self.items.tolist())
        self.rng = np.random.default_rng(seed)

    def top_k(self, k: int, exclude: set[str] = frozenset()) -> list[str]:
        """Up to k distinct items not in `exclude`; fewer when fewer are left (drawing for more would never end)."""
        k = min(k, len(self.distinct) - len(self.distinct.intersection(exclude)))
        out: list[str] = []
        while len(out) < k:
            draw = self.items[self.rng.integers(0, len(self.items), size=4 * k)]
            for i in draw:
                if i not in exclude and i not in out:
                    out.append(str(i))
                    if len(out) == k:
                        break
        return out

    def rank(self, candidates: list[str]) -> list[str]:
        return [candidates[i] for i in self.rng.permutation(len(candidates))]
