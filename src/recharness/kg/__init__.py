"""Item knowledge graph: typed item-attribute relations with look-ups both ways."""

from recharness.kg.graph import Condition, ItemKG, RelationStats
from recharness.kg.schema import AMAZON_RELATIONS, LANGUAGE_NAMES, MOVIE_RELATIONS, RelationSpec, specs_for

__all__ = [
    "AMAZON_RELATIONS",
    "Condition",
    "ItemKG",
    "LANGUAGE_NAMES",
    "MOVIE_RELATIONS",
    "RelationSpec",
    "RelationStats",
    "specs_for",
]
