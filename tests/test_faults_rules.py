"""Issue 22 audit: the connection-refusal rule and the backoff of unreadable bodies, with real values."""

from __future__ import annotations

import asyncio
import re

import pytest

from recharness.core.errors import ServerUnreachable
from recharness.core.io import read_jsonl
from recharness.core.types import GenerationParams
from recharness.models.openai_compat import OpenAICompatibleBackend
from recharness.testing.fake_server import FakeServerProcess
from tests.test_faults import run, samples_for


@pytest.mark.parametrize("concurrency", [1, 4, 8, 32])
def test_refused_connections_stop_after_the_configured_tries_whatever_the_concurrency(tmp_path, concurrency,
                                                                                   refused_url):
    url = refused_url
    stats = run(samples_for([], n_ok=40), url, tmp_path / "p.jsonl", concurrency=concurrency, backoff_s=0.01,
                max_attempts=5)
    assert stats.stopped == (f"connection refused by {url} (3 tries in a row): is the server running and is the "
                             "URL right?")
    assert stats.done == 0
    # the request that stopped the run was refused 3 times: its 2 retries are in the summary
    assert stats.transport_retries["connect"] >= 2


def test_the_refusal_message_names_the_configured_limit(tmp_path, refused_url):
    url = refused_url
    stats = run(samples_for([], n_ok=16), url, tmp_path / "p.jsonl", concurrency=8, backoff_s=0.01, max_attempts=9,
                max_connect_failures=5)
    assert "(5 tries in a row)" in stats.stopped
    assert stats.transport_retries["connect"] >= 4


def test_one_request_is_tried_max_connect_failures_times_before_the_run_stops(refused_url):
    url = refused_url
    b = OpenAICompatibleBackend("m", base_url=url, backoff_s=0.01, max_attempts=9, max_connect_failures=4)

    async def go():
        try:
            await b.agenerate([{"role": "user", "content": "x"}], GenerationParams())
        finally:
            await b.aclose()

    with pytest.raises(ServerUnreachable, match=r"\(4 tries in a row\)"):
        asyncio.run(go())
    assert b.retries == {"connect": 3}


def test_an_unreadable_body_is_retried_after_a_backoff(tmp_path, monkeypatch):
    import recharness.models.openai_compat as oc

    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(s):
        waits.append(s)
        await real_sleep(0)

    monkeypatch.setattr(oc.asyncio, "sleep", sleep)
    monkeypatch.setattr(oc.random, "random", lambda: 0.5)  # no jitter: the waits are exactly the backoff
    with FakeServerProcess(transient=2) as srv:
        stats = run(samples_for(["truncated-json"], n_ok=0), srv.base_url, tmp_path / "p.jsonl", backoff_s=0.2,
                    max_attempts=3, concurrency=1)
    assert stats.done == 1 and stats.transport_retries == {"bad_response": 2}
    assert waits == [0.2, 0.4]  # before the fix: [] (retried at once)


def test_a_corrupt_compressed_body_is_retried_not_an_invalid_answer(tmp_path):
    """httpx2's DecodingError (a 200 saying gzip, its body not) is no TransportError: it was recorded as the
    sample's invalid answer; it is the transport's, retried as an unreadable body is."""
    with FakeServerProcess(transient=1) as srv:
        stats = run(samples_for(["bad-gzip"], n_ok=1), srv.base_url, tmp_path / "p.jsonl", concurrency=1,
                    backoff_s=0.01)
    assert stats.done == 2 and stats.transport_retries == {"bad_response": 1}
    recs = {r["id"]: r for r in read_jsonl(tmp_path / "p.jsonl")}
    assert recs["bad-gzip-0"]["valid"] and recs["bad-gzip-0"]["output"] == recs["ok-0"]["output"]


def test_a_rate_limit_is_not_an_account_refusal():
    import httpx2

    from recharness.models.openai_compat import account_refused

    def reply(status, err):
        return httpx2.Response(status, json={"error": err})

    assert not account_refused(reply(429, {"message": "Rate limit reached for requests", "type": "requests"}))
    assert not account_refused(reply(400, {"message": "This model's maximum context length is 2048 tokens"}))
    assert account_refused(reply(429, {"message": "quota", "code": "insufficient_quota"}))
    assert account_refused(reply(401, {"message": "Incorrect API key provided: sk-***"}))


