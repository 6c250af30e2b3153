"""How many CPUs this process may run on: the default thread count of every local model.

`os.cpu_count()` counts the machine's CPUs, not the ones a container's cpuset or `taskset` grants: a backend
that starts that many threads on two allowed cores (llama.cpp's threads wait for each other at every step)
runs many times slower than with two.
"""

from __future__ import annotations

import os


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity), else the machine's count; at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no sched_getaffinity (macOS, Windows)
        return max(1, os.cpu_count() or 1)
