"""Any OpenAI-compatible chat endpoint: vLLM, llama.cpp server, Ollama, OpenAI, DeepSeek.

The wire protocol is one JSON POST, spoken here with httpx directly: the
openai SDK's request/response modelling costs ~0.4 ms of CPU per call, which
at zero server latency is most of a run's client time (benchmarks/results/
overhead.md). Failures are sorted into retryable (429, 5xx, timeouts, resets, an
unreadable or cut body, a reply with no choices: backoff between tries, Retry-After honoured),
configuration (401, 402, 403, 404, 405, 501, a redirect, a 400 or 422 saying the model is unknown or a
parameter unsupported, any 4xx saying the key is bad or the account out of credit or quota, a P(option)
request answered without log-probabilities: the run stops),
per-sample (any other 4xx) and fatal: one request refused a connection `max_connect_failures` tries
in a row (or all its `max_attempts`, if fewer; backoff between them) while no request got an
answer, whatever the concurrency. An error inside a 200 reply (`finish_reason: "error"`) is retried.
A sample's latency is its answered try alone: no failed try, backoff or Retry-After wait.

The API key is read from an environment variable at call time and kept only
inside the client object: it never enters identities, caches, logs or results.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import os
import random
import re
import time
from collections import Counter
from email.utils import parsedate_to_datetime
from urllib.parse import quote, urlsplit, urlunsplit

import httpx2 as httpx  # the maintained successor (pydantic/httpx2): its pool stays fast at 32+ connections

from recharness.core.errors import (
    ConfigError,
    EndpointRefused,
    SampleError,
    ServerUnreachable,
    TransientError,
    hide_userinfo,
    one_line,
)
from recharness.core.types import Completion, GenerationParams, Messages, OptionScores
from recharness.models.base import ModelBackend

#: HTTP statuses worth retrying: rate limits, request timeouts, and every server-side failure but 501
#: (`retryable`): 529 "overloaded", Cloudflare's 520-524 and a proxy's 507 are no answer either
RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
#: HTTP statuses that say the request is wrong as configured, for every sample alike: a bad key (401, 403),
#: an account out of credit (402), a wrong model or path (404), a method or feature the server lacks (405, 501).
#: The run stops: no answer.
CONFIG_STATUS = {401, 402, 403, 404, 405, 501}
#: an error body that says the account, not the request, is refused: a bad key answered with 400 (Gemini's
#: OpenAI-compatible endpoint), no credit or quota left (DeepSeek's "Insufficient Balance", OpenAI's 429
#: "insufficient_quota"): every request would fail alike, so the run stops (a rate limit is not this: it passes)
ACCOUNT_REFUSED = re.compile(
    r"insufficient[ _](?:balance|quota|credits?|funds)|\b(?:invalid|incorrect) api[ _-]?key"
    r"|\bapi[ _-]?key\b.{0,40}?\b(?:not valid|is invalid|invalid|expired)"
    r"|\bexceeded your (?:current )?quota|\bout of credits?\b|\bbilling (?:hard )?limit",
    re.IGNORECASE)
#: an error body that says the model asked for is not served: OpenAI answers it with 404 (a config status
#: already), other servers and proxies with 400 or 422 (vLLM, Ollama, LiteLLM wordings): every request would
#: fail alike, so it stops the run as a configuration failure, never an invalid answer
UNKNOWN_MODEL = re.compile(
    r"model_not_found|\b(?:unknown|no such) model\b|\binvalid model (?:name|id)\b"
    r"|\bmodel\b.{0,200}?(?:\bdoes not exist|\bdoesn't exist|\bnot found|\bis not (?:available|served))",
    re.IGNORECASE)
#: seconds; the longest single wait, even when a server's Retry-After asks for more
MAX_WAIT_S = 120.0
#: where the chat posts are made: "process" (a child process holding the httpx2 client: the default) or
#: "inline" (this process; `RECHARNESS_TRANSPORT=inline`)
TRANSPORTS = ("process", "inline")
_SECRET_KEY = re.compile(r"key|token|secret|pass|sig|auth|code|cred|sas", re.IGNORECASE)
#: query parameters shown as they are (they name a protocol version, never a secret)
_PUBLIC_QUERY = frozenset({"api-version", "api_version", "version"})


def redact_url(url: str) -> str:
    """The URL without user:password, safe for identities and logs. Query values are shown only for
    version parameters: a key-like name gives ***, any other value a short hash (so two endpoints that
    differ there keep different identities, and no secret under an unexpected name is shown). The #fragment
    is dropped: it is never sent to a server, and whatever it holds (a key?) is not shown."""
    try:
        parts = urlsplit(hide_userinfo(url))
    except ValueError as e:  # "Invalid IPv6 URL" (an unclosed bracket): the user's input, said once
        raise ConfigError(f"not a valid URL: {one_line(hide_userinfo(url), 120)} ({e})") from None
    pairs = [q.partition("=") for q in parts.query.split("&") if q]

    def shown(k: str, v: str) -> str:
        if k.lower() in _PUBLIC_QUERY or v == "***" or re.fullmatch(r"hidden-[0-9a-f]{8}", v):
            return v  # a version, or already redacted (redacting twice changes nothing)
        return "***" if _SECRET_KEY.search(k) else "hidden-" + hashlib.sha256(v.encode()).hexdigest()[:8]

    query = "&".join(k + ("=" + shown(k, v) if eq else "") for k, eq, v in pairs)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, ""))


def _hidden_query_values(url: str) -> list[str]:
    """The query values of `url` that `redact_url` does not show (all but versions), as written and decoded,
    longest first so a value containing another is blanked whole; values under 4 characters are left (blanking
    "1" would garble any text)."""
    from urllib.parse import unquote_plus

    values = set()
    for q in urlsplit(url).query.split("&"):
        k, eq, v = q.partition("=")
        if eq and k.lower() not in _PUBLIC_QUERY:
            values.update(x for x in (v, unquote_plus(v)) if len(x) >= 4)
    return sorted(values, key=len, reverse=True)


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
        max_connect_failures: int | None = 3,
        transport: str | None = None,
    ):
        super().__init__(model)
        if max_attempts < 1:
            raise ConfigError(f"--max-attempts must be at least 1, got {max_attempts}")
        if timeout_s <= 0:
            raise ConfigError(f"--timeout must be positive, got {timeout_s}")
        if base_url is not None and not base_url.strip():
            raise ConfigError("--base-url is empty: give the server's URL, e.g. http://127.0.0.1:8000/v1")
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
        self.public_url = redact_url(self.base_url)
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"--base-url {self.public_url}: an OpenAI-compatible server is reached over http:// or "
                              "https:// (e.g. http://127.0.0.1:8000/v1)")
        if parts.fragment or self.base_url.rstrip().endswith("#"):
            raise ConfigError(f"--base-url {self.public_url}#...: a URL's #fragment is never sent to the server, and "
                              "the request path would land in it: give the URL without it (a key goes in "
                              "OPENAI_API_KEY or --api-key-env)")
        try:
            parts.port  # noqa: B018 - raises on a port that is not a number in 0-65535
        except ValueError as e:
            raise ConfigError(f"--base-url {self.public_url}: {e} (a port is a number up to 65535, e.g. "
                              "http://127.0.0.1:8000/v1)") from None
        # credentials in the URL (http://user:KEY@host/v1) stay out of the request URL, where httpx would turn
        # them into Basic auth and drop the Bearer header servers expect: the KEY is the Bearer token instead
        url_key = parts.password or parts.username
        self.base_url = urlunsplit((parts.scheme, parts.netloc.rsplit("@", 1)[-1], parts.path, parts.query,
                                    parts.fragment))
        self.api_key_env = api_key_env
        self.max_concurrency = max_concurrency
        self.latency_under_load = True  # each request timed from send to reply, queue at the server included
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
        #: answers of any kind received so far: a request's run of refused connections is "in a row" only
        #: while this stays put (another request getting through means the server is up)
        self._responses = 0
        # a key written in the URL is this server's; the environment's (often OPENAI_API_KEY) never goes elsewhere
        key = url_key or os.environ.get(api_key_env)
        if not key:
            if self.local:
                key = "sk-local"  # local servers accept any key
            else:
                raise ConfigError(f"set the API key in the environment variable {api_key_env} for {self.public_url}")
        if any(not 32 < ord(c) < 127 for c in key):  # never shown: it is the key
            raise ConfigError(f"the API key for {self.public_url} (from {api_key_env} or the URL) holds a space, a "
                              "control or a non-ASCII character (a stray quote or newline?): HTTP headers carry "
                              "printable ASCII only")
        self._headers = {"authorization": f"Bearer {key}", "content-type": "application/json"}
        self._key = key  # only to scrub it from server text that echoes it (`_server_text`)
        #: the URL's query values `redact_url` hides (an Azure-style ?api-key=): scrubbed from server text too
        self._hidden_query = _hidden_query_values(self.base_url)
        self._url = self._endpoint("chat/completions")
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout_s), trust_env=not self.local,  # proxies from the environment, not for loopback
            limits=httpx.Limits(max_connections=max_concurrency, max_keepalive_connections=max_concurrency))
        self._slots = asyncio.Semaphore(max_concurrency)  # the inline posts' connections: a wait for one is untimed
        transport = transport or os.environ.get("RECHARNESS_TRANSPORT") or "process"
        if transport not in TRANSPORTS:
            raise ConfigError(f"RECHARNESS_TRANSPORT={transport!r}: one of {', '.join(TRANSPORTS)}")
        #: the chat posts' httpx2 client in a child process (`transport_process`), so the harness's work on
        #: one answer runs on another core than the next request; None: posts from this process
        self._pump = None
        if transport == "process":
            from recharness.models.transport_process import TransportProcess

            self._pump = TransportProcess(self._url, self._headers, timeout_s=timeout_s, trust_env=not self.local,
                                          concurrency=max_concurrency, secret=key)

    def _endpoint(self, tail: str) -> str:
        """`tail` under the base URL's path, its query kept (`...?api-version=...` as Azure's URLs have)."""
        parts = urlsplit(self.base_url)
        return urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/") + "/" + tail, parts.query, ""))

    def identity(self) -> dict:
        ident = {"backend": self.backend, "model": self.model, "base_url": self.public_url}
        if self.extra_body:
            ident["extra_body"] = self.extra_body
        return ident

    def _where(self) -> str:
        return f"{self.name} at {self.public_url}"

    def _classify(self, e: Exception) -> str | None:
        """The kind of a transport failure worth retrying; None for a permanent one."""
        if isinstance(e, httpx.TimeoutException):
            return "timeout"
        if isinstance(e, httpx.ConnectError):
            return "connect"
        if isinstance(e, httpx.TransportError):  # reset, remote closed, protocol error mid-response
            return "reset"
        if isinstance(e, httpx.DecodingError):  # a cut or corrupt compressed body, an unreadable reply frame
            return "bad_response"
        return None

    async def probe(self, timeout_s: float) -> str | None:
        """Is the server up? None when `/models` answers below 500, else the failure's kind (a pool
        takes an endpoint back in when its probe passes)."""
        try:
            r = await self._client.get(self._endpoint("models"), headers=self._headers, timeout=timeout_s)
        except Exception as e:  # noqa: BLE001 - any failure keeps the endpoint out
            return self._classify(e) or type(e).__name__
        return f"http_{r.status_code}" if r.status_code >= 500 else None

    def _server_text(self, r: httpx.Response) -> str:
        """The server's error text for a message or a record, the API key and the URL's hidden query values
        blanked should it echo them (a 404 page quoting the request path with its ?api-key=...)."""
        text = _error_message(r)  # blanked whole, before it is cut: a key across the cut would keep its first part
        if self._key and len(self._key) >= 4:
            for form in dict.fromkeys((self._key, quote(self._key, safe=""))):
                text = text.replace(form, "[API key]")
        for value in self._hidden_query:
            for form in dict.fromkeys((value, quote(value, safe=""))):
                text = text.replace(form, "[hidden]")
        return one_line(text)

    async def _post(self, body: dict) -> tuple[dict, float]:
        """One answer as a JSON object and the seconds of the try that got it, after retries; raises
        SampleError / TransientError / ServerUnreachable / EndpointRefused."""
        payload = json.dumps({"model": self.model, **body, **self.extra_body}).encode()  # ASCII: surrogates escaped
        delay = self.backoff_s
        refused, responses_then = 0, self._responses  # this request's refused connections in a row
        # a server that refuses every try of a request is down, also when there are fewer tries than
        # max_connect_failures (None: never, an endpoint pool decides itself)
        unreachable_at = (math.inf if self.max_connect_failures is None
                          else min(self.max_connect_failures, self.max_attempts))
        for attempt in range(1, self.max_attempts + 1):
            wait = None
            t0, took = time.perf_counter(), None
            try:
                if self._pump is not None:
                    r, took = await self._pump.post(payload)
                else:
                    # a request waiting for one of the pool's connections is not timed: a task asking two
                    # at once (PerRecBench's pairs) had the wait in its latency, and a PoolTimeout as a timeout
                    async with self._slots:
                        t0 = time.perf_counter()
                        r = await self._client.post(self._url, content=payload, headers=self._headers)
            except Exception as e:  # noqa: BLE001 - sorted into retry / fatal below
                if isinstance(e, ConfigError):  # the transport process could not start
                    raise
                if isinstance(e, httpx.InvalidURL):  # every request would fail alike: the configuration
                    raise ConfigError(f"--base-url {self.public_url}: not a URL a request can go to ({one_line(e)})") from None
                kind = self._classify(e)
                if kind is None:
                    raise SampleError(type(e).__name__, f"{self._where()}: {one_line(e)}") from None
                if kind == "connect":
                    if self._responses != responses_then:  # the server answered someone since: a new row
                        refused, responses_then = 0, self._responses
                    refused += 1
                    if refused >= unreachable_at:
                        raise ServerUnreachable(
                            f"connection refused by {self.public_url} ({refused} tries in a row): "
                            "is the server running and is the URL right?") from None
            else:
                self._responses += 1
                refused = 0
                if 200 <= r.status_code < 300:  # a proxy's 201 / 203 with the reply is read as 200 is
                    try:
                        data = json.loads(r.content)
                        if not isinstance(data, dict):
                            raise ValueError("not a JSON object")
                    except ValueError as e:  # bad JSON, bad UTF-8, a cut or empty body: the transport, not an answer
                        kind = "bad_response"
                        if attempt == self.max_attempts:
                            raise TransientError(kind, f"{self._where()}: gave up after {attempt} tries: unreadable "
                                                 f"response body ({one_line(e)})") from None
                        self.retries[kind] += 1
                        await asyncio.sleep(min(MAX_WAIT_S, delay * (0.5 + random.random())))  # backoff, as below
                        delay = min(delay * 2, 30.0)
                        continue
                    choices = data.get("choices")
                    first = choices[0] if isinstance(choices, list) and choices else None
                    # no answer in it, or an error in its place (OpenRouter's finish_reason "error"): retried
                    # like any transport failure
                    kind = ("empty_choices" if not choices else "error_choice" if isinstance(first, dict)
                            and (first.get("finish_reason") == "error" or first.get("error")) else None)
                    if kind is not None:
                        if attempt == self.max_attempts:
                            what = ("answers with no choices" if kind == "empty_choices" else "the reply's choice is "
                                    f"an error ({one_line(str(first.get('error') or 'finish_reason: error'))})")
                            raise TransientError(kind, f"{self._where()}: gave up after {attempt} tries: {what}")
                        self.retries[kind] += 1
                        await asyncio.sleep(min(MAX_WAIT_S, delay * (0.5 + random.random())))
                        delay = min(delay * 2, 30.0)
                        continue
                    return data, (time.perf_counter() - t0) if took is None else took
                kind = f"http_{r.status_code}"
                if 300 <= r.status_code < 400:  # not followed: every request would be redirected alike
                    to = redact_url(r.headers.get("location") or "")
                    raise EndpointRefused(f"{self.public_url} redirects the request (HTTP {r.status_code}"
                                          + (f" to {to}" if to else "") + "): give the URL it redirects to as the "
                                          "base URL", r.status_code)
                if r.status_code in CONFIG_STATUS or (400 <= r.status_code < 500 and (
                        account_refused(r) or r.status_code not in RETRY_STATUS
                        and (unknown_model(r) or unsupported_parameter(r)))):
                    raise EndpointRefused(f"{self.public_url} refuses the request for model {self.model!r}: HTTP "
                                          f"{r.status_code}: {self._server_text(r)}", r.status_code)
                if not retryable(r.status_code):
                    raise SampleError(kind, f"{self._where()}: HTTP {r.status_code}: {self._server_text(r)}")
                wait = retry_after_s(r.headers)
            if attempt == self.max_attempts:
                err = TransientError(kind, f"{self._where()}: gave up after {attempt} tries: {kind}")
                err.retry_after_s = wait  # what the server asked for, for a caller that retries elsewhere
                raise err
            self.retries[kind] += 1
            backoff = delay * (0.5 + random.random())
            delay = min(delay * 2, 30.0)
            await asyncio.sleep(min(MAX_WAIT_S, backoff if wait is None else wait))
        raise AssertionError("unreachable")

    async def agenerate(self, messages: Messages, params: GenerationParams) -> Completion:
        body = {"messages": messages, "max_tokens": params.max_tokens, "temperature": params.temperature,
                "top_p": params.top_p, "seed": params.seed}
        if params.stop:
            body["stop"] = list(params.stop)
        data, latency = await self._post(body)
        choice = data["choices"][0] if isinstance(data["choices"], list) else {}
        message = choice.get("message") if isinstance(choice, dict) else None
        text = message.get("content") if isinstance(message, dict) else None
        if isinstance(text, list):  # content as parts ([{"type": "text", "text": ...}]): their text, in order
            text = "".join(x.get("text") or "" for x in text if isinstance(x, dict) and x.get("type") in ("text", None)
                           and isinstance(x.get("text") or "", str))
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        return Completion(
            text=text if isinstance(text, str) else "",
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=usage.get("completion_tokens"),
            latency_s=latency,
            finish_reason=choice.get("finish_reason") if isinstance(choice, dict) else None,
        )

    async def ascore_options(self, messages: Messages, options: list[str]) -> OptionScores:
        """P(option) from the first generated token's top log-probs, every spelling summed (`option_logprobs`)."""
        data, latency = await self._post({"messages": messages, "max_tokens": 1, "temperature": 0.0,
                                          "logprobs": True, "top_logprobs": 20})
        choice = data["choices"][0] if isinstance(data["choices"], list) else None
        logprobs = choice.get("logprobs") if isinstance(choice, dict) else None
        if not isinstance(logprobs, dict) or logprobs.get("content") is None:
            # the server ignored `logprobs`: it cannot score options at all, for any sample (the configuration)
            raise EndpointRefused(f"{self.public_url} answers model {self.model!r} with no log-probabilities: HTTP "
                                  "200 to logprobs=true with no `logprobs` in its reply: the task scores the answer "
                                  "options by their log-probabilities, which this server does not return; serve the "
                                  "model where they are (vLLM, llama.cpp's server, an OpenAI chat model)", 200)
        try:
            top = logprobs["content"][0]["top_logprobs"] or []
            pairs = [(t["token"], float(t["logprob"])) for t in top]
        except (KeyError, IndexError, TypeError, ValueError):
            raise SampleError("no_logprobs", f"{self._where()} returned no log-probabilities") from None
        bounded = bounded_options(pairs, options)
        return OptionScores(logprobs=option_logprobs(pairs, options), latency_s=latency,
                            extra={"bounded": bounded} if bounded else {})

    @property
    def queue_ahead(self) -> int:
        """Requests the runner keeps beyond `max_concurrency`: with the transport process, as many again (at
        least 2), so its child always has the next request when an answer comes back and never leaves a
        connection idle (httpx2 checks each idle connection with system calls); the child lets only
        `max_concurrency` reach the server (benchmarks/results/overhead_process.md)."""
        return max(2, self.max_concurrency) if self._pump is not None else 0

    async def aclose(self) -> None:
        try:
            await self._client.aclose()
        finally:  # the child closed whatever the in-process client did
            if self._pump is not None:
                await self._pump.aclose()