def test_fewer_tries_than_the_refusal_limit_still_stop_a_run_on_a_dead_server(tmp_path, refused_url):
    """--max-attempts 2 < max_connect_failures 3: a request refused on both tries means the server is down
    (before, every sample was tried twice and left undone, and the run never stopped)."""
    url = refused_url
    stats = run(samples_for([], n_ok=20), url, tmp_path / "p.jsonl", concurrency=1, backoff_s=0.01, max_attempts=2)
    assert stats.stopped and "(2 tries in a row)" in stats.stopped
    # the request at the server and the two queued behind it for the transport process (`queue_ahead`)
    assert stats.done == 0 and stats.undone == {"server_unreachable": 3}


def test_an_error_inside_a_200_is_retried_and_its_answer_kept(tmp_path):
    with FakeServerProcess(transient=1) as srv:
        stats = run(samples_for(["error-choice"], n_ok=1), srv.base_url, tmp_path / "p.jsonl", concurrency=1)
    assert stats.done == 2 and stats.transport_retries == {"error_choice": 1}
    recs = {r["id"]: r for r in read_jsonl(tmp_path / "p.jsonl")}
    assert recs["error-choice-0"]["valid"] and recs["error-choice-0"]["output"] == recs["ok-0"]["output"]


@pytest.mark.parametrize("fault, says", [("redirect", "redirects the request (HTTP 301 to https://***@example.invalid"),
                                         ("unsupported-param", "Unsupported parameter: 'max_tokens'"),
                                         # the account, not the sample: before, every sample an invalid answer
                                         # (402, 400) a resume never asks again, or each retried to the end (429)
                                         ("no-credit", "HTTP 402: Insufficient Balance"),
                                         ("no-quota", "HTTP 429: You exceeded your current quota"),
                                         ("bad-key-400", "HTTP 400: API key not valid")])
def test_a_refusal_every_request_meets_stops_the_run_without_an_answer(tmp_path, fault, says):
    from recharness.core.errors import EndpointRefused

    with FakeServerProcess() as srv, pytest.raises(EndpointRefused, match=re.escape(says)):
        run(samples_for([fault], n_ok=0), srv.base_url, tmp_path / "p.jsonl", concurrency=1)
    assert not (tmp_path / "p.jsonl").exists() or not list(read_jsonl(tmp_path / "p.jsonl"))


def test_server_text_that_echoes_the_api_key_is_recorded_without_it(tmp_path, monkeypatch):
    monkeypatch.setenv("RECHARNESS_TEST_KEY", "sk-very-secret-123")
    with FakeServerProcess() as srv:
        run(samples_for(["echo-key"], n_ok=0), srv.base_url, tmp_path / "p.jsonl", concurrency=1,
            api_key_env="RECHARNESS_TEST_KEY")
    text = (tmp_path / "p.jsonl").read_text()
    assert "sk-very-secret-123" not in text and "authorization=Bearer [API key]" in text


@pytest.mark.parametrize("body", [
    {"error": {"message": "x" * 260 + "bad header: authorization=Bearer sk-very-secret-123"}},
    "y" * 280 + " token=sk-very-secret-123",
    {"error": {"message": "x" * 250 + " GET /v1?api-key=sk-very-secret-123%2B"}},
])
def test_a_key_echoed_across_the_messages_cut_is_not_kept_in_part(body, monkeypatch):
    """The server's text was cut to one line of 300 characters before the key was blanked: a key across the cut
    kept its first part ("Bearer sk-ver…"), in an invalid record's error or a refusal's message."""
    import json

    import httpx2

    from recharness.models.openai_compat import OpenAICompatibleBackend

    monkeypatch.setenv("RECHARNESS_TEST_KEY", "sk-very-secret-123")
    b = OpenAICompatibleBackend("fake", base_url="http://127.0.0.1:9/v1", api_key_env="RECHARNESS_TEST_KEY")
    if isinstance(body, str):
        r = httpx2.Response(400, content=body.encode())
    else:
        r = httpx2.Response(400, content=json.dumps(body).encode())
    text = b._server_text(r)
    assert "sk-" not in text and len(text) <= 300, text
    b2 = OpenAICompatibleBackend("fake", base_url="http://127.0.0.1:9/v1?api-key=sk-very-secret-123%2B")
    r = httpx2.Response(400, content=json.dumps({"error": {"message": "x" * 262 + " key sk-very-secret-123+"}}).encode())
    assert "sk-" not in b2._server_text(r)


