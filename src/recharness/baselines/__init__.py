"""Conventional reference recommenders, scored by the same scorers as the LLMs."""

from recharness.baselines.popularity import PopularityRanker
from recharness.baselines.random_ranker import RandomRanker

__all__ = ["PopularityRanker", "RandomRanker"]
