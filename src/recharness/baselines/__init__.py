"""Conventional reference recommenders, scored by the same scorers as the LLMs.

Each is a `Baseline` (fit on `TrainData`, predict prediction records) registered in `BASELINES`
with the tasks it serves ("suite:task") and whether it learns from the training data, so the
`train` stage and the tasks' on-the-fly `references` fit and ask them the same way.
"""

from __future__ import annotations

import time

from recharness.baselines.base import Baseline, Ranker, TrainData, training_rows
from recharness.baselines.popularity import PopularityRanker
from recharness.baselines.random_ranker import RandomRanker
from recharness.registry import Registry

BASELINES: Registry[type[Baseline]] = Registry("baseline")
_RANKING = ("llmrec:sequential", "llmrec:direct")
BASELINES.add("popularity", PopularityRanker, tasks=_RANKING, trainable=True,
              description="most interacted items on the training part (each user's last item held out)")
BASELINES.add("random", RandomRanker, tasks=_RANKING, trainable=False,
              description="uniform random items, seeded: the chance level")


def serving(suite: str, task: str) -> list[str]:
    """The registered baselines that answer `task` of `suite`, in registration order (the row order)."""
    return [n for n in BASELINES if f"{suite}:{task}" in BASELINES.meta(n).get("tasks", ())]


def fit(name: str, train: TrainData, seed: int = 0) -> tuple[Baseline, float]:
    """The named baseline fitted on `train`, and the seconds fitting took."""
    t0 = time.perf_counter()
    model = BASELINES.get(name).create(seed=seed).fit(train)
    return model, time.perf_counter() - t0


def reference_records(suite: str, task: str, dataset, samples: list[dict], seed: int = 0) -> dict[str, dict[str, dict]]:
    """{baseline: {sample id: record}}: the task's registered baselines fitted and asked on the fly."""
    names = serving(suite, task)
    train = TrainData.leave_last_out(dataset) if names else None
    return {name: fit(name, train, seed)[0].predict(samples) for name in names}


__all__ = ["BASELINES", "Baseline", "PopularityRanker", "RandomRanker", "Ranker", "TrainData", "fit",
           "reference_records", "serving", "training_rows"]