@pytest.mark.parametrize("fault", ["524", "529"])
def test_a_server_error_outside_the_common_four_is_retried_not_an_answer(tmp_path, fault):
    """529 ("overloaded") and Cloudflare's 524 were recorded as invalid answers a resume never asks again."""
    with FakeServerProcess(transient=1) as srv:
        stats = run(samples_for([fault], n_ok=1), srv.base_url, tmp_path / "p.jsonl", concurrency=1)
    assert stats.done == 2 and stats.transport_retries == {f"http_{fault}": 1} and not stats.errors
    recs = {r["id"]: r for r in read_jsonl(tmp_path / "p.jsonl")}
    assert recs[f"{fault}-0"]["valid"]


def test_a_keys_in_the_url_wins_over_the_environments(monkeypatch):
    monkeypatch.setenv("RECHARNESS_TEST_KEY", "sk-from-env")
    b = OpenAICompatibleBackend("m", base_url="https://u:sk-in-url@other.example/v1", api_key_env="RECHARNESS_TEST_KEY")
    assert b._headers["authorization"] == "Bearer sk-in-url"
    asyncio.run(b.aclose())


def test_latency_is_the_answered_try_alone(tmp_path):
    """A 429 with Retry-After 1 s before the answer: the sample's latency is the answered request (milliseconds
    against a zero-latency server), not the second of waiting."""
    with FakeServerProcess(transient=1) as srv:  # its Retry-After: 1 s
        run(samples_for(["429-retry-after"], n_ok=0), srv.base_url, tmp_path / "p.jsonl", concurrency=1)
    (rec,) = read_jsonl(tmp_path / "p.jsonl")
    assert rec["valid"] and rec["latency_s"] < 0.5


def test_server_text_that_echoes_a_key_in_the_urls_query_is_recorded_without_it(tmp_path):
    """An Azure-style ?api-key=... is hidden in the URL the harness shows (`redact_url`); a server whose error text
    quotes the request path (here the fake server's 404, "no route POST /v1/chat/completions?api-key=...") must not
    bring it back into the error, the console or the predictions file."""
    from recharness.core.errors import EndpointRefused

    with FakeServerProcess() as srv, pytest.raises(EndpointRefused) as e:
        run(samples_for([], n_ok=1), srv.base_url + "?api-key=sk-QSECRET-789&deployment=my%20model",
            tmp_path / "p.jsonl", concurrency=1)
    assert "sk-QSECRET-789" not in str(e.value) and "[hidden]" in str(e.value)
    assert "my model" not in str(e.value) and "my%20model" not in str(e.value)  # any value redact_url hides
    b = OpenAICompatibleBackend("m", base_url="http://127.0.0.1:1/v1?api-version=2024-06-01&key=abc12345")
    assert b._hidden_query == ["abc12345"]  # a version stays readable


def test_an_inline_request_waiting_for_a_connection_is_not_timed(monkeypatch):
    """Posting from its own process, the backend timed a request from before it had a connection: two asked at
    once over one connection (as PerRecBench asks a pair) gave the second the first's time as well."""
    import asyncio

    from recharness.core.types import GenerationParams
    from recharness.models.openai_compat import OpenAICompatibleBackend

    monkeypatch.setenv("RECHARNESS_TRANSPORT", "inline")
    with FakeServerProcess(delay_s=0.3) as srv:
        b = OpenAICompatibleBackend("fake", base_url=srv.base_url, max_concurrency=1)

        async def both():
            try:
                p = GenerationParams(max_tokens=8)
                return await asyncio.gather(*(b.agenerate([{"role": "user", "content": f"q{k}"}], p) for k in range(2)))
            finally:
                await b.aclose()

        got = asyncio.run(both())
    assert all(0.25 < c.latency_s < 0.5 for c in got), [c.latency_s for c in got]


def test_a_refusing_url_refuses_connections_and_no_server_can_take_its_port(refused_url):
    """The "server is down" tests' URL: a parallel worker's server binding its port would answer them."""
    import socket
    from urllib.parse import urlsplit

    port = urlsplit(refused_url).port
    with socket.socket() as c, pytest.raises(ConnectionRefusedError):
        c.connect(("127.0.0.1", port))
    with socket.socket() as s, pytest.raises(OSError, match="in use"):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as asyncio's servers bind
        s.bind(("127.0.0.1", port))
