"""The one model interface every task uses: chat generation and option scoring.

Backends are async so a remote server can be kept busy with bounded
concurrency; in-process backends run their blocking calls in a worker thread.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field

from pydantic import BaseModel, ConfigDict, Field

Messages = list[dict[str, str]]


class GenerationParams(BaseModel):
    """Decoding settings; part of the cache key, so two runs with equal params share answers."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_tokens: int = Field(256, ge=1, le=32768)
    temperature: float = Field(0.0, ge=0.0, le=5.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    seed: int = 0
    stop: tuple[str, ...] = ()


@dataclass
class Completion:
    text: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_s: float = 0.0
    finish_reason: str | None = None
    cached: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class OptionScores:
    """Log-probabilities of each answer option as the model's next output."""

    logprobs: dict[str, float]
    latency_s: float = 0.0
    cached: bool = False
    extra: dict = field(default_factory=dict)

    def probabilities(self) -> dict[str, float]:
        """Normalised over the options only (e.g. P(Yes) / (P(Yes) + P(No)))."""
        finite = [v for v in self.logprobs.values() if v > -math.inf]
        if not finite:
            return {k: 1.0 / len(self.logprobs) for k in self.logprobs}
        m = max(finite)
        exp = {k: (math.exp(v - m) if v > -math.inf else 0.0) for k, v in self.logprobs.items()}
        z = sum(exp.values())
        return {k: v / z for k, v in exp.items()}


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
