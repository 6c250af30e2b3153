"""Model backends behind one interface: generate chat text, score answer options."""

from recharness.core.types import Completion, GenerationParams, OptionScores
from recharness.models.base import ModelBackend
from recharness.models.registry import BACKENDS, DEFAULT_MODEL, TEST_MODEL, resolve_model

__all__ = ["Completion", "GenerationParams", "ModelBackend", "OptionScores", "BACKENDS", "DEFAULT_MODEL", "TEST_MODEL", "resolve_model"]
