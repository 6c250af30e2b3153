"""LoRA supervised fine-tuning on CPU (peft), resumable to the same weights.

    settings = LoraSettings(rank=32, alpha=128, lr=1e-4, batch=64)
    result = train(model, tok, examples, settings, checkpoint_dir, on_step=print)

* Loss on the answer tokens only: the base model's hidden states are computed for the whole
  sequence, but `lm_head` (49k x 576 for SmolLM2) only at the positions that predict an answer
  token (for a Yes/No answer: the last prompt state), so the loss costs little beyond the forward.
* A step is one optimizer update over `batch` examples, accumulated over micro-batches of
  `micro_batch` (sorted by length inside the batch to waste less padding); the loss is the mean
  over all answer tokens of the batch, so accumulation equals one big batch.
* Data order: epoch e visits the examples in `default_rng([seed, e]).permutation(n)`; LoRA's init
  and dropout draw from torch's generator seeded by `seed`.
* Checkpoints every `checkpoint_every` steps and at the end, in `<dir>/` written atomically: the
  trainable tensors (LoRA A/B, trainable token rows), AdamW's state, torch's RNG state (tensors,
  read back with `weights_only=True`: no checkpoint file is ever unpickled), numpy/python RNG
  states (JSON), the step, the epoch's order and a fingerprint of the base weights. A killed run
  started again with the same base model, settings and examples resumes from the last checkpoint
  and ends with the same adapter as an uninterrupted run (bit for bit with the same thread count).
  Another base model, other settings or examples: a ConfigError, never a mix.
* The training log: one row per optimizer step (epoch as passes over the examples so far, fractional;
  step; loss; the validation metric and its value, null: no validation pass is run; seconds of
  training so far, every session counted), kept in each checkpoint (`train_log.jsonl` beside its
  tensors) so a resumed run continues it: the steps before the checkpoint are not logged twice, the
  steps after it (lost with the kill) are logged once, as they are run again. `epoch_rows` sums it up
  per epoch (mean loss, best so far), `epoch_line` is the line `recharness finetune` prints.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from recharness.core.errors import ConfigError
from recharness.core.io import write_jsonl_atomic
from recharness.core.rundir import train_log_file
from recharness.finetune._fs import atomic_dir, recover_dir

#: attention projections, as the issue measured (q/k/v/o)
DEFAULT_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")


@dataclass(frozen=True)
class LoraSettings:
    """The paper's pair-wise settings (RecBench §4.3: r=32, α=128, lr 1e-4, batch 64) by default."""

    rank: int = 32
    alpha: int = 128
    lr: float = 1e-4
    batch: int = 64
    micro_batch: int = 8
    epochs: int = 1
    #: optimizer steps to take, cycling epochs as needed; overrides `epochs` (as transformers' Trainer)
    max_steps: int | None = None
    dropout: float = 0.05
    weight_decay: float = 0.0
    seed: int = 0
    checkpoint_every: int = 25
    max_len: int = 1024
    target_modules: tuple[str, ...] = DEFAULT_TARGETS

    def __post_init__(self):
        for k in ("rank", "alpha", "batch", "micro_batch", "epochs", "checkpoint_every", "max_len"):
            if getattr(self, k) < 1:
                raise ConfigError(f"finetune: {k} must be at least 1, got {getattr(self, k)}")
        if not self.lr > 0:
            raise ConfigError(f"finetune: lr must be positive, got {self.lr}")
        if self.max_steps is not None and self.max_steps < 1:
            raise ConfigError(f"finetune: max_steps must be at least 1, got {self.max_steps}")

    def resume_key(self) -> dict:
        """What a checkpoint must agree on to be resumed (not the length of training nor how often it saves)."""
        d = asdict(self)
        for k in ("epochs", "max_steps", "checkpoint_every"):
            d.pop(k)
        d["target_modules"] = list(self.target_modules)
        return d


@dataclass
class Encoded:
    """An example as token ids: `ids[:n_prompt]` is the prompt, the rest the answer."""

    ids: list[int]
    n_prompt: int

    @property
    def n_answer(self) -> int:
        return len(self.ids) - self.n_prompt


