"""Pieces of the fit loops that SASRec, SID-SASRec and the DLRMs share: the early-stopping rule
(with the best epoch's weights) and the rich progress bar, so the three stop and report alike."""

from __future__ import annotations

import sys

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


def progress_bar(enabled: bool, total: int = 1, description: str = "", *, rate: bool = False):
    """A started, transient rich bar on stderr with one task (fields "status" and, with `rate`,
    "rate"), or None when disabled or stderr is not a terminal: logs and pipes get no bar."""
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
