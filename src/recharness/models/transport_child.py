"""The child of `transport_process`: posts the request bodies it is given with one httpx2 client and writes
back each raw reply. Run by its path (`python transport_child.py FD`), so it imports only the standard library
and httpx2: nothing of recharness, and no logic of its own (the parent decides everything). See
`transport_process` for the wire format."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import struct
import sys
import time
from collections import deque

if __name__ == "__main__" and sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]  # run by its path, Python put the models folder first: none of its files may shadow an import

SETUP = struct.Struct("!I")  # length of the setup JSON
REQUEST = struct.Struct("!II")  # id, body length
REPLY = struct.Struct("!IidII")  # id, status (-1: raised), seconds, body length, headers length


def frames(buf: bytearray, head: struct.Struct, sizes):
    """Whole frames at the front of `buf` (removed from it): (header fields, payload bytes)."""
    pos, out = 0, []
    while len(buf) - pos >= head.size:
        fields = head.unpack_from(buf, pos)
        end = pos + head.size + sizes(fields)
        if len(buf) < end:
            break
        out.append((fields, bytes(buf[pos + head.size:end])))
        pos = end
    if pos:
        del buf[:pos]
    return out


class _ChildProtocol(asyncio.Protocol):
    def __init__(self, on_request, on_eof):
        self.buf, self.on_request, self.on_eof = bytearray(), on_request, on_eof

    def data_received(self, data: bytes) -> None:
        self.buf += data
        for (rid, _), body in frames(self.buf, REQUEST, lambda f: f[1]):
            self.on_request(rid, body)

    def eof_received(self):
        self.on_eof()

    def connection_lost(self, exc) -> None:
        self.on_eof()


async def _serve(fd: int) -> None:
    """The child: `concurrency` workers take the requests in turn (so at most that many are at the server),
    post each with one httpx2 client, and write each reply at once. Ends when the socket closes."""
    import httpx2

    sock = socket.socket(fileno=fd)
    sock.setblocking(True)
    n = SETUP.unpack(sock.recv(SETUP.size, socket.MSG_WAITALL))[0]
    setup = json.loads(sock.recv(n, socket.MSG_WAITALL))
    url, headers, conc = setup["url"], setup["headers"], max(1, int(setup["concurrency"]))
    client = httpx2.AsyncClient(timeout=httpx2.Timeout(setup["timeout_s"]), trust_env=setup["trust_env"],
                                limits=httpx2.Limits(max_connections=conc, max_keepalive_connections=conc))
    loop = asyncio.get_running_loop()
    queue: deque = deque()
    idle: deque = deque()  # a future per worker waiting for a request
    workers: list[asyncio.Task] = []

    def wake_one() -> None:
        while idle:
            w = idle.popleft()
            if not w.done():
                w.set_result(None)
                return

    def on_request(rid: int, body: bytes) -> None:
        queue.append((rid, body))
        wake_one()

    def on_eof() -> None:
        """The harness closed its end or is gone (killed, Ctrl-C): no reply can be read, so the requests in
        flight are cancelled and the queued ones dropped, rather than posted for nobody."""
        queue.clear()
        for t in workers:
            t.cancel()

    sock.setblocking(False)
    transport, _ = await loop.connect_accepted_socket(lambda: _ChildProtocol(on_request, on_eof), sock=sock)
    transport.write(b"R")
    pack, perf = REPLY.pack, time.perf_counter

    def write(data: bytes) -> None:
        if not transport.is_closing():
            transport.write(data)

    async def worker() -> None:
        while True:
            while not queue:
                w = loop.create_future()
                idle.append(w)
                await w
            rid, body = queue.popleft()
            t0 = perf()
            try:
                r = await client.post(url, content=body, headers=headers)
                data = r.content
            except Exception as e:  # noqa: BLE001 - every failure goes back to the backend, which sorts it
                msg = json.dumps({"type": type(e).__name__, "message": str(e)}).encode()
                write(pack(rid, -1, perf() - t0, len(msg), 0) + msg)
                continue
            # a non-200 reply's headers as sent (latin-1 keeps every byte: a proxy's localised text, a UTF-8 Location)
            head = b"" if r.status_code == 200 else json.dumps(
                [[k.decode("latin-1"), v.decode("latin-1")] for k, v in r.headers.raw]).encode()
            write(pack(rid, r.status_code, perf() - t0, len(data), len(head)) + data + head)

    workers.extend(asyncio.ensure_future(worker()) for _ in range(conc))
    try:
        await asyncio.gather(*workers, return_exceptions=True)  # until on_eof cancels them
    finally:
        await client.aclose()
        transport.close()


def raise_mmap_threshold() -> None:
    """One 1 MiB block allocated and freed, so glibc's malloc serves the event loop's 256 KiB receive buffers
    from its heap: until a block that large is freed, each one is a fresh mmap, shrunk by mremap and unmapped
    (three system calls and page faults a read; measured: 50-70 µs of CPU a request in this small process,
    whose imports never freed such a block; benchmarks/results/overhead_process.md). Elsewhere than glibc: no
    effect."""
    block = bytearray(1 << 20)
    del block


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    raise_mmap_threshold()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the harness's to handle; the socket ends this
    try:
        asyncio.run(_serve(int(argv[0])))
    except (ConnectionError, OSError, struct.error, ValueError, KeyError) as e:
        print(f"recharness transport process: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
