"""The OpenAI-compatible backend's transport process (`models/transport_process.py`), against the fake server in
its own process: same answers as posting in-process, latency from the child, the server's concurrency kept,
a child that dies is replaced, Ctrl-C is the harness's, the key stays off the command line and environment."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time

import pytest

from recharness.core.errors import ConfigError
from recharness.core.types import GenerationParams
from recharness.models.openai_compat import OpenAICompatibleBackend
from recharness.testing.fake_server import FakeServerProcess

PARAMS = GenerationParams(max_tokens=16)


def msgs(i: int) -> list[dict]:
    return [{"role": "user", "content": f"recommend movie {i}"}]


def backend(url: str, **kw) -> OpenAICompatibleBackend:
    return OpenAICompatibleBackend("m", base_url=url, **kw)


def test_the_transport_process_answers_as_posting_in_process_and_reports_the_exchange_time():
    with FakeServerProcess(answer="1. Heat\n2. Fargo") as srv:
        async def go(transport):
            b = backend(srv.base_url, transport=transport, max_concurrency=4)
            try:
                t0 = time.perf_counter()
                got = await asyncio.gather(*(b.agenerate(msgs(i), PARAMS) for i in range(12)))
                return got, time.perf_counter() - t0, b._pump
            finally:
                await b.aclose()

        pumped, wall, pump = asyncio.run(go("process"))
        inline, _, none = asyncio.run(go("inline"))
    assert pump is not None and none is None
    assert pump.proc.returncode == 0  # aclose: the child finished and exited
    assert [c.text for c in pumped] == [c.text for c in inline] == ["1. Heat\n2. Fargo"] * 12
    assert [(c.prompt_tokens, c.completion_tokens) for c in pumped] == [(c.prompt_tokens, c.completion_tokens)
                                                                       for c in inline]
    assert all(0 < c.latency_s < wall for c in pumped)


def test_the_server_sees_at_most_max_concurrency_requests_though_the_runner_queues_more():
    # 4 answers of 0.25 s each at concurrency 1: one at a time takes >= 1 s; two at once would take 0.5 s
    with FakeServerProcess(delay_s=0.25) as srv:
        async def go():
            b = backend(srv.base_url, max_concurrency=1)
            assert b.queue_ahead == 2
            try:
                await b.agenerate(msgs(-1), PARAMS)  # the child started before the clock
                t0 = time.perf_counter()  # all 4 handed to the child at once: it sends them one at a time
                await asyncio.gather(*(b.agenerate(msgs(i), PARAMS) for i in range(4)))
                return time.perf_counter() - t0
            finally:
                await b.aclose()

        assert asyncio.run(go()) >= 0.95


def test_a_child_that_dies_is_replaced_and_its_request_in_flight_is_asked_again():
    with FakeServerProcess(delay_s=1.0) as srv:
        async def go():
            b = backend(srv.base_url, backoff_s=0.01, max_concurrency=2)
            try:
                await b.agenerate(msgs(0), PARAMS)
                first = b._pump.proc
                first.kill()  # between requests: the next one starts a new child
                first.wait()
                await asyncio.sleep(0.2)  # its socket's end seen by the event loop
                assert (await b.agenerate(msgs(1), PARAMS)).text
                second = b._pump.proc
                assert second.pid != first.pid
                asking = asyncio.ensure_future(b.agenerate(msgs(2), PARAMS))
                await asyncio.sleep(0.3)  # at the server (1 s): the child dies under it
                second.kill()
                answer = await asyncio.wait_for(asking, 30)
                return answer, b.retries, b._pump.proc.pid, second.pid
            finally:
                await b.aclose()

        answer, retries, third, second = asyncio.run(go())
    assert answer.text and retries == {"reset": 1} and third != second


def test_the_child_ignores_ctrl_c_exits_with_the_harness_and_never_sees_the_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-4242")
    with FakeServerProcess() as srv:
        async def go():
            b = backend(srv.base_url)
            await b.agenerate(msgs(0), PARAMS)
            proc = b._pump.proc
            with open(f"/proc/{proc.pid}/cmdline", "rb") as f, open(f"/proc/{proc.pid}/environ", "rb") as g:
                seen = f.read() + g.read()
            os.kill(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C reaches the whole process group
            await asyncio.sleep(0.2)
            assert proc.poll() is None and (await b.agenerate(msgs(1), PARAMS)).text
            b._pump._transport.abort()  # the harness gone (killed): its end of the socket closes
            for _ in range(100):
                if proc.poll() is not None:
                    break
                await asyncio.sleep(0.05)
            await b._client.aclose()
            return seen, proc.poll()

        seen, code = asyncio.run(go())
    assert b"sk-secret-4242" not in seen  # the key crossed the socket only
    assert code == 0  # exited by itself once its socket closed


def test_the_key_is_not_in_the_childs_environment_when_given_in_the_url():
    with FakeServerProcess() as srv:
        url = srv.base_url.replace("http://", "http://sk-url-key-77@")

        async def go():
            b = backend(url)
            try:
                await b.agenerate(msgs(0), PARAMS)
                pid = b._pump.proc.pid
                with open(f"/proc/{pid}/cmdline", "rb") as f, open(f"/proc/{pid}/environ", "rb") as g:
                    return f.read() + g.read()
            finally:
                await b.aclose()

        seen = asyncio.run(go())
    assert b"sk-url-key-77" not in seen


def test_a_child_that_cannot_start_stops_the_run_and_the_transport_is_chosen_by_name(monkeypatch):
    with FakeServerProcess() as srv:
        b = backend(srv.base_url, max_attempts=2)
        monkeypatch.setattr(sys, "executable", "/bin/false")  # the child exits at once

        async def go():
            try:
                await b.agenerate(msgs(0), PARAMS)
            finally:
                await b.aclose()

        with pytest.raises(ConfigError, match=r"transport process \(.*\) stopped as it started \(exit code 1\): set RECHARNESS_TRANSPORT=inline"):
            asyncio.run(go())
    monkeypatch.setenv("RECHARNESS_TRANSPORT", "inline")
    assert backend("http://127.0.0.1:9/v1")._pump is None and backend("http://127.0.0.1:9/v1").queue_ahead == 0
    monkeypatch.setenv("RECHARNESS_TRANSPORT", "threads")
    with pytest.raises(ConfigError, match="RECHARNESS_TRANSPORT='threads': one of process, inline"):
        backend("http://127.0.0.1:9/v1")
