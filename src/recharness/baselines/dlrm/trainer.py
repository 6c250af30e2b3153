"""The fit loop of the DLRMs: Adam on binary cross-entropy, early stopping on validation AUC.

RecBench's settings (§4.3): batch 5,000, learning rate 1e-3. After each epoch the model is scored
on the validation pairs; training stops after `patience` epochs without a better AUC (or at
`max_epochs`) and the best epoch's weights are put back. Seeded: the initial weights, the shuffling
and dropout come from `seed`, inside a forked RNG so the caller's torch random state is untouched.
Under `recharness train` each whole epoch is checkpointed (`core.fit_checkpoint.EpochCheckpoint`, as SASRec's):
a killed fit goes on from its last whole epoch and ends with the weights an uninterrupted fit ends with.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from recharness.baselines.torch_threads import threads
from recharness.baselines.training import EarlyStopping, data_hash, progress_bar, resume_fit, save_fit
from recharness.metrics.classification import auc


@dataclass
class TrainConfig:
    batch_size: int = 5000
    lr: float = 1e-3
    max_epochs: int = 50
    patience: int = 2
    #: L2 on the non-embedding weights (Adam weight decay)
    weight_decay: float = 0.0
    #: lambda * sum of squared entries of the learnable embedding tables, added to the loss
    embedding_l2: float = 0.0
    seed: int = 0
    #: torch intra-op threads while fitting; None leaves torch's setting as it is
    threads: int | None = None
    progress: bool = True


@dataclass
class FitLog:
    epochs: list[dict] = field(default_factory=list)
    best_epoch: int = 0
    best_auc: float = float("nan")
    #: the fit's seconds, a killed fit's earlier sittings included (`earlier_sittings_s`)
    seconds: float = 0.0
    #: set when the fit went on from a checkpoint: the last epoch it held, and the seconds spent before
    resumed_after_epoch: int | None = None
    earlier_sittings_s: float = 0.0


def to_tensors(arrays: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    return {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in arrays.items()}


def _take(x: dict[str, torch.Tensor], idx) -> dict[str, torch.Tensor]:
    return {k: v[idx] for k, v in x.items()}


#: below this many rows a forward pass runs on one thread: splitting a single sample's few small
#: matmuls costs more than it saves, and far more when the cores are busy (OpenMP spin-waits)
SMALL_BATCH = 256


@torch.inference_mode()
def predict_proba(model: nn.Module, x: dict[str, torch.Tensor], batch_size: int = 20000) -> np.ndarray:
    """Click probabilities for every row of `x`, in eval mode (restores the previous mode)."""
    was_training = model.training
    if was_training:
        model.eval()
    n = next(iter(x.values())).shape[0]
    with threads(1 if n < SMALL_BATCH else None):
        out = [model(_take(x, slice(a, a + batch_size))).reshape(-1) for a in range(0, n, batch_size)]
    if was_training:
        model.train()
    return torch.cat(out).double().numpy() if out else np.zeros(0)


def _embedding_tables(model: nn.Module) -> list[nn.Parameter]:
    seen, out = set(), []
    for m in model.modules():
        if isinstance(m, nn.Embedding) and m.weight.requires_grad and id(m.weight) not in seen:
            seen.add(id(m.weight))
            out.append(m.weight)
    return out


def fit(model: nn.Module, train_x: dict[str, torch.Tensor], train_y: torch.Tensor,
        valid_x: dict[str, torch.Tensor], valid_y: np.ndarray, config: TrainConfig, name: str = "dlrm",
        checkpoint=None) -> FitLog:
    """Train `model` in place; it ends holding the weights of its best validation epoch. `checkpoint`: an
    `EpochCheckpoint` to save each epoch to and go on from (None: none)."""
    t0 = time.perf_counter()
    log = FitLog()
    with threads(config.threads), torch.random.fork_rng(devices=[]):
        if checkpoint is not None:  # a checkpoint of other data, network, threads or torch is not resumed
            labels = torch.tensor(np.asarray(valid_y))
            checkpoint.extend(data=data_hash(*train_x.values(), train_y, *valid_x.values(), labels),
                              # the initial weights: the architecture, and the frozen item vectors and title
                              # tokens a text or semantic model holds, which the encoded pairs do not show
                              network=data_hash(*model.state_dict().values()),
                              threads=torch.get_num_threads(), torch=torch.__version__)
        torch.manual_seed(config.seed)
        _fit(model, train_x, train_y.float(), valid_x, np.asarray(valid_y), config, name, log, checkpoint)
    log.seconds = time.perf_counter() - t0 + log.earlier_sittings_s
    return log


def _fit(model, train_x, train_y, valid_x, valid_y, config: TrainConfig, name: str, log: FitLog,
         checkpoint=None) -> None:
    tables = _embedding_tables(model)
    table_ids = {id(p) for p in tables}
    others = [p for p in model.parameters() if p.requires_grad and id(p) not in table_ids]
    opt = torch.optim.Adam([{"params": tables, "weight_decay": 0.0},
                            {"params": others, "weight_decay": config.weight_decay}], lr=config.lr)
    loss_fn = nn.BCELoss()
    gen = torch.Generator().manual_seed(config.seed)
    n = train_y.shape[0]
    can_score = len(valid_y) > 0 and 0 < valid_y.sum() < len(valid_y)
    stopper = EarlyStopping(config.patience)
    bar = progress_bar(config.progress, config.max_epochs, f"{name} epoch")
    steps, start, t_fit = 0, 1, time.perf_counter()
    resumed = resume_fit(checkpoint, model, opt, gen, stopper)
    if resumed is not None:  # a killed fit's last whole epoch: weights, optimiser, RNGs, stopper, log
        log.epochs, steps, start = resumed["epochs"], resumed["steps"], resumed["epoch"] + 1
        log.resumed_after_epoch, log.earlier_sittings_s = resumed["epoch"], round(resumed["fit_s"], 3)
        if bar is not None:
            bar.update(bar.task_ids[0], advance=resumed["epoch"])
    try:
        for epoch in range(start, config.max_epochs + 1):
            t_epoch = time.perf_counter()
            model.train()
            order = torch.randperm(n, generator=gen)
            total, batches = 0.0, 0
            for a in range(0, n, config.batch_size):
                idx = order[a:a + config.batch_size]
                if idx.numel() < 2 and n >= 2:  # BatchNorm cannot train on a batch of one
                    continue
                loss = loss_fn(model(_take(train_x, idx)).reshape(-1), train_y[idx])
                if config.embedding_l2 and tables:
                    loss = loss + config.embedding_l2 * sum(t.pow(2).sum() for t in tables)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                total, batches = total + loss.item(), batches + 1
            steps += batches
            train_s = time.perf_counter() - t_epoch
            # without two classes to validate on, the training loss decides
            score = auc(valid_y, predict_proba(model, valid_x)) if can_score else -total / max(batches, 1)
            # step: optimiser steps so far; train_s: the epoch's training seconds, valid_s its validation's
            log.epochs.append({"epoch": epoch, "step": steps, "loss": total / max(batches, 1), "valid_auc": score,
                               "train_s": round(train_s, 4),
                               "valid_s": round(time.perf_counter() - t_epoch - train_s, 4)})
            if bar is not None:
                bar.update(bar.task_ids[0], advance=1,
                           status=f"loss {total / max(batches, 1):.4f} valid AUC {score:.4f} "
                                  f"(best {max(stopper.best, score):.4f})")
            if stopper.update(score, epoch, model):
                break
            if epoch < config.max_epochs:
                save_fit(checkpoint, epoch, model, opt, gen, stopper, {
                    "epochs": log.epochs, "steps": steps,
                    "fit_s": log.earlier_sittings_s + time.perf_counter() - t_fit})
    finally:
        if bar is not None:
            bar.stop()
    stopper.restore(model)
    model.eval()
    if stopper.best_epoch is not None:
        log.best_epoch = stopper.best_epoch
    log.best_auc = float(stopper.best) if can_score else float("nan")
