"""llama-cpp-python's private parts that `models.llamacpp` and `models.cbs` need, reached in one place.

Its own module so that the backend (`llamacpp`) and the beam search over llama.cpp (`cbs.LlamaBeams`),
which the backend runs for constrained requests, both read it without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any


@dataclass(frozen=True)
class LlamaNative:
    """A loaded `llama_cpp.Llama`'s native parts, which llama-cpp-python keeps private."""

    #: the native model (`llm._model`, a `llama_cpp._internals.LlamaModel`): its weights, for a second context
    model: Any
    #: the native context (`llm._ctx`): its KV cache (trimmed to a reused prefix) and its last logits
    context: Any
    #: the module `llama_cpp._internals` (`LlamaContext`, `LlamaBatch`)
    internals: ModuleType


def llama_native(llm) -> LlamaNative:
    """The one place that reaches into llama-cpp-python's private attributes. Why: its public `Llama`
    cannot trim its KV cache to a shared prompt prefix, read the last logits without `logits_all=True`
    (a copy of every position's logits), or open a second context on the same loaded weights (the
    batched beams of `cbs.LlamaBeams`); `_model`, `_ctx` and `_internals` can. A llama-cpp-python
    release that renames them is fixed here alone."""
    from llama_cpp import _internals

    return LlamaNative(model=llm._model, context=llm._ctx, internals=_internals)
