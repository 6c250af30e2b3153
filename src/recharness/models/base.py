"""The one model interface every task uses: chat generation, option scoring, constrained ranking.

Backends are async so a remote server can be kept busy with bounded
concurrency; in-process backends run their blocking calls in a worker thread.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from recharness.core.errors import ConfigError
from recharness.core.types import (
    Completion,
    ConstrainedRequest,
    GenerationParams,
    Messages,
    OptionScores,
    RankedSequences,
)


class ModelBackend(ABC):
    """A chat model. Subclasses implement `agenerate` and, where they can, `ascore_options` and
    `arank_constrained`."""

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
        """Log-probabilities of each of `options` as the answer (P(Yes)): needs the model's log-probs."""
        raise ConfigError(f"{self.name} cannot score answer options (no log-probabilities)")

    async def arank_constrained(self, request: ConstrainedRequest) -> RankedSequences:
        """The request's valid paths ranked by the model (CBS): needs next-token log-probs in process."""
        raise ConfigError(f"{self.name} cannot decode under a constraint (constrained beam search needs the "
                          "model in process: llamacpp or hf)")

    async def aclose(self) -> None:
        return None
