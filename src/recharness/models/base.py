"""The one model interface every task uses: chat generation, option scoring, constrained ranking.

Backends are async so a remote server can be kept busy with bounded
concurrency; in-process backends run their blocking calls in a worker thread.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable

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
    #: True where a sample's latency is one request's time at a server while others are in flight (an HTTP
    #: server's queue counts in it): each answer records the concurrency it was asked at (`concurrency`)
    latency_under_load: bool = False

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


def option_first_tokens(encode: Callable[[str], list[int]], options: list[str], model: str = "the model") -> dict[str, set[int]]:
    """Each option's first token as an answer's first word, spelled without and with a leading space
    ("Yes", " Yes"), and its other casings that are one token ("yes", " YES"). A token two options share (SentencePiece spells " Yes" and " No" as the bare
    "▁" then the word) says nothing about which option is meant, so it counts for neither; an option
    left with no token of its own cannot be scored (an error, not P = 0.5)."""
    # other casings ("yes", "YES") too, as the OpenAI-compatible path sums them (`openai_compat.option_logprobs`),
    # where they are one token each (a casing split into pieces would lend its first piece to other words)
    firsts = {o: {t[0] for t in (encode(o), encode(" " + o)) if t}
              | {t[0] for c in {o.lower(), o.upper(), o.capitalize()} - {o} for t in (encode(c), encode(" " + c))
                 if len(t) == 1} for o in options}
    shared = {t for t, n in Counter(t for ids in firsts.values() for t in ids).items() if n > 1}
    own = {o: ids - shared for o, ids in firsts.items()}
    empty = [o for o, ids in own.items() if not ids]
    if empty:
        raise ConfigError(f"{model}: answer option(s) {', '.join(map(repr, empty))} begin with no token of their own "
                          f"(every first token is shared with another option), so their log-probabilities cannot be told apart")
    return own
