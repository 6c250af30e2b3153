"""Several OpenAI-compatible endpoints serving one model, as one backend: least-loaded, with failover.

`recharness run ... --base-url URL1 --base-url URL2` (or `--base-url urls.txt`, one URL a line,
`#` comments) spreads the requests over a pool of servers (vLLM, SGLang, TGI, llama.cpp) that
serve the same model:

- each request goes to the healthy endpoint with the fewest requests in flight (ties in turn);
- a transport failure, a 5xx, a 429 or a timeout takes that endpoint out and the request is
  tried again on another one (up to `max_attempts` tries in all; the runner still writes each
  sample exactly once); a 4xx or an unreadable answer is about the request, not the endpoint;
- an endpoint that is out is probed (`GET /models`) after a back-off that doubles while it keeps
  failing (Retry-After honoured); any answer below 500 brings it back;
- when no endpoint is left: every one refusing connections `max_connect_failures` times in a
  row stops the run (ServerUnreachable, as for one endpoint); every one failing `max_attempts`
  times in a row leaves the waiting samples undone (TransientError `endpoints_down`), for a rerun;
- totals per endpoint (requests, failures by kind, request-seconds, tokens, probes) for the
  run summary: `endpoint_lines(backend)`.

The identity (cache key, `model` of each record) is the model and decoding setup, not the
endpoints: an answer does not depend on which server gave it, and a pool that grows or shrinks
keeps its cache. API keys stay inside the per-endpoint clients; URLs are shown redacted.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from recharness.core.errors import ConfigError, SampleError, ServerUnreachable, TransientError
from recharness.core.types import Completion, GenerationParams, Messages, OptionScores
from recharness.models.base import ModelBackend
from recharness.models.openai_compat import MAX_WAIT_S, OpenAICompatibleBackend, is_loopback, redact_url

T = TypeVar("T")

#: seconds; the longest an endpoint stays out between two probes (unless Retry-After asks for more)
MAX_DOWN_S = 30.0
#: transport failures of a reply that came (an unreadable body, no choices, an error inside a 200): the first
#: is retried without taking the endpoint out of rotation, a second in a row takes it out like any failure
ANSWERED_BADLY = ("bad_response", "empty_choices", "error_choice")
#: seconds a probe (`GET /models`) may take
PROBE_TIMEOUT_S = 5.0


@dataclass(eq=False)
class Endpoint:
    """One server of the pool: its client, its load and health, its totals."""

    index: int
    url: str  # redacted, safe to show
    client: OpenAICompatibleBackend
    inflight: int = 0
    requests: int = 0
    answered: int = 0
    failures: Counter = field(default_factory=Counter)
    #: per-sample errors the endpoint answered with (4xx, unreadable body): not its fault
    errors: Counter = field(default_factory=Counter)
    seconds: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    probes: int = 0
    taken_out: int = 0
    healthy: bool = True
    down_until: float = 0.0
    #: failure events in a row (a take-out or a failed probe); an answer resets it
    streak: int = 0
    connect_streak: int = 0
    #: replies in a row that came but could not be read (`ANSWERED_BADLY`): one is a glitch, two take it out
    bad_replies: int = 0
    last_failure: str | None = None
    prober: asyncio.Task | None = None

    def totals(self) -> dict:
        return {"url": self.url, "requests": self.requests, "answered": self.answered,
                "failures": sum(self.failures.values()), "failures_by_kind": dict(sorted(self.failures.items())),
                "errors": sum(self.errors.values()), "seconds": round(self.seconds, 3),
                "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "tokens": self.prompt_tokens + self.completion_tokens, "probes": self.probes,
                "taken_out": self.taken_out, "healthy": self.healthy}


class EndpointPool(ModelBackend):
    backend = "openai"

    def __init__(
        self,
        model: str,
        base_urls: list[str],
        *,
        api_key_env: str = "OPENAI_API_KEY",
        max_concurrency: int | None = None,
        max_attempts: int = 5,
        timeout_s: float = 300.0,
        extra_body: dict | None = None,
        backoff_s: float = 1.0,
        max_connect_failures: int = 3,
        probe_timeout_s: float = PROBE_TIMEOUT_S,
    ):
        super().__init__(model)
        urls = list(dict.fromkeys(u.strip() for u in base_urls if u and u.strip()))
        if not urls:
            raise ConfigError("no endpoint URL given for the pool")
        if max_attempts < 1:
            raise ConfigError(f"--max-attempts must be at least 1, got {max_attempts}")
        if max_concurrency is not None and max_concurrency < 1:
            raise ConfigError(f"--concurrency must be at least 1, got {max_concurrency}")
        # One decoding setup for every endpoint, so an answer never depends on which one gave it
        # (one endpoint alone sends repeat_penalty only to loopback servers; a pool only when all are).
        self.extra_body = dict(extra_body) if extra_body is not None else (
            {"repeat_penalty": 1.0} if all(is_loopback(u) for u in urls) else {})
        #: requests in flight over the whole pool (the runner's worker count): 8 per endpoint unless given
        self.max_concurrency = max_concurrency or 8 * len(urls)
        self.latency_under_load = True  # as each endpoint's requests: the server's queue counts in a latency
        self.max_attempts = max_attempts
        self.backoff_s = backoff_s
        self.max_connect_failures = max_connect_failures
        self.probe_timeout_s = min(probe_timeout_s, timeout_s)
        # Each endpoint client tries once and never gives up on its own: the pool retries elsewhere. Its posts
        # leave from this process (inline): a pool is for servers that take seconds an answer, where a transport
        # process per endpoint would be processes for no gain.
        self.endpoints = [
            Endpoint(i, redact_url(u), OpenAICompatibleBackend(
                model, base_url=u, api_key_env=api_key_env, max_concurrency=self.max_concurrency, max_attempts=1,
                timeout_s=timeout_s, extra_body=dict(self.extra_body), backoff_s=backoff_s,
                max_connect_failures=None, transport="inline"))
            for i, u in enumerate(urls)]
        #: tries that failed and were made again (by kind), for the run summary's transport retries
        self.retries: Counter[str] = Counter()
        self._rr = 0
        self._changed: asyncio.Event | None = None
        self._closed = False

    def identity(self) -> dict:
        ident = {"backend": self.backend, "model": self.model, "base_url": "pool"}
        if self.extra_body:
            ident["extra_body"] = self.extra_body
        return ident

    # -- choosing an endpoint -------------------------------------------------------------------
    def _notify(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    async def _acquire(self) -> Endpoint:
        """The healthy endpoint with the fewest requests in flight (ties in turn); waits while none is up."""
        while True:
            up = [e for e in self.endpoints if e.healthy]
            if up:
                low = min(e.inflight for e in up)
                n = len(self.endpoints)
                ep = min((e for e in up if e.inflight == low), key=lambda e: (e.index - self._rr) % n)
                self._rr = ep.index + 1
                ep.inflight += 1
                return ep
            self._give_up_if_hopeless()
            if self._changed is None:
                self._changed = asyncio.Event()
            try:  # a probe's outcome wakes us; the timeout is only a safety net
                await asyncio.wait_for(self._changed.wait(), timeout=1.0)
            except TimeoutError:
                pass

    def _give_up_if_hopeless(self) -> None:
        eps = self.endpoints
        if all(e.connect_streak >= self.max_connect_failures for e in eps):
            raise ServerUnreachable(
                f"connection refused by every endpoint of the pool ({', '.join(e.url for e in eps)}; "
                f"{self.max_connect_failures} tries in a row each): are the servers running and are the URLs right?")
        if all(e.streak >= self.max_attempts for e in eps):
            raise TransientError("endpoints_down", f"all {len(eps)} endpoints of {self.name} keep failing (" + "; ".join(
                f"{e.url}: {e.last_failure} ×{e.streak}" for e in eps) + ")")

    def _down_for(self, streak: int, retry_after: float | None) -> float:
        wait = min(MAX_DOWN_S, self.backoff_s * 2 ** (streak - 1))
        return max(wait, min(MAX_WAIT_S, retry_after)) if retry_after else wait

    def _failed(self, ep: Endpoint, kind: str, retry_after: float | None) -> None:
        ep.failures[kind] += 1
        ep.last_failure = kind
        if not ep.healthy:  # a request sent before it was taken out: counted, not a new failure event
            return
        ep.healthy = False
        ep.taken_out += 1
        ep.streak += 1
        ep.connect_streak = ep.connect_streak + 1 if kind == "connect" else 0
        ep.down_until = time.monotonic() + self._down_for(ep.streak, retry_after)
        if ep.prober is None and not self._closed:
            ep.prober = asyncio.get_running_loop().create_task(self._probe_loop(ep))
        self._notify()

    async def _probe_loop(self, ep: Endpoint) -> None:
        try:
            while not ep.healthy and not self._closed:
                await asyncio.sleep(max(0.0, ep.down_until - time.monotonic()))
                kind = await self._probe(ep)
                ep.probes += 1
                if kind is None:
                    ep.healthy = True  # back in; its streak resets at its next answer
                else:
                    ep.streak += 1
                    ep.connect_streak = ep.connect_streak + 1 if kind == "connect" else 0
                    ep.last_failure = kind
                    ep.down_until = time.monotonic() + self._down_for(ep.streak, None)
                self._notify()
        finally:
            ep.prober = None

    async def _probe(self, ep: Endpoint) -> str | None:
        """None when the server answers below 500, else the failure kind."""
        return await ep.client.probe(self.probe_timeout_s)

    # -- one request, with failover -------------------------------------------------------------
    async def _call(self, op: Callable[[OpenAICompatibleBackend], Awaitable[T]]) -> T:
        tried: list[str] = []
        for attempt in range(1, 1 << 30):
            ep = await self._acquire()
            ep.requests += 1
            t = time.perf_counter()
            try:
                result = await op(ep.client)
            except TransientError as e:
                if e.kind in ANSWERED_BADLY and ep.bad_replies == 0:  # one unreadable reply: a glitch, kept in
                    ep.bad_replies += 1
                    ep.errors[e.kind] += 1
                else:  # down, or answering badly again: out of rotation until a probe passes (with backoff)
                    ep.bad_replies = 0
                    self._failed(ep, e.kind, getattr(e, "retry_after_s", None))
                tried.append(f"{ep.url}: {e.kind}")
                if attempt >= self.max_attempts:
                    raise TransientError(e.kind, f"{self.name}: gave up after {attempt} tries on the pool ("
                                         + "; ".join(tried) + ")") from None
                self.retries[e.kind] += 1
                continue
            except SampleError as e:
                ep.errors[e.kind] += 1
                raise
            finally:
                ep.inflight -= 1
                ep.seconds += time.perf_counter() - t
            ep.answered += 1
            ep.bad_replies = 0
            if ep.healthy:
                ep.streak = ep.connect_streak = 0
            if isinstance(result, Completion):
                ep.prompt_tokens += result.prompt_tokens or 0
                ep.completion_tokens += result.completion_tokens or 0
            return result
        raise AssertionError("unreachable")

    async def agenerate(self, messages: Messages, params: GenerationParams) -> Completion:
        # its latency is the answering endpoint's try alone, as one endpoint leaves out its failed tries
        return await self._call(lambda b: b.agenerate(messages, params))

    async def ascore_options(self, messages: Messages, options: list[str]) -> OptionScores:
        return await self._call(lambda b: b.ascore_options(messages, options))

    async def aclose(self) -> None:
        self._closed = True
        probers = [e.prober for e in self.endpoints if e.prober is not None]
        for p in probers:
            p.cancel()
        await asyncio.gather(*probers, return_exceptions=True)
        for e in self.endpoints:
            await e.client.aclose()

    def totals(self) -> list[dict]:
        """Per endpoint: requests, answers, failures (by kind), request-seconds, tokens, probes, state."""
        return [e.totals() for e in self.endpoints]


def endpoint_totals(backend: ModelBackend) -> list[dict]:
    """The pool's per-endpoint totals; [] for any other backend."""
    return backend.totals() if isinstance(backend, EndpointPool) else []


def endpoint_lines(backend: ModelBackend) -> list[str]:
    """Lines for the run summary (one per endpoint, URLs redacted); [] for any other backend."""
    rows = endpoint_totals(backend)
    if not rows:
        return []
    out = [f"endpoints: {len(rows)} (least-loaded, failover)"]
    for r in rows:
        fails = f"{r['failures']} failures"
        if r["failures_by_kind"]:
            fails += " (" + ", ".join(f"{k}: {v}" for k, v in r["failures_by_kind"].items()) + ")"
        extra = f", {r['errors']} per-sample errors" if r["errors"] else ""
        extra += f", taken out {r['taken_out']}×, {r['probes']} probes" if r["taken_out"] else ""
        state = "" if r["healthy"] else " — out"
        out.append(f"  {r['url']}: {r['requests']} requests, {r['answered']} answered, {fails}{extra}, "
                   f"{r['seconds']:.1f} request-s, {r['tokens']} tokens{state}")
    return out
