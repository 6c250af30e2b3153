"""Local models start as many threads as the CPUs the process may run on, not the machine's count."""

from __future__ import annotations

import os

from recharness.core.cpus import usable_cpus


def test_usable_cpus_is_the_affinity_not_the_machines_count(monkeypatch):
    """Two CPUs granted of 64 (a container's cpuset, `taskset`): llama.cpp started 64 threads, which wait for each
    other at every step on two cores."""
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3, 5}, raising=False)
    assert usable_cpus() == 2
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)  # no affinity call (macOS): the machine's count
    assert usable_cpus() == 64
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert usable_cpus() == 1


def test_local_llama_backends_default_to_the_usable_cpus(monkeypatch, smollm2_path):
    from recharness.models.llamacpp import LlamaCppBackend
    from recharness.models.server import server_command

    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert LlamaCppBackend(smollm2_path).n_threads == 2  # the file is not loaded until it answers
    cmd = server_command(str(smollm2_path))
    assert cmd[cmd.index("--n_threads") + 1] == "2"
    assert LlamaCppBackend(smollm2_path, n_threads=5).n_threads == 5  # as asked