@dataclass
class TrainResult:
    steps: int
    total_steps: int
    examples: int
    tokens: int  # tokens processed in this session's steps (prompt + answer)
    seconds: float  # this session's training time (`total_seconds`: all sessions)
    tokens_per_s: float
    final_loss: float | None
    resumed_from: int
    peak_rss_mb: float
    losses: list[float] = field(default_factory=list)
    total_seconds: float = 0.0  # over every session that led to this adapter (resumes included)
    total_tokens: int = 0
    #: one row per optimizer step of every session (`log_row`): the checkpoint's rows, then this session's
    log: list[dict] = field(default_factory=list)
    #: optimizer steps per pass over the examples (an epoch)
    steps_per_epoch: int = 0


def epochs_seen(steps: int, batch: int, n: int) -> float:
    """Passes over the `n` examples that `steps` optimizer steps make (an epoch's last batch may be short)."""
    if n <= 0:
        return 0.0
    per_epoch = math.ceil(n / batch)
    full, rest = divmod(steps, per_epoch)
    return round((full * n + min(rest * batch, n)) / n, 3)


def log_row(step: int, loss: float, seconds: float, *, batch: int, n: int) -> dict:
    """The training log's row of optimizer step `step` (1-based): epoch (passes over the `n` examples so far),
    step, loss, the validation metric (none is computed while fine-tuning: null) and seconds of training so far."""
    return {"epoch": epochs_seen(step, batch, n), "step": int(step), "loss": round(float(loss), 6), "metric": None,
            "valid": None, "seconds": round(float(seconds), 3)}


def continue_log(prior: list[dict], start: int, new: list[dict]) -> list[dict]:
    """The log of a run resumed at step `start`: the `prior` rows of the steps up to `start` (a row of a later step
    was made after the checkpoint and is run again), then the `new` ones; each step once, in order."""
    rows = {int(r["step"]): r for r in prior if isinstance(r.get("step"), int) and r["step"] <= start}
    for r in new:
        rows[int(r["step"])] = r
    return [rows[k] for k in sorted(rows)]


