"""Issue 22 audit: the connection-refusal rule and the backoff of unreadable bodies, with real values."""

from __future__ import annotations

import asyncio

import pytest

from recharness.core.types import GenerationParams
from recharness.models.openai_compat import OpenAICompatibleBackend
from recharness.models.server import free_port
from recharness.testing.fake_server import FakeServerProcess
from tests.test_faults import run, samples_for


@pytest.mark.parametrize("concurrency", [1, 4, 8, 32])
def test_refused_connections_stop_after_the_configured_tries_whatever_the_concurrency(tmp_path, concurrency):
    url = f"http://127.0.0.1:{free_port()}/v1"
    stats = run(samples_for([], n_ok=40), url, tmp_path / "p.jsonl", concurrency=concurrency, backoff_s=0.01,
                max_attempts=5)
    assert stats.stopped == (f"connection refused by {url} (3 tries in a row): is the server running and is the "
                             "URL right?")
    assert stats.done == 0
    # the request that stopped the run was refused 3 times: its 2 retries are in the summary
    assert stats.transport_retries["connect"] >= 2


def test_the_refusal_message_names_the_configured_limit(tmp_path):
    url = f"http://127.0.0.1:{free_port()}/v1"
    stats = run(samples_for([], n_ok=16), url, tmp_path / "p.jsonl", concurrency=8, backoff_s=0.01, max_attempts=9,
                max_connect_failures=5)
    assert "(5 tries in a row)" in stats.stopped
    assert stats.transport_retries["connect"] >= 4


def test_one_request_is_tried_max_connect_failures_times_before_the_run_stops():
    url = f"http://127.0.0.1:{free_port()}/v1"
    b = OpenAICompatibleBackend("m", base_url=url, backoff_s=0.01, max_attempts=9, max_connect_failures=4)

    async def go():
        try:
            await b.agenerate([{"role": "user", "content": "x"}], GenerationParams())
        finally:
            await b.aclose()

    with pytest.raises(Exception, match=r"\(4 tries in a row\)"):
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
