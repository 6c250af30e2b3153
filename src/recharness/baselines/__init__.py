"""Conventional reference recommenders, scored by the same scorers as the LLMs.

`BASELINES` names them, so suites and the CLI look a reference method up by name.
"""

from recharness.baselines.popularity import PopularityRanker
from recharness.baselines.random_ranker import RandomRanker
from recharness.registry import Registry

BASELINES: Registry[type] = Registry("baseline")
BASELINES.add("popularity", PopularityRanker,
              description="most interacted items on the training part (each user's last item held out)")
BASELINES.add("random", RandomRanker,
              description="uniform random items, seeded: the chance level")

__all__ = ["BASELINES", "PopularityRanker", "RandomRanker"]
