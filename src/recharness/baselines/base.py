"""The reference-model contract: fit on training data, predict records the task's `score` reads.

A baseline is fitted once (`train` stage, or on the fly by a task's `references`) and then
answers every sample of the tasks it serves, so a trained model (RecBench CTR's DLRMs) and a
count (popularity) go through the same two calls and the same scorer as an LLM.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Self

import polars as pl

from recharness.tasks.base import reference_record


def training_rows(interactions: pl.DataFrame) -> pl.DataFrame:
    """All interactions but each user's last one: the leave-last-out split every llmrec build holds out."""
    pos = pl.int_range(pl.len()).over("user_id")
    return interactions.filter(pos < pl.len().over("user_id") - 1)


@dataclass(frozen=True)
class TrainData:
    """What a reference model may learn from: never a sample's held-out target."""

    #: training interactions only (user_id, item_id, rating, timestamp)
    interactions: pl.DataFrame
    #: the catalog (item ids); knowing which items exist reveals no target
    items: list[str]

    @classmethod
    def leave_last_out(cls, dataset) -> "TrainData":
        """The training part of a leave-last-out build: each user's last interaction is the test target."""
        return cls(training_rows(dataset.interactions), dataset.items["item_id"].to_list())


class Baseline(ABC):
    """A reference method. Registered in `BASELINES` with the tasks it serves ("suite:task")."""

    name: str = ""

    @classmethod
    def create(cls, seed: int = 0) -> Self:
        """A fresh, unfitted instance; baselines that draw at random override this to take the seed."""
        return cls()

    def settings(self) -> dict:
        """What, besides the training data, decides its predictions (stamped on every record)."""
        return {}

    def identity(self) -> dict:
        return {"baseline": self.name, "settings": self.settings()}

    @abstractmethod
    def fit(self, train: TrainData) -> Self: ...

    @abstractmethod
    def predict(self, samples: list[dict]) -> dict[str, dict]:
        """{sample id: prediction record} for samples of one task; the same samples give the same records."""


class Ranker(Baseline):
    """A baseline that ranks items: answers llmrec sequential (top k unseen items) and direct
    (the candidates in its order) in the record shape those tasks' `score` reads."""

    @abstractmethod
    def top_k(self, k: int, exclude: set[str] = frozenset()) -> list[str]: ...

    @abstractmethod
    def rank(self, candidates: list[str]) -> list[str]: ...

    def parsed(self, sample: dict) -> dict:
        if sample["task"] == "direct":
            return {"ranking": self.rank(sample["candidates"])}
        if sample["task"] == "sequential":
            items = self.top_k(sample["n_recs"], exclude=set(sample["seen"]))
            return {"items": items, "strings": items}
        raise ValueError(f"{self.name} does not answer {sample['task']!r} samples")

    def predict(self, samples: list[dict]) -> dict[str, dict]:
        return {s["id"]: reference_record(s["id"], self.parsed(s)) for s in samples}
