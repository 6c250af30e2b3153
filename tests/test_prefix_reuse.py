"""Option scoring reuses the KV cache for a shared prompt prefix, without changing the scores."""

from __future__ import annotations

import asyncio

import pytest

pytestmark = pytest.mark.llm

HISTORY = "The user watched, oldest first: Toy Story (1995); Heat (1995); Fargo (1996); Alien (1979)."


def prompt(candidate: str, history: str = HISTORY) -> list[dict]:
    return [{"role": "system", "content": "You predict whether a user will enjoy a movie. Answer Yes or No."},
            {"role": "user", "content": f"{history}\nWill the user enjoy {candidate}? Answer Yes or No."}]


def test_prefix_reuse_gives_the_same_probabilities(smollm2_path):
    from recharness.models.llamacpp import LlamaCppBackend

    prompts = [prompt(c) for c in ("Casablanca (1942)", "Jaws (1975)", "Heat (1995)")]
    prompts.append(prompt("Jaws (1975)", history="The user watched: Bambi (1942)."))  # no shared history
    with_reuse = LlamaCppBackend(smollm2_path, n_ctx=2048, reuse_prefix=True)
    without = LlamaCppBackend(smollm2_path, n_ctx=2048, reuse_prefix=False)

    async def scores(backend):
        out = []
        for p in prompts:
            out.append((await backend.ascore_options(p, ["Yes", "No"])).probabilities()["Yes"])
        return out

    a, b = asyncio.run(scores(with_reuse)), asyncio.run(scores(without))
    assert max(abs(x - y) for x, y in zip(a, b)) <= 1e-4, (a, b)
    llm = with_reuse.load()
    # the last prompt shares only the system turn with the one before: the cache was cut back, not reset
    assert 0 < LlamaCppBackend._reusable_prefix(llm, llm.tokenize(
        LlamaCppBackend.chat_prompt(llm, prompts[0]).encode(), add_bos=False, special=True)) < llm.n_tokens
