"""A fake model (as lm-evaluation-harness's DummyLM): instant, deterministic, no weights.

Every suite × task runs end to end with it in tests, so a new suite is covered
the day it is registered. Its answers are chosen by a hash of the prompt from
a few shapes that the suites' parsers meet in real runs — a numbered title
list, JSON ratings and rankings, a pairwise choice, a bare number, a refusal,
free text — so valid, invalid and retried answers all occur. It measures the
harness, never a model: its scores mean nothing.

    --model fake            (or fake:NAME to run two distinct fake rows)
"""

from __future__ import annotations

import hashlib
import math

from recharness.core.types import Completion, GenerationParams, Messages, OptionScores
from recharness.models.base import ModelBackend

ANSWERS = (
    "1. Toy Story (1995)\n2. Heat (1995)\n3. Fargo (1996)\n4. Casablanca (1942)\n5. Alien (1979)",
    '{"predicted_rating": 4}',
    '{"predicted_ranking": [2, 1, 3, 4]}',
    "[User A]",
    "4",
    "1, 2, 3, 4, 5, 6, 7, 8, 9, 10",
    "I'm sorry, there are no movies that match all of these conditions.",
    "The user enjoyed it because it matches the genres they rate highest.",
    '{"faithfulness": 4, "personalization": 3, "rationale": "close to the review"}',
)


def _hash(messages: Messages, salt: str) -> int:
    text = salt + "\0" + "\n".join(f"{m.get('role')}:{m.get('content')}" for m in messages)
    return int.from_bytes(hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:8], "big")


class FakeBackend(ModelBackend):
    backend = "fake"
    max_concurrency = 8

    def __init__(self, model: str = "fake"):
        super().__init__(model or "fake")

    async def agenerate(self, messages: Messages, params: GenerationParams) -> Completion:
        text = ANSWERS[_hash(messages, self.model) % len(ANSWERS)]
        words = text.split()[: max(1, params.max_tokens)]
        text = " ".join(words) if len(words) < len(text.split()) else text
        return Completion(text=text, prompt_tokens=sum(len(str(m.get("content", "")).split()) for m in messages),
                          completion_tokens=len(words), latency_s=0.0, finish_reason="stop")

    async def ascore_options(self, messages: Messages, options: list[str]) -> OptionScores:
        h = _hash(messages, self.model)
        raw = [((h >> (8 * i)) & 0xFF) / 64.0 for i in range(len(options))]
        z = math.log(sum(math.exp(r) for r in raw))
        return OptionScores(logprobs={o: r - z for o, r in zip(options, raw)}, latency_s=0.0)
