"""Item click-through rate on the training pairs: the non-personalised CTR reference a DLRM must beat."""

from __future__ import annotations

from typing import Self

import polars as pl

from recharness.baselines.base import Baseline, TrainData


class ItemMeanCtr(Baseline):
    """P(click | item) = (clicks + m * global CTR) / (pairs + m) over the training pairs: an item seen
    in few pairs is pulled towards the global rate, an unseen one gets it (m = `smoothing`)."""

    name = "item_mean"
    smoothing = 10.0

    def __init__(self):
        self.prior = 0.5
        self.rate: dict[str, float] = {}

    def settings(self) -> dict:
        return {"smoothing": self.smoothing}

    def fit(self, train: TrainData) -> Self:
        pairs = train.require_pairs(self.name)
        self.prior = float(pairs["label"].mean()) if pairs.height else 0.5
        per_item = pairs.group_by("item_id").agg(pl.col("label").sum().alias("clicks"), pl.len().alias("n"))
        rate = (pl.col("clicks") + self.smoothing * self.prior) / (pl.col("n") + self.smoothing)
        self.rate = dict(per_item.select("item_id", rate.alias("p")).iter_rows())
        return self

    def p_clicks(self, samples: list[dict]) -> list[float]:
        return [float(self.rate.get(s["item_id"], self.prior)) for s in samples]
