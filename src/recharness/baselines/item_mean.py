"""Item click-through rate on the training pairs: the non-personalised CTR reference a DLRM must beat."""

from __future__ import annotations

from typing import Self

import polars as pl

from recharness.baselines.base import Baseline, TrainData


class ItemMeanCtr(Baseline):
    """P(click | item) = (clicks + m * global CTR) / (pairs + m) over the training pairs: an item seen
    in few pairs is pulled towards the global rate, an unseen one gets it (m = `smoothing`)."""

    name = "item_mean"
    #: `train --tune N`: the shrinkage m on a log scale around its default, searched by validation AUC like the
    #: DLRMs it is compared with (the same budget of trials, the same validation pairs)
    space = {"smoothing": ("log", 0.01, 10_000.0)}
    #: m when none is given: one constant for the constructor and `defaults()` (tuning's trial 0), so they cannot part
    DEFAULT_SMOOTHING = 10.0

    def __init__(self, smoothing: float = DEFAULT_SMOOTHING):
        if not smoothing > 0:
            raise ValueError(f"item_mean: smoothing must be > 0, got {smoothing!r}")
        self.smoothing = float(smoothing)
        self.prior = 0.5
        self.rate: dict[str, float] = {}

    @classmethod
    def defaults(cls) -> dict:
        return {"smoothing": cls.DEFAULT_SMOOTHING}

    @classmethod
    def create(cls, seed: int = 0, **params) -> Self:
        """Deterministic: the seed changes nothing."""
        return cls(**params)

    @classmethod
    def tuning_objective(cls, train: TrainData, seed: int):
        """AUC of the click rates on the validation pairs the DLRMs are tuned on, fitted without them
        (`baselines.tuning.click_objective`); never a test pair."""
        from recharness.baselines.tuning import click_objective

        return click_objective(train, seed)

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