def epoch_rows(log: list[dict], per_epoch: int) -> list[dict]:
    """The step log summed up per epoch (its last step ends it, a last partial epoch too): epoch (passes, as
    the log counts them), step, loss (the mean over the epoch's steps), the validation value where one was
    computed, best (the best validation value so far, else the lowest epoch loss so far) and seconds."""
    out: list[dict] = []
    groups: dict[int, list[dict]] = {}
    for r in log:
        groups.setdefault((int(r["step"]) - 1) // max(1, per_epoch), []).append(r)
    best_valid, best_loss = None, None
    for _, rows in sorted(groups.items()):
        last = rows[-1]
        losses = [float(r["loss"]) for r in rows if isinstance(r.get("loss"), (int, float))]
        loss = sum(losses) / len(losses) if losses else None
        valid = last.get("valid") if isinstance(last.get("valid"), (int, float)) else None
        if valid is not None:
            best_valid = valid if best_valid is None else max(best_valid, valid)
        if loss is not None:
            best_loss = loss if best_loss is None else min(best_loss, loss)
        out.append({"epoch": last.get("epoch"), "step": last["step"], "loss": loss, "metric": last.get("metric"),
                    "valid": valid, "best": best_valid if best_valid is not None else best_loss,
                    "best_of": "valid" if best_valid is not None else "loss", "seconds": last.get("seconds")})
    return out


def epoch_line(name: str, e: dict) -> str:
    """What `recharness finetune` prints at the end of an epoch, as `recharness train` does for its models:
    "NAME epoch 1: loss 0.6123 (best loss 0.6123; no validation) 12.3 s"."""
    ep = e.get("epoch")
    ep_text = f"{ep:g}" if isinstance(ep, (int, float)) else "?"
    loss = f"loss {e['loss']:.4f}" if isinstance(e.get("loss"), (int, float)) else "loss n/a"
    if e.get("valid") is not None:
        tail = f" valid {e.get('metric') or 'metric'} {e['valid']:.4f} (best {e['best']:.4f})"
    else:
        tail = f" (best loss {e['best']:.4f}; no validation)" if isinstance(e.get("best"), (int, float)) else ""
    secs = f" {e['seconds']:.1f} s" if isinstance(e.get("seconds"), (int, float)) else ""
    return f"{name} epoch {ep_text}: {loss}{tail}{secs}"


def stop_reason(settings: LoraSettings, steps: int, resumed_from: int) -> str:
    """Why fine-tuning ended (there is no early stopping: the step budget)."""
    if resumed_from >= steps:
        return f"already trained to step {steps} (its checkpoint): nothing left to train"
    if settings.max_steps is not None:
        return f"reached max_steps={settings.max_steps}"
    return f"reached epochs={settings.epochs} ({steps} steps)"


def encode(tok, messages: list[dict], answer: str, answer_suffix: list[int] = ()) -> Encoded:
    """Prompt as the hf backend renders it (`HFBackend._prompt_ids`: chat template with the generation
    prompt, no extra special tokens), then the answer's tokens (and `answer_suffix`, e.g. end of turn)."""
    text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    prompt = tok(text, add_special_tokens=False)["input_ids"]
    ans = tok(answer, add_special_tokens=False)["input_ids"] + list(answer_suffix)
    if not ans:
        raise ConfigError(f"finetune: the answer {answer!r} encodes to no tokens")
    return Encoded(list(prompt) + list(ans), len(prompt))


def attach_lora(model, settings: LoraSettings, trainable_tokens: list[int] | None = None):
    """The model wrapped by peft: LoRA on `target_modules`, plus trainable rows of the (tied) embedding
    for added item tokens (`trainable_token_indices`: 4M parameters instead of copying the matrix)."""
    import torch
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(settings.seed)
    kw = {}
    if trainable_tokens:
        kw["trainable_token_indices"] = {"embed_tokens": sorted(int(t) for t in trainable_tokens)}
    cfg = LoraConfig(r=settings.rank, lora_alpha=settings.alpha, lora_dropout=settings.dropout,
                     target_modules=list(settings.target_modules), bias="none", task_type="CAUSAL_LM", **kw)
    return get_peft_model(model, cfg)


def trainable_state(model) -> dict:
    return {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


def _rss_peak_mb() -> float:
    try:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux
    except (ImportError, OSError):
        return float("nan")


def _order(n: int, seed: int, epoch: int) -> np.ndarray:
    return np.random.default_rng([seed, epoch]).permutation(n)


def _batch_loss(model, batch: list[Encoded], pad_id: int):
    """Summed cross-entropy of the answer tokens of `batch` (one forward), and their count."""
    import torch
    import torch.nn.functional as F

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    width = max(len(e.ids) for e in batch)
    x = torch.full((len(batch), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    rows, cols, targets = [], [], []
    for b, e in enumerate(batch):
        x[b, :len(e.ids)] = torch.tensor(e.ids)
        mask[b, :len(e.ids)] = 1
        for p in range(e.n_prompt, len(e.ids)):  # state at p-1 predicts token p
            rows.append(b)
            cols.append(p - 1)
            targets.append(e.ids[p])
    hidden = base.model(input_ids=x, attention_mask=mask).last_hidden_state
    h = hidden[torch.tensor(rows), torch.tensor(cols)]
    logits = base.get_output_embeddings()(h).float()
    return F.cross_entropy(logits, torch.tensor(targets), reduction="sum"), len(targets)


def base_fingerprint(model, sample: int = 1024) -> str:
    """A cheap fingerprint of the frozen (base) weights of `model`: each frozen tensor's name (without
    peft's `base_layer`), shape, dtype and `sample` evenly spaced values. Two base models (or a base
    whose added-token rows differ) give different fingerprints; LoRA and trainable tokens are left out."""
    import torch

    h = hashlib.sha256()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.requires_grad:
                continue
            flat = p.detach().reshape(-1)
            if flat.numel() > sample:
                flat = flat[torch.arange(sample, dtype=torch.int64) * (flat.numel() - 1) // (sample - 1)]
            h.update(f"{name.replace('.base_layer', '')}|{tuple(p.shape)}|{p.dtype}|".encode())
            h.update(flat.float().cpu().numpy().tobytes())
    return h.hexdigest()[:16]


def _rng_json() -> dict:
    """numpy's and python's global RNG states as plain JSON (lists and numbers)."""
    name, keys, pos, has_gauss, cached = np.random.get_state()
    version, internal, gauss_next = random.getstate()
    return {"numpy": [name, keys.tolist(), int(pos), int(has_gauss), float(cached)],
            "python": [version, list(internal), gauss_next]}


def _set_rng_json(d: dict) -> None:
    name, keys, pos, has_gauss, cached = d["numpy"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), int(pos), int(has_gauss), float(cached)))
    version, internal, gauss_next = d["python"]
    random.setstate((int(version), tuple(int(x) for x in internal), gauss_next))


def _save(ckpt: Path, model, optimizer, step: int, meta: dict, log: list[dict] | None = None) -> None:
    import torch

    with atomic_dir(ckpt) as tmp:
        if log is not None:  # the training log up to this step: a resumed run continues it
            write_jsonl_atomic(train_log_file(tmp), log)
        torch.save(trainable_state(model), tmp / "trainable.pt")
        torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
        torch.save(torch.get_rng_state(), tmp / "torch_rng.pt")  # a uint8 tensor
        (tmp / "rng.json").write_text(json.dumps(_rng_json()))
        (tmp / "state.json").write_text(json.dumps({**meta, "step": step}, indent=2))


def _load(ckpt: Path, model, optimizer, meta: dict) -> tuple[int, dict]:
    """Restore the checkpoint in `ckpt` (if any): returns the step it reached and its state."""
    import torch

    if not recover_dir(ckpt, "state.json"):
        return 0, {}
    state = json.loads((ckpt / "state.json").read_text())
    again = "remove it to start over, or train into another directory"
    if state.get("base_weights") != meta.get("base_weights"):
        raise ConfigError(f"the checkpoint in {ckpt} was made from another base model "
                          f"({state.get('base_model') or '?'}, weights {state.get('base_weights')}) than this run's "
                          f"({meta.get('base_model') or '?'}, weights {meta.get('base_weights')}): {again}")
    for k in ("settings", "examples", "n_examples", "trainable_tokens"):
        if state.get(k) != meta.get(k):
            raise ConfigError(f"the checkpoint in {ckpt} was made with other {k.replace('_', ' ')} "
                              f"({state.get(k)} vs {meta.get(k)}): {again}")
    tensors = torch.load(ckpt / "trainable.pt", weights_only=True)
    params = dict(model.named_parameters())
    with torch.no_grad():
        for n, t in tensors.items():
            params[n].copy_(t)
    optimizer.load_state_dict(torch.load(ckpt / "optimizer.pt", weights_only=True))
    torch.set_rng_state(torch.load(ckpt / "torch_rng.pt", weights_only=True))
    _set_rng_json(json.loads((ckpt / "rng.json").read_text()))
    return int(state["step"]), state


def checkpoint_log(ckpt: Path | None) -> list[dict]:
    """The training log a checkpoint keeps (older checkpoints kept none: [])."""
    if ckpt is None or not train_log_file(ckpt).exists():
        return []
    rows = []
    for line in train_log_file(ckpt).read_text().splitlines():
        if line.strip():
            try:
                rows.append(json.loads(line))
            except ValueError:  # a checkpoint is written atomically: a bad line is not expected; skip it
                continue
    return rows


def train(model, tok, data: list[Encoded], settings: LoraSettings, checkpoint_dir: Path | None, *,
          meta: dict | None = None, on_step: Callable[[dict], None] | None = None,
          on_epoch: Callable[[dict], None] | None = None) -> TrainResult:
    """Train the peft `model` on `data` (see the module docstring); returns this session's figures.

    `meta` (base model spec, examples fingerprint, trainable tokens) is stored with each checkpoint
    and, with the settings and `base_fingerprint(model)`, must match to resume. `on_step(info)` is called after
    every optimizer step with step, total, loss, tokens/s; `on_epoch(row)` at the end of each epoch (and of a
    last partial one) with its `epoch_rows` summary."""
    import torch

    if not data:
        raise ConfigError("finetune: no training examples")
    n = len(data)
    per_epoch = math.ceil(n / settings.batch)
    total = settings.max_steps if settings.max_steps is not None else per_epoch * settings.epochs  # as HF Trainer
    meta = {"settings": settings.resume_key(), "n_examples": n, **(meta or {}),
            "base_weights": base_fingerprint(model)}
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=settings.lr, weight_decay=settings.weight_decay)
    ckpt = Path(checkpoint_dir) if checkpoint_dir is not None else None
    torch.manual_seed(settings.seed)  # dropout's stream; LoRA's init drew from it in attach_lora
    np.random.seed(settings.seed)
    random.seed(settings.seed)
    start, prior = _load(ckpt, model, optimizer, meta) if ckpt is not None else (0, {})
    if start > total:  # its weights are trained further than asked: they are not a model of `total` steps
        raise ConfigError(f"the checkpoint in {ckpt} is at step {start}, past this run's {total} steps (a smaller "
                          f"--max-steps or --epochs than it was trained with): remove it to train {total} steps, or "
                          f"ask for at least {start}")
    prior_s, prior_tokens = float(prior.get("seconds", 0.0)), int(prior.get("tokens", 0))
    log = continue_log(checkpoint_log(ckpt) if start else [], start, [])
    pad = tok.pad_token_id if tok.pad_token_id is not None else (tok.eos_token_id or 0)
    model.train()
    t0 = time.perf_counter()
    tokens = 0
    losses: list[float] = []
    order_epoch, order = -1, None
    for step in range(start, total):
        epoch, k = divmod(step, per_epoch)
        if epoch != order_epoch:
            order_epoch, order = epoch, _order(n, settings.seed, epoch)
        idx = order[k * settings.batch:(k + 1) * settings.batch]
        items = sorted((data[i] for i in idx), key=lambda e: len(e.ids))
        n_answer = sum(e.n_answer for e in items)
        step_loss = 0.0
        for a in range(0, len(items), settings.micro_batch):
            mb = items[a:a + settings.micro_batch]
            loss_sum, _ = _batch_loss(model, mb, pad)
            (loss_sum / n_answer).backward()
            step_loss += float(loss_sum.detach())
            tokens += sum(len(e.ids) for e in mb)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(step_loss / n_answer)
        done = step + 1
        log.append(log_row(done, losses[-1], prior_s + time.perf_counter() - t0, batch=settings.batch, n=n))
        if ckpt is not None and (done % settings.checkpoint_every == 0 or done == total):
            _save(ckpt, model, optimizer, done, {**meta, "epoch": epoch, "order": order.tolist(), "loss": losses[-1],
                                                 "seconds": prior_s + time.perf_counter() - t0,
                                                 "tokens": prior_tokens + tokens}, log)
        if on_step is not None:
            el = time.perf_counter() - t0
            on_step({"step": done, "total": total, "epoch": epoch, "loss": losses[-1],
                     "tokens_per_s": tokens / el if el > 0 else 0.0, "tokens": tokens})
        if on_epoch is not None and (done % per_epoch == 0 or done == total):
            on_epoch(epoch_rows(log, per_epoch)[-1])
    model.eval()
    el = time.perf_counter() - t0
    return TrainResult(steps=total, total_steps=total, examples=n, tokens=tokens, seconds=el,
                       tokens_per_s=tokens / el if el > 0 else 0.0,
                       final_loss=losses[-1] if losses else prior.get("loss"), resumed_from=start,
                       peak_rss_mb=_rss_peak_mb(), losses=losses, total_seconds=prior_s + el,
                       total_tokens=prior_tokens + tokens, log=log, steps_per_epoch=per_epoch)


def answer_logprobs(model, tok, data: list[Encoded]) -> list[float]:
    """Each example's total log-probability of its answer tokens under `model` (eval mode, no gradients)."""
    import torch

    pad = tok.pad_token_id if tok.pad_token_id is not None else (tok.eos_token_id or 0)
    was_training = model.training
    model.eval()
    out: list[float] = []
    with torch.no_grad():
        for e in data:  # one at a time: no padding
            loss, _ = _batch_loss(model, [e], pad)
            out.append(-float(loss))
    if was_training:
        model.train()
    return out
