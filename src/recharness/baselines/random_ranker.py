"""Uniform random recommender: the chance level each metric should be read against."""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Self

import numpy as np

from recharness.baselines.base import Ranker, TrainData


class RandomRanker(Ranker):
    name = "random"

    def __init__(self, items: list[str] | None = None, seed: int = 0):
        self.seed = seed
        self._use(items or [])

    @classmethod
    def create(cls, seed: int = 0) -> Self:
        return cls(seed=seed)

    def settings(self) -> dict:
        return {"seed": self.seed}

    def fit(self, train: TrainData) -> Self:
        self._use(train.items)
        return self

    def _use(self, items: list[str]) -> None:
        self.items = np.asarray(items, dtype=object)
        self.distinct = frozenset(self.items.tolist())
        self.rng = np.random.default_rng(self.seed)

    def predict(self, samples: list[dict], task=None) -> dict[str, dict]:
        """Each sample's draws from its own stream (the seed and the sample's id), so an answer never depends
        on what was asked before or with it: a task asked whole (`train`) or in batches (`-m baseline:random`)
        gets the same answers, and no two samples share their draws."""
        out: dict[str, dict] = {}
        for s in samples:
            self.rng = np.random.default_rng([self.seed, zlib.crc32(str(s["id"]).encode())])
            out.update(super().predict([s], task))
        return out

    def top_k(self, k: int, exclude: set[str] = frozenset(), *, user: str | None = None,
              history: Sequence[str] = ()) -> list[str]:
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

    def p_click(self, sample: dict) -> float:
        """Uniform on [0, 1): AUC 0.5 in expectation."""
        return float(self.rng.random())

    def rank(self, candidates: list[str], *, user: str | None = None, history: Sequence[str] = ()) -> list[str]:
        return [candidates[i] for i in self.rng.permutation(len(candidates))]
