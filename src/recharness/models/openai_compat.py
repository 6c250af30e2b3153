"""Any OpenAI-compatible chat endpoint: vLLM, llama.cpp server, Ollama, OpenAI, DeepSeek.

The API key is read from an environment variable at call time and kept only
inside the client object: it never enters identities, caches, logs or results.
"""

from __future__ import annotations

import asyncio
import math
import os
import random
import time

import openai

from recharness.errors import ConfigError, RecharnessError
from recharness.models.base import Completion, GenerationParams, Messages, ModelBackend, OptionScores

RETRYABLE = (openai.RateLimitError, openai.APITimeoutError, openai.APIConnectionError, openai.InternalServerError)


class OpenAICompatibleBackend(ModelBackend):
    backend = "openai"

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        max_concurrency: int = 8,
        max_retries: int = 5,
        timeout_s: float = 600.0,
        extra_body: dict | None = None,
    ):
        super().__init__(model)
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
        self.api_key_env = api_key_env
        self.max_concurrency = max_concurrency
        self.max_retries = max_retries
        self.local = any(h in self.base_url for h in ("://127.", "://localhost", "://[::1]"))
        # llama.cpp's server defaults repeat_penalty to 1.1 where in-process llama.cpp, vLLM and
        # OpenAI use none; asking for 1.0 keeps greedy answers identical across backends.
        # Remote APIs may reject unknown fields, so this is only sent to loopback servers.
        self.extra_body = extra_body if extra_body is not None else ({"repeat_penalty": 1.0} if self.local else {})
        key = os.environ.get(api_key_env)
        if not key:
            if self.local:
                key = "sk-local"  # local servers accept any key
            else:
                raise ConfigError(f"set the API key in the environment variable {api_key_env} for {self.base_url}")
        # The SDK's own retries are off: ours add jitter and count toward one bound.
        self._client = openai.AsyncOpenAI(base_url=self.base_url, api_key=key, max_retries=0, timeout=timeout_s)

    def identity(self) -> dict:
        ident = {"backend": self.backend, "model": self.model, "base_url": self.base_url}
        if self.extra_body:
            ident["extra_body"] = self.extra_body
        return ident

    _base_delay = 1.0

    async def _call(self, **kwargs):
        delay = self._base_delay
        for attempt in range(self.max_retries + 1):
            try:
                return await self._client.chat.completions.create(model=self.model, **kwargs)
            except RETRYABLE as e:
                if attempt == self.max_retries:
                    raise RecharnessError(f"{self.name} at {self.base_url}: gave up after {attempt + 1} tries: {type(e).__name__}: {e}") from None
                await asyncio.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, 30.0)
            except openai.APIStatusError as e:
                raise RecharnessError(f"{self.name} at {self.base_url}: HTTP {e.status_code}: {e.message}") from None

    async def agenerate(self, messages: Messages, params: GenerationParams) -> Completion:
        t0 = time.perf_counter()
        resp = await self._call(
            messages=messages,
            max_tokens=params.max_tokens,
            temperature=params.temperature,
            top_p=params.top_p,
            seed=params.seed,
            stop=list(params.stop) or None,
            extra_body=self.extra_body or None,
        )
        latency = time.perf_counter() - t0
        choice = resp.choices[0]
        usage = resp.usage
        return Completion(
            text=choice.message.content or "",
            prompt_tokens=getattr(usage, "prompt_tokens", None),
            completion_tokens=getattr(usage, "completion_tokens", None),
            latency_s=latency,
            finish_reason=choice.finish_reason,
        )

    async def ascore_options(self, messages: Messages, options: list[str]) -> OptionScores:
        """P(option) from the first generated token's top log-probs, both spellings summed."""
        t0 = time.perf_counter()
        resp = await self._call(messages=messages, max_tokens=1, temperature=0.0, logprobs=True, top_logprobs=20,
                                extra_body=self.extra_body or None)
        lp = resp.choices[0].logprobs
        if lp is None or not lp.content:
            raise RecharnessError(f"{self.name} at {self.base_url} returned no log-probabilities")
        top = lp.content[0].top_logprobs or []
        return OptionScores(logprobs=option_logprobs(((t.token, t.logprob) for t in top), options),
                            latency_s=time.perf_counter() - t0)

    async def aclose(self) -> None:
        await self._client.close()


def option_logprobs(token_logprobs, options: list[str]) -> dict[str, float]:
    """Sum the probability of both spellings of an option token: "Yes" and " Yes"."""
    acc = {o: 0.0 for o in options}
    seen = set()
    for token, logprob in token_logprobs:
        if token in seen:
            continue
        seen.add(token)
        for o in options:
            if token == o or token == " " + o:
                acc[o] += math.exp(logprob)
    return {o: (math.log(p) if p > 0 else -math.inf) for o, p in acc.items()}
