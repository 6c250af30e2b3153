"""Pieces of the fit loops that SASRec, SID-SASRec and the DLRMs share: the early-stopping rule
(with the best epoch's weights), the epoch checkpoints of a killed fit (SASRec, SID-SASRec) and the
rich progress bar, so the three stop, resume and report alike.
Under `epoch_lines(say)` (what `recharness train` and `eval` use) the bar is one line per epoch
instead (loss, validation metric, best so far), for a terminal and a log file alike."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: `recharness train` sets `epoch_lines` without importing torch
    import torch
    from torch import nn


class EarlyStopping:
    """Stop after `patience` epochs in a row without a strictly better validation score, keeping a
    copy of the best epoch's weights to put back (the last epoch is rarely the best)."""

    def __init__(self, patience: int):
        self.patience = patience
        self.best = float("-inf")
        self.best_epoch: int | None = None
        self.best_state: dict[str, torch.Tensor] | None = None
        self.stale = 0

    def update(self, score: float, epoch: int, model: nn.Module) -> bool:
        """Record an epoch's score (a better one snapshots `model`'s weights); True: stop training."""
        if score > self.best:
            self.best, self.stale, self.best_epoch = score, 0, epoch
            self.best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
            return False
        self.stale += 1
        return self.stale >= self.patience

    def restore(self, model: nn.Module) -> None:
        """Put the best epoch's weights back into `model` (nothing when no epoch was scored)."""
        if self.best_state is not None:
            model.load_state_dict(self.best_state)


def resume_fit(checkpoint, net: nn.Module, opt, gen: torch.Generator, stopper: EarlyStopping) -> dict | None:
    """Put a killed fit's last whole epoch back (`core.fit_checkpoint.EpochCheckpoint`, None: no checkpoints): the
    weights, the optimiser, the shuffling generator `gen`, torch's global RNG (dropout) and `stopper`.
    Returns the loop's other state as `save_fit` was given it (with "epoch"), or None to start at epoch 1."""
    import torch

    from recharness.core.fit_checkpoint import same_shapes

    saved = checkpoint.load() if checkpoint is not None else None
    if saved is None:
        return None
    tensors, state = saved
    if not same_shapes(tensors["net"], net):
        return None  # another network (the stamp should have said so): start at epoch 1, nothing half-loaded
    net.load_state_dict(tensors["net"])
    opt.load_state_dict(tensors["opt"])
    gen.set_state(tensors["gen"])
    torch.set_rng_state(tensors["rng"])
    stopper.best, stopper.best_epoch, stopper.stale = state["best"], state["best_epoch"], state["stale"]
    stopper.best_state = tensors.get("best_state")
    return state


def data_hash(*parts) -> str:
    """sha256 of a fit's data (tensors, lists, vocabularies), for its checkpoint's stamp."""
    import hashlib
    import json

    import torch

    h = hashlib.sha256()
    for part in parts:
        h.update(part.contiguous().numpy().tobytes() if isinstance(part, torch.Tensor)
                 else json.dumps(part, default=str).encode())
        h.update(b"\0")
    return h.hexdigest()


def save_fit(checkpoint, epoch: int, net: nn.Module, opt, gen: torch.Generator, stopper: EarlyStopping,
             state: dict) -> None:
    """Checkpoint the fit after `epoch` (what `resume_fit` puts back; `state`: the loop's counters and log,
    plain values); nothing when `checkpoint` is None."""
    import torch

    if checkpoint is None:
        return
    checkpoint.save(epoch, {"net": net.state_dict(), "opt": opt.state_dict(), "gen": gen.get_state(),
                            "rng": torch.get_rng_state(), "best_state": stopper.best_state},
                    {**state, "epoch": epoch, "best": stopper.best, "best_epoch": stopper.best_epoch,
                     "stale": stopper.stale})


_LINES: list[Callable[[str], None]] = []  # the innermost `epoch_lines` sink last


@contextmanager
def epoch_lines(say: Callable[[str], None]) -> Iterator[None]:
    """Within it, the fit loops' progress bars are lines given to `say`: one per epoch (its status:
    loss, validation metric, best so far), whether or not stderr is a terminal."""
    _LINES.append(say)
    try:
        yield
    finally:
        _LINES.remove(say)


class _EpochLines:
    """The part of a rich Progress the fit loops use, as one line per epoch: a `status` update (sent
    once per epoch, after validation) becomes "<description>: <status>"; an `advance` without a status (a
    resumed fit's epochs) moves the count on silently; the other fields are ignored."""

    def __init__(self, say: Callable[[str], None], description: str):
        self.say, self.description, self.task_ids, self.epoch = say, description, [0], 0

    def reset(self, task_id, *, description: str | None = None, **_) -> None:
        if description is not None:
            self.description = description

    def update(self, task_id, *, status: str | None = None, advance: float | None = None, **_) -> None:
        if not status:  # epochs passed over without a line: a resumed fit's, taken from its checkpoint
            self.epoch += int(advance or 0)
        else:
            self.epoch += 1
            label = self.description if "epoch " in self.description else f"{self.description} {self.epoch}".strip()
            self.say(f"{label}: {status}")

    def stop(self) -> None:
        pass


def progress_bar(enabled: bool, total: int = 1, description: str = "", *, rate: bool = False):
    """A started, transient rich bar on stderr with one task (fields "status" and, with `rate`,
    "rate"), or None when disabled or stderr is not a terminal: logs and pipes get no bar. Under
    `epoch_lines`, one line per epoch instead."""
    if enabled and _LINES:
        return _EpochLines(_LINES[-1], description)
    if not (enabled and sys.stderr.isatty()):
        return None
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    columns = [TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn()]
    if rate:
        columns.append(TextColumn("{task.fields[rate]}"))
    columns += [TimeElapsedColumn(), TextColumn("{task.fields[status]}")]
    bar = Progress(*columns, console=Console(stderr=True), transient=True)
    bar.start()
    bar.add_task(description, total=total, status="", **({"rate": ""} if rate else {}))
    return bar
