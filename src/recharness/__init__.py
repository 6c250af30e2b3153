"""recharness: benchmark LLMs as recommender systems beside conventional recommenders."""

__version__ = "0.1.0"
