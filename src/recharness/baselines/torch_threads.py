"""torch's thread count for one block of work: the trained baselines (DLRMs, SASRec) fit on a set
number of threads and predict a single sample on one, without changing it for the caller."""

from __future__ import annotations

from contextlib import contextmanager

import torch


@contextmanager
def threads(n: int | None):
    """torch's intra-op thread count set to `n` inside the block (None: left as it is)."""
    old = torch.get_num_threads()
    if n and n != old:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if n and n != old:
            torch.set_num_threads(old)
