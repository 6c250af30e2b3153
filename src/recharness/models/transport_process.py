"""The HTTP exchange in a process of its own, so the harness's work never slows the transport.

At zero server latency the client is CPU-bound: in one process, every microsecond the harness spends
on an answer (parsing, the response cache, the durable record) is taken from the requests
(benchmarks/results/overhead_cpu.md). Here a child process does nothing but post the bytes it is
given with httpx2 and return the raw reply, so the harness's work runs beside it on another core.
The child holds no logic: the backend in the parent encodes the request, reads the reply, decides
on retries and measures nothing but what the child reports (the exchange's own seconds).

Wire (a socketpair, both ways length-prefixed binary frames, no JSON on the hot path):
setup: u32 length + JSON {url, headers, timeout_s, trust_env, concurrency}; the child answers one byte
when its client is ready. request: u32 id, u32 length, body. reply: u32 id, i32 HTTP status (-1: the
post raised; the body is then JSON {type, message}), f64 seconds, u32 body length, u32 headers length,
body, headers (JSON pairs, sent for non-200 replies only: Retry-After, Location, error texts).

The child ignores Ctrl-C and, when its socket closes (the harness closed it, was stopped or was killed), cancels
its requests in flight, drops the queued ones and exits: no request is posted for a harness that cannot read it. The API
key travels only over the socketpair: not on the command line, and the child's environment is the
harness's without the variable that holds it.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from recharness.core.errors import ConfigError
from recharness.models.transport_child import REPLY as _REPLY
from recharness.models.transport_child import REQUEST as _REQUEST
from recharness.models.transport_child import SETUP as _SETUP
from recharness.models.transport_child import frames as _frames

#: the child's script, run by its path: it imports only the standard library and httpx2 (not this package)
CHILD = str(Path(__file__).with_name("transport_child.py"))

#: seconds the child may take to import httpx2 and answer that it is ready
START_TIMEOUT_S = 60.0


class TransportProcessError(ConfigError):
    """The child could not start: this machine's setup, not a sample (the run stops)."""


class _Reply:
    """A 200 reply as `OpenAICompatibleBackend._post` reads it (status and body)."""

    __slots__ = ("status_code", "content")

    def __init__(self, status_code: int, content: bytes):
        self.status_code, self.content = status_code, content


class _Connection(asyncio.Protocol):
    """The parent's end of one child's socket: its replies matched to the requests sent over it. A child
    that stops fails only its own requests, even when another has already taken its place."""

    def __init__(self):
        self.transport: asyncio.Transport | None = None
        self.ready = asyncio.get_running_loop().create_future()
        self.waiting: dict[int, asyncio.Future] = {}
        self.buf = bytearray()
        self.out: list[bytes] = []

    def flush(self) -> None:
        data, self.out = b"".join(self.out), []
        if self.transport is not None:
            self.transport.write(data)

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        if not self.ready.done():
            del buf[:1]  # the ready byte
            self.ready.set_result(None)
        for (rid, status, seconds, n_body, _), payload in _frames(buf, _REPLY, lambda f: f[3] + f[4]):
            fut = self.waiting.pop(rid, None)
            if fut is None or fut.done():
                continue
            body, head = payload[:n_body], payload[n_body:]
            try:
                if status < 0:
                    fut.set_exception(_rebuilt(json.loads(body)))
                elif status == 200:
                    fut.set_result((_Reply(200, body), seconds))
                else:
                    import httpx2

                    raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in json.loads(head)] if head else None
                    fut.set_result((httpx2.Response(status, headers=raw, content=body), seconds))
            except Exception as e:  # noqa: BLE001 - an unreadable frame fails its own request, never hangs it
                import httpx2

                fut.set_exception(httpx2.DecodingError(f"the transport process's reply could not be read: {e}"))

    def connection_lost(self, exc) -> None:
        self.transport = None
        why = "the HTTP transport process stopped"
        if not self.ready.done():
            self.ready.set_exception(TransportProcessError(why))
        import httpx2

        waiting, self.waiting = self.waiting, {}
        for fut in waiting.values():  # in flight when it went: a reset connection, tried again by the backend
            if not fut.done():
                fut.set_exception(httpx2.ReadError(why))


