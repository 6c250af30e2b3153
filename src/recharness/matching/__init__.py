"""Turn free LLM text into catalog items: parse, normalise, match, detect refusals."""

from recharness.matching.catalog import DEFAULT_THRESHOLD, CatalogMatcher, Match
from recharness.matching.normalize import NormalizedTitle, fold, normalize_title, split_year
from recharness.matching.parse import Candidate, parse_candidates, parse_recommendations, strip_reasoning
from recharness.matching.refusal import has_refusal_cue, is_refusal

__all__ = [
    "Candidate",
    "DEFAULT_THRESHOLD",
    "CatalogMatcher",
    "Match",
    "NormalizedTitle",
    "fold",
    "has_refusal_cue",
    "is_refusal",
    "normalize_title",
    "parse_candidates",
    "parse_recommendations",
    "split_year",
    "strip_reasoning",
]
