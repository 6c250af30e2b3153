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


def ask_once(b: OpenAICompatibleBackend):
    """One question to `b`, then `b` closed whatever happened (its own event loop)."""
    async def go():
        try:
            return await b.agenerate(msgs(0), PARAMS)
        finally:
            await b.aclose()

    return asyncio.run(go())


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


def test_the_key_is_not_in_the_childs_environment_when_given_in_the_url(monkeypatch):
    with FakeServerProcess() as srv:
        url = srv.base_url.replace("http://", "http://sk-url-key-77@")
        # the URL, key included, in the harness's environment too: the child's must not carry that variable
        monkeypatch.setenv("OPENAI_BASE_URL", url)

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
    assert b"sk-url-key-77" not in seen and b"OPENAI_BASE_URL=" not in seen


def test_a_child_that_cannot_start_stops_the_run_and_the_transport_is_chosen_by_name(monkeypatch):
    with FakeServerProcess() as srv:
        b = backend(srv.base_url, max_attempts=2)
        monkeypatch.setattr(sys, "executable", "/bin/false")  # the child exits at once
        with pytest.raises(ConfigError, match=r"transport process \(.*\) stopped as it started \(exit code 1\): set RECHARNESS_TRANSPORT=inline"):
            ask_once(b)
    monkeypatch.setenv("RECHARNESS_TRANSPORT", "inline")
    assert backend("http://127.0.0.1:9/v1")._pump is None and backend("http://127.0.0.1:9/v1").queue_ahead == 0
    monkeypatch.setenv("RECHARNESS_TRANSPORT", "threads")
    with pytest.raises(ConfigError, match="RECHARNESS_TRANSPORT='threads': one of process, inline"):
        backend("http://127.0.0.1:9/v1")


class RawServer:
    """A threaded HTTP/1.1 server on 127.0.0.1 whose replies a test writes byte by byte: `reply(n, body)` -> the
    raw response (n counts requests from 1). It records the requests it got and the most it had at once."""

    def __init__(self, reply):
        import socket
        import threading

        self.reply, self.got, self.now, self.most = reply, 0, 0, 0
        self.lock = threading.Lock()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        import threading

        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        f = conn.makefile("rb")
        try:
            while f.readline():
                length = 0
                while (line := f.readline()) not in (b"\r\n", b""):
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                body = f.read(length)
                with self.lock:
                    self.got += 1
                    self.now += 1
                    self.most = max(self.most, self.now)
                    n = self.got
                try:
                    conn.sendall(self.reply(n, body))
                finally:
                    with self.lock:
                        self.now -= 1
        except OSError:
            pass
        finally:
            conn.close()

    def close(self):
        self.sock.close()


ANSWER = (b'{"choices":[{"message":{"content":"1. Heat"},"finish_reason":"stop"}],'
          b'"usage":{"prompt_tokens":1,"completion_tokens":1}}')


def raw(status: int, body: bytes = ANSWER, headers: tuple = ()) -> bytes:
    head = f"HTTP/1.1 {status} X\r\ncontent-length: {len(body)}\r\ncontent-type: application/json\r\n".encode()
    return head + b"".join(k + b": " + v + b"\r\n" for k, v in headers) + b"\r\n" + body


@pytest.mark.parametrize("transport", ["process", "inline"])
def test_an_error_reply_with_non_ascii_headers_is_read_as_in_process(transport):
    """A proxy's 503 with a UTF-8 header, then the answer: retried and answered alike by both transports (the
    child's headers used to be rebuilt as ASCII in the parent's socket callback: the request hung for good)."""
    srv = RawServer(lambda n, body: raw(503, b'{"error": {"message": "busy"}}', (
        (b"x-proxy-note", "überlastet".encode()), (b"retry-after", b"0"))) if n == 1 else raw(200))
    try:
        async def go():
            b = backend(srv.url, transport=transport, backoff_s=0.01)
            try:
                return await asyncio.wait_for(b.agenerate(msgs(0), PARAMS), 20), b.retries
            finally:
                await b.aclose()

        answer, retries = asyncio.run(go())
    finally:
        srv.close()
    assert answer.text == "1. Heat" and retries == {"http_503": 1}


def test_a_closed_harness_gets_no_request_posted_for_it_and_no_new_child():
    """The socket closing (aclose, Ctrl-C, the harness killed) cancels the child's requests in flight and drops
    its queued ones: it exits at once, and a request after `aclose` starts no new child (before: the child posted
    every queued request for nobody, and a retried one started a second child past max_concurrency)."""
    import threading

    release = threading.Event()

    def slow(n, body):
        release.wait(10)
        return raw(200)

    srv = RawServer(slow)
    try:
        async def go():
            b = backend(srv.url, max_concurrency=1, max_attempts=1)
            asking = [asyncio.ensure_future(b.agenerate(msgs(i), PARAMS)) for i in range(3)]  # 1 at the server, 2 queued
            for _ in range(600):  # until the first is at the server (the child's start-up on a slow machine)
                if srv.got:
                    break
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.2)
            proc = b._pump.proc
            t0 = time.perf_counter()
            await b.aclose()
            closed_in = time.perf_counter() - t0
            results = await asyncio.gather(*asking, return_exceptions=True)
            with pytest.raises(RuntimeError, match="transport process is closed"):
                await b._pump.post(b"{}")
            return proc, closed_in, results, b._pump.proc

        proc, closed_in, results, after = asyncio.run(go())
        release.set()
        time.sleep(0.3)
    finally:
        srv.close()
    assert proc.returncode == 0 and closed_in < 5 and after is proc
    assert all(isinstance(r, Exception) for r in results)
    assert srv.got == 1 and srv.most == 1  # the two queued requests were never posted


def test_a_child_that_cannot_be_launched_stops_the_run(monkeypatch, tmp_path):
    b = backend("http://127.0.0.1:9/v1")
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-python"))
    with pytest.raises(ConfigError, match=r"could not start: .*No such file.*RECHARNESS_TRANSPORT=inline"):
        ask_once(b)


def test_a_short_key_takes_only_its_own_variable_out_of_the_childs_environment(monkeypatch):
    from recharness.models.transport_process import TransportProcess

    monkeypatch.setenv("OPENAI_API_KEY", "x")
    monkeypatch.setenv("SOME_PATH", "/opt/x/lib")
    env = TransportProcess("http://h/v1", {}, timeout_s=1, trust_env=False, concurrency=1, secret="x")._env
    assert "OPENAI_API_KEY" not in env and env["SOME_PATH"] == "/opt/x/lib"
    monkeypatch.setenv("OPENAI_BASE_URL", "http://sk-long-secret-9@h/v1")
    env = TransportProcess("http://h/v1", {}, timeout_s=1, trust_env=False, concurrency=1,
                           secret="sk-long-secret-9")._env
    assert "OPENAI_BASE_URL" not in env