class TransportProcess:
    """`await post(body)` -> (reply, seconds of the exchange) from the child. A 200 reply is a light object
    with `status_code` and `content`; any other an `httpx2.Response` (headers, `.json()`, `.text`). A
    failure the child met is raised here as the same httpx2 exception type. Started on first use, in the
    running event loop; started again if the loop changed or the child stopped."""

    def __init__(self, url: str, headers: dict, *, timeout_s: float, trust_env: bool, concurrency: int,
                 secret: str | None = None):
        #: the child's environment: the harness's without the variables that hold `secret` (the API key): equal to
        #: it, or holding it when it is long enough not to be a common word (a local server's key "x" or "1")
        self._env = {k: v for k, v in os.environ.items()
                     if not secret or not (v == secret or len(secret) >= 8 and secret in v)}
        self._closed = False
        self._setup = json.dumps({"url": url, "headers": headers, "timeout_s": timeout_s, "trust_env": trust_env,
                                  "concurrency": concurrency}).encode()
        self.proc: subprocess.Popen | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._conn: _Connection | None = None
        self._starting: asyncio.Future | None = None
        self._next = 0

    @property
    def _transport(self) -> asyncio.Transport | None:
        return self._conn.transport if self._conn is not None else None

    async def _start(self) -> None:
        if self.proc is not None and self.proc.poll() is None:  # a child still running is replaced: stopped first
            self.proc.kill()
            self.proc.wait()  # poll() above reaped one that had already exited: no zombie either way
        try:
            mine, theirs = socket.socketpair()
            try:
                self.proc = subprocess.Popen([sys.executable, CHILD, str(theirs.fileno())],
                                             pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, env=self._env)
            finally:
                theirs.close()
        except OSError as e:  # no interpreter, no file descriptors or memory left: this machine, not a sample
            raise TransportProcessError(f"the HTTP transport process ({sys.executable} {CHILD}) could not start: "
                                        f"{e}: set RECHARNESS_TRANSPORT=inline to post from the harness's own "
                                        "process") from None
        self._loop = asyncio.get_running_loop()
        _, self._conn = await self._loop.connect_accepted_socket(_Connection, sock=mine)
        self._conn.transport.write(_SETUP.pack(len(self._setup)) + self._setup)
        try:
            await asyncio.wait_for(asyncio.shield(self._conn.ready), START_TIMEOUT_S)
        except (asyncio.TimeoutError, TransportProcessError) as e:
            if isinstance(e, TransportProcessError):  # its socket closed as it exits: its exit code, once reaped
                try:
                    await asyncio.to_thread(self.proc.wait, 5)
                except subprocess.TimeoutExpired:
                    pass
            self._kill()
            what = (f"did not start within {START_TIMEOUT_S:.0f} s" if isinstance(e, asyncio.TimeoutError)
                    else f"stopped as it started (exit code {self.proc.returncode})")
            raise TransportProcessError(f"the HTTP transport process ({sys.executable} {CHILD}) {what}: set "
                                        "RECHARNESS_TRANSPORT=inline to post from the harness's own process") from None

    async def start(self) -> None:
        """The child running in this event loop (`post` calls it; callers may, to start it ahead)."""
        loop = asyncio.get_running_loop()
        if self._loop is not None and self._loop is not loop:  # bound to an event loop that has ended
            self._kill()
            self._starting = None
        if self._starting is None or self._starting.done():
            self._starting = asyncio.ensure_future(self._start())
        await asyncio.shield(self._starting)
        if self._transport is None:
            raise TransportProcessError("the HTTP transport process stopped as it started")

    async def post(self, body: bytes):
        if self._closed:  # as httpx2's client once closed: no new child for a request after `aclose`
            raise RuntimeError("cannot send a request: the transport process is closed")
        loop = asyncio.get_running_loop()
        if self._transport is None or self._loop is not loop:
            await self.start()
        conn = self._conn
        self._next += 1
        fut = loop.create_future()
        conn.waiting[self._next] = fut
        if not conn.out:  # the requests of one event-loop iteration leave in one write
            loop.call_soon(conn.flush)
        conn.out += (_REQUEST.pack(self._next, len(body)), body)
        return await fut

    def _kill(self) -> None:
        transport = self._transport
        if transport is not None:
            try:
                transport.abort()
            except RuntimeError:  # its event loop is closed: the socket goes with the transport object
                pass
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    async def aclose(self) -> None:
        """Closes the socket (the child cancels its requests in flight and exits at once) and waits for it; no
        request starts a new child after this."""
        self._closed = True
        proc, transport = self.proc, self._transport
        if transport is not None and self._loop is asyncio.get_running_loop():
            transport.close()
        elif transport is not None:
            self._kill()
        self._conn = None
        if proc is not None:
            try:
                await asyncio.to_thread(proc.wait, 10)
            except subprocess.TimeoutExpired:
                proc.kill()
                await asyncio.to_thread(proc.wait)


def _rebuilt(err: dict) -> Exception:
    """The child's exception as the parent would have met it: the httpx2 type of that name (so the backend
    sorts it into retry / fatal as in one process), or an exception class of that name."""
    import httpx2

    kind, message = str(err.get("type") or "Exception"), str(err.get("message") or "")
    cls = getattr(httpx2, kind, None)
    if isinstance(cls, type) and issubclass(cls, Exception):
        try:
            return cls(message)
        except TypeError:
            pass
    return type(kind, (Exception,), {})(message)
