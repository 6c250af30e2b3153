"""Start llama.cpp's OpenAI-compatible server for a local model.

The same GGUF, chat template and greedy decoding as the in-process backend,
so `--model openai:NAME@URL` against it reproduces in-process predictions.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

from recharness.core.cpus import usable_cpus
from recharness.core.errors import ConfigError, RecharnessError
from recharness.models.builtin import BUILTIN_MODELS, fetch_model


def server_command(model: str, *, host: str = "127.0.0.1", port: int = 8000, n_ctx: int | None = None,
                   n_threads: int | None = None) -> list[str]:
    if model in BUILTIN_MODELS:
        path = fetch_model(model)
        n_ctx = n_ctx or BUILTIN_MODELS[model].n_ctx
        alias = model
    else:
        path = Path(model)
        if not path.exists():
            raise ConfigError(f"{model!r} is neither a built-in model nor a GGUF file")
        alias = path.stem
        n_ctx = n_ctx or 4096
    try:
        import llama_cpp.server  # noqa: F401
    except ImportError:
        from recharness.models.llama_build import install_hint

        raise ConfigError(f"the server needs llama-cpp-python with its server extra: {install_hint()}") from None
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(path), "--model_alias", alias,
           "--host", host, "--port", str(port), "--n_ctx", str(n_ctx)]
    # llama.cpp's server uses half the cores by default; the in-process backend all it may run on.
    cmd += ["--n_threads", str(n_threads or usable_cpus())]
    return cmd


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_ready(base_url: str, proc: subprocess.Popen | None = None, timeout_s: float = 120.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RecharnessError(f"server exited with code {proc.returncode} before it was ready")
        try:
            if httpx.get(f"{base_url}/models", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RecharnessError(f"server at {base_url} not ready after {timeout_s:.0f} s")


class LocalServer:
    """A llama.cpp server on a free loopback port, for tests and benchmarks."""

    def __init__(self, model: str, port: int | None = None, n_ctx: int | None = None, log_path: Path | None = None,
                 n_threads: int | None = None):
        self.port = port or free_port()
        self.model = model
        self.cmd = server_command(model, port=self.port, n_ctx=n_ctx, n_threads=n_threads)
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> LocalServer:
        log = open(self.log_path, "wb") if self.log_path else subprocess.DEVNULL
        self.proc = subprocess.Popen(self.cmd, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_until_ready(self.base_url, self.proc)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def __exit__(self, *exc):
        self.stop()
