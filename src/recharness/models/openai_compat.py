"""Any OpenAI-compatible chat endpoint: vLLM, llama.cpp server, Ollama, OpenAI, DeepSeek.

The API key is read from an environment variable at call time and kept only
inside the client object: it never enters identities, caches, logs or results.
"""

from __future__ import annotations

import asyncio
import math
import os
import random
import re
import time
from collections import Counter
from email.utils import parsedate_to_datetime
from urllib.parse import urlsplit, urlunsplit

import openai

from recharness.errors import (
    ConfigError,
    SampleError,
    ServerUnreachable,
    TransientError,
    one_line,
)
from recharness.models.base import (
    Completion,
    GenerationParams,
    Messages,
    ModelBackend,
    OptionScores,
)

#: HTTP statuses worth retrying: rate limits, request timeouts, server-side failures
RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
#: seconds; the longest single wait, even when a server's Retry-After asks for more
MAX_WAIT_S = 120.0
_SECRET_KEY = re.compile(r"key|token|secret|password|sig", re.IGNORECASE)


def redact_url(url: str) -> str:
    """The URL without user:password (and key-like query values), safe for identities and logs."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "***@" + netloc.rsplit("@", 1)[1]
    pairs = [q.partition("=") for q in parts.query.split("&") if q]
    query = "&".join(k + (("=***" if _SECRET_KEY.search(k) else "=" + v) if eq else "") for k, eq, v in pairs)
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _refused(e: BaseException) -> bool:
    """Did the connection fail to open? (httpx's ConnectError; the SDK may bundle its own httpx.)"""
    cause = e.__cause__ or e.__context__
    return cause is not None and any(c.__name__ == "ConnectError" for c in type(cause).__mro__)


def is_loopback(url: str) -> bool:
    host = (urlsplit(url).hostname or "").lower()
    return host == "localhost" or host == "::1" or host.startswith("127.")


def retry_after_s(headers) -> float | None:
    """Seconds a server asked us to wait (Retry-After: seconds or HTTP date; retry-after-ms)."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    ra = headers.get("retry-after")
    if not ra:
        return None
    try:
        return max(0.0, float(ra))
    except ValueError:
        try:
            return max(0.0, parsedate_to_datetime(ra).timestamp() - time.time())
        except (TypeError, ValueError):
            return None


class OpenAICompatibleBackend(ModelBackend):
    backend = "openai"

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        max_concurrency: int = 8,
        max_attempts: int = 5,
        timeout_s: float = 300.0,
        extra_body: dict | None = None,
        backoff_s: float = 1.0,
        max_connect_failures: int = 3,
    ):
        super().__init__(model)
        if max_attempts < 1:
            raise ConfigError(f"--max-attempts must be at least 1, got {max_attempts}")
        if timeout_s <= 0:
            raise ConfigError(f"--timeout must be positive, got {timeout_s}")
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
        self.public_url = redact_url(self.base_url)
        self.api_key_env = api_key_env
        self.max_concurrency = max_concurrency
        self.max_attempts = max_attempts
        self.timeout_s = timeout_s
        self.backoff_s = backoff_s
        self.max_connect_failures = max_connect_failures
        self.local = is_loopback(self.base_url)
        # llama.cpp's server defaults repeat_penalty to 1.1 where in-process llama.cpp, vLLM and
        # OpenAI use none; asking for 1.0 keeps greedy answers identical across backends.
        # Remote APIs may reject unknown fields, so this is only sent to loopback servers.
        self.extra_body = extra_body if extra_body is not None else ({"repeat_penalty": 1.0} if self.local else {})
        #: transport retries by kind (429, 5xx, timeout, reset, bad_response), for the run summary
        self.retries: Counter[str] = Counter()
        self._connect_failures = 0
        key = os.environ.get(api_key_env)
        if not key:
            if self.local:
                key = "sk-local"  # local servers accept any key
            else:
                raise ConfigError(f"set the API key in the environment variable {api_key_env} for {self.public_url}")
        # The SDK's own retries are off: ours honour Retry-After, add jitter and count toward one bound.
        self._client = openai.AsyncOpenAI(base_url=self.base_url, api_key=key, max_retries=0, timeout=timeout_s)

    def identity(self) -> dict:
        ident = {"backend": self.backend, "model": self.model, "base_url": self.public_url}
        if self.extra_body:
            ident["extra_body"] = self.extra_body
        return ident

    def _where(self) -> str:
        return f"{self.name} at {self.public_url}"

    def _classify(self, e: Exception) -> tuple[str, float | None] | None:
        """(kind, server-requested wait) for a failure worth retrying; None for a permanent one."""
        if isinstance(e, openai.APITimeoutError):
            return "timeout", None
        if isinstance(e, openai.APIConnectionError):
            return ("connect" if _refused(e) else "reset"), None
        if isinstance(e, openai.APIStatusError):
            if e.status_code in RETRY_STATUS:
                return f"http_{e.status_code}", retry_after_s(e.response.headers)
            return None
        if isinstance(e, (ValueError, openai.APIResponseValidationError)):  # bad JSON / bytes in the body
            return "bad_response", 0.0
        return None

    async def _call(self, **kwargs):
        delay = self.backoff_s
        bad_bodies = 0
        for attempt in range(1, self.max_attempts + 1):
            try:
                resp = await self._client.chat.completions.create(model=self.model, **kwargs)
                self._connect_failures = 0
                if not getattr(resp, "choices", None):
                    raise SampleError("empty_choices", f"{self._where()} answered with no choices")
                return resp
            except SampleError:
                raise
            except Exception as e:  # noqa: BLE001 - sorted into retry / per-sample / fatal below
                how = self._classify(e)
                if how is None:
                    status = getattr(e, "status_code", None)
                    kind = f"http_{status}" if status else type(e).__name__
                    raise SampleError(kind, f"{self._where()}: {kind}: {one_line(getattr(e, 'message', e))}") from None
                kind, wait = how
                if kind == "connect":
                    self._connect_failures += 1
                    if self._connect_failures >= self.max_connect_failures:
                        raise ServerUnreachable(
                            f"connection refused by {self.public_url} ({self._connect_failures} tries in a row): "
                            "is the server running and is the URL right?") from None
                if kind == "bad_response":
                    bad_bodies += 1
                    if bad_bodies > 1:  # the same garbage twice: the answer itself is broken
                        raise SampleError("bad_response", f"{self._where()}: unreadable response body: {one_line(e)}") from None
                if attempt == self.max_attempts:
                    raise TransientError(kind, f"{self._where()}: gave up after {attempt} tries: {kind}") from None
                self.retries[kind] += 1
                backoff = delay * (0.5 + random.random())
                delay = min(delay * 2, 30.0)
                await asyncio.sleep(min(MAX_WAIT_S, max(backoff if wait is None else wait, 0.0)))

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
        message = getattr(choice, "message", None)
        return Completion(
            text=(getattr(message, "content", None) or "") if message is not None else "",
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
            raise SampleError("no_logprobs", f"{self._where()} returned no log-probabilities")
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
