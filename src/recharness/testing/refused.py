"""A loopback URL that refuses connections for as long as it is held, for "server is down" tests.

A port found free and let go (`free_port`) can be bound by another process a moment later (a parallel test
worker's server), and the "down" server then answers. A socket bound to the port but never listening keeps
the port taken and makes the kernel refuse every connection to it.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def refusing_url(path: str = "/v1") -> Iterator[str]:
    """`http://127.0.0.1:PORT{path}` whose port refuses connections until the block ends."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused, nobody else can bind it
        yield f"http://127.0.0.1:{s.getsockname()[1]}{path}"
