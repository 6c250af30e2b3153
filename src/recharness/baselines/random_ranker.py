"""Uniform random recommender: the chance level each metric should be read against."""

from __future__ import annotations

import numpy as np


class RandomRanker:
    def __init__(self, items: list[str], seed: int = 0):
        self.items = np.asarray(items, dtype=object)
        self.rng = np.random.default_rng(seed)

    def top_k(self, k: int, exclude: set[str] = frozenset()) -> list[str]:
        out: list[str] = []
        while len(out) < k:
            draw = self.items[self.rng.integers(0, len(self.items), size=4 * k)]
            for i in draw:
                if i not in exclude and i not in out:
                    out.append(str(i))
                    if len(out) == k:
                        break
            if len(exclude) >= len(self.items):
                break
        return out

    def rank(self, candidates: list[str]) -> list[str]:
        return [candidates[i] for i in self.rng.permutation(len(candidates))]
