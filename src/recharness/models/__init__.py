"""Model backends behind one interface: generate chat text, score answer options."""

from recharness.models.base import Completion, GenerationParams, ModelBackend, OptionScores
from recharness.models.registry import BACKENDS, DEFAULT_MODEL, TEST_MODEL, resolve_model

__all__ = ["Completion", "GenerationParams", "ModelBackend", "OptionScores", "BACKENDS", "DEFAULT_MODEL", "TEST_MODEL", "resolve_model"]