def _error_message(r: httpx.Response) -> str:
    """The server's own error text (OpenAI's {"error": {"message"}} or plain text), for the record."""
    try:
        data = r.json()
        err = data.get("error") if isinstance(data, dict) else None
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
    except ValueError:
        pass
    return r.text[:20_000] or r.reason_phrase  # bounded; `_server_text` blanks the key, then cuts it to a line


def retryable(status: int) -> bool:
    """A status whose request may succeed when asked again: `RETRY_STATUS` and any 5xx the configuration
    cannot cause (501, a feature the server lacks, stops the run)."""
    return status in RETRY_STATUS or (status >= 500 and status not in CONFIG_STATUS)


def unsupported_parameter(r: httpx.Response) -> bool:
    """Whether an error reply says a parameter the harness always sends is not accepted (OpenAI's reasoning
    models refuse `max_tokens` and `temperature`): every request would be refused alike."""
    try:
        data = r.json()
        err = data.get("error") if isinstance(data, dict) else None
        code = str(err.get("code") or "") if isinstance(err, dict) else ""
    except ValueError:
        return False
    return code in ("unsupported_parameter", "unsupported_value")


def _error_words(r: httpx.Response) -> str:
    """An error reply's message and its OpenAI-style error code and type, as one text to search."""
    try:
        data = r.json()
        err = data.get("error") if isinstance(data, dict) else None
        code = " ".join(str(err.get(k) or "") for k in ("code", "type")) if isinstance(err, dict) else ""
    except ValueError:
        code = ""
    return f"{_error_message(r)} {code}"


