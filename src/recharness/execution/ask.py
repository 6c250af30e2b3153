"""One way to ask a model a question: generate → parse → retry with a format reminder.

Used by the runner for every `generate` task and by everything that drives a
model itself (the LLM judge, LLM query phrasing, PerRecBench's pointwise /
pairwise / listwise methods), so retries, token and latency totals and cache
flags are counted the same way everywhere.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from recharness.core.types import Completion, GenerationParams, Messages, Parsed, Prediction


@dataclass
class Asked:
    """The outcome of one question: the last parse and every attempt's completion."""

    parsed: Parsed
    completions: list[Completion] = field(default_factory=list)

    @property
    def outputs(self) -> list[str]:
        return [c.text for c in self.completions]

    @property
    def attempts(self) -> int:
        return len(self.completions)

    @property
    def latency_s(self) -> float:
        return sum(c.latency_s for c in self.completions)

    @property
    def prompt_tokens(self) -> int:
        return sum(c.prompt_tokens or 0 for c in self.completions)

    @property
    def completion_tokens(self) -> int:
        return sum(c.completion_tokens or 0 for c in self.completions)

    @property
    def cached(self) -> bool:
        return all(c.cached for c in self.completions)

    def prediction(self, params: GenerationParams | None = None) -> Prediction:
        """The predictions-file record of a one-question sample."""
        p = self.parsed
        return Prediction(output=self.outputs[-1], parsed=p.value, valid=p.valid, error=p.error,
                          attempts=self.attempts, latency_s=self.latency_s, prompt_tokens=self.prompt_tokens,
                          completion_tokens=self.completion_tokens, cached=self.cached,
                          params=params.model_dump(mode="json") if params is not None else None,
                          extra={"retry_outputs": self.outputs[:-1]})


async def ask(model, messages: Messages, params: GenerationParams, parse: Callable[[str], Parsed], *,
              reminder: str | None, max_retries: int) -> Asked:
    """Ask `model` (a execution.executor.CachedModel); re-ask with `reminder` after an unparseable answer, at most
    `max_retries` times (never when `reminder` is None). The reminder turn follows the model's own answer."""
    msgs = list(messages)
    asked = Asked(parsed=Parsed(None, False, "not asked"))
    for attempt in range(max_retries + 1):
        c = await model.generate(msgs, params)
        asked.completions.append(c)
        asked.parsed = parse(c.text)
        if asked.parsed.valid or reminder is None:
            break
        if attempt < max_retries:
            msgs = msgs + [{"role": "assistant", "content": c.text}, {"role": "user", "content": reminder}]
    return asked
