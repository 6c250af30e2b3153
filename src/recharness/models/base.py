"""The one model interface every task uses: chat generation and option scoring.

Backends are async so a remote server can be kept busy with bounded
concurrency; in-process backends run their blocking calls in a worker thread.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from recharness.core.types import Completion, GenerationParams, Messages, OptionScores


class ModelBackend(ABC):
    """A chat model. Subclasses implement `agenerate` and, where they can, `ascore_options`."""

    backend: str = "base"
    #: how many requests may be in flight at once; the runner honours it
    max_concurrency: int = 1

    def __init__(self, model: str):
        self.model = model

    @property
    def name(self) -> str:
        return f"{self.backend}:{self.model}"

    def identity(self) -> dict:
        """What makes answers comparable: goes into results and the cache key; never secrets."""
        return {"backend": self.backend, "model": self.model}

    @abstractmethod
    async def agenerate(self, messages: Messages, params: GenerationParams) -> Completion: ...

    async def ascore_options(self, messages: Messages, options: list[str]) -> OptionScores:
        raise NotImplementedError(f"{self.name} cannot score answer options (no log-probabilities)")

    async def aclose(self) -> None:
        return None