def account_refused(r: httpx.Response) -> bool:
    """Whether an error reply says the key or the account is refused (`ACCOUNT_REFUSED`), whatever its status."""
    return bool(ACCOUNT_REFUSED.search(_error_words(r)))


def unknown_model(r: httpx.Response) -> bool:
    """Whether an error reply says the model is not served (its message, or an OpenAI-style error code)."""
    return bool(UNKNOWN_MODEL.search(_error_words(r)))


def option_logprobs(token_logprobs, options: list[str]) -> dict[str, float]:
    """Sum the probability of every spelling of an option token among the returned top log-probs: with or
    without a leading space, in any casing ("Yes", " yes", "YES"), as the in-process backends sum their option
    tokens (`base.option_first_tokens`). An option none of whose spellings is among them, beside one that is,
    gets the most the reply allows it (see `bounded_options`): each of its unreturned spellings is at most the
    smallest returned probability ("No", "no", "NO", "nO", each with and without a leading space: 8 of them), all
    of them together at most what the returned tokens leave of 1, and never more than the strongest option
    returned (the reply ranks that one above each of its spellings, so the cap is a choice: together the missing
    spellings may hold more, as 8·e⁻⁵ against e⁻³). So P(Yes) is the least confident value under these bounds,
    never below 0.5 for the option returned (capped there by choice), rather than a certain 1.0, and a missing
    option never turns into the preferred one; the present option's own unreturned spellings are not added, so
    its mass is a lower bound. The answer is marked `bounded`. No option returned at all: all -inf."""
    acc = {o: 0.0 for o in options}
    seen = set()
    for token, logprob in token_logprobs:
        if token in seen:
            continue
        seen.add(token)
        word = (token[1:] if token.startswith(" ") else token).casefold()
        for o in options:
            if word == o.casefold():
                acc[o] += math.exp(logprob)
    out = {o: (math.log(p) if p > 0 else -math.inf) for o, p in acc.items()}
    if any(v > -math.inf for v in out.values()) and seen:
        floor = min(lp for _, lp in token_logprobs)
        returned, counted = 0.0, set()
        for token, logprob in token_logprobs:
            if token not in counted:
                counted.add(token)
                returned += math.exp(logprob)
        # what the returned tokens leave of 1; none to go by when their rounded sum reaches 1 (not "nothing left":
        # that would make the missing option impossible and P(Yes) a certain 1.0)
        left = math.log(1.0 - returned) if returned < 1.0 else math.inf
        top = max(out.values())
        out = {o: (v if v > -math.inf else min(floor + math.log(spellings(o)), left, top)) for o, v in out.items()}
    return out


def spellings(option: str) -> int:
    """How many tokens `option_logprobs` would sum for `option`: every casing, with and without a leading space."""
    return 2 * math.prod(2 if c.lower() != c.upper() else 1 for c in option)


def bounded_options(token_logprobs, options: list[str]) -> list[str]:
    """The options `option_logprobs` bounded (the most the reply allows them), as none of their spellings was
    returned."""
    words = {(t[1:] if t.startswith(" ") else t).casefold() for t, _ in token_logprobs}
    present = [o for o in options if o.casefold() in words]
    return [o for o in options if o.casefold() not in words] if present else []
