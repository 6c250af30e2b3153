"""Training examples for fine-tuning, from a build's own training split (never its test samples).

A RecBench build writes its training part beside its samples (`recbench.data`, `recbench.seqrec_data`):

* ctr: `<run>/recbench/train.parquet`, labelled pairs strictly before each test user's test window;
  an example is the same prompt as a test sample (`ctr_messages`, the build's prompt options) with
  the answer "Yes" (label 1) or "No" (label 0); with an item vocabulary (Groups D/F) the items are
  written as identifiers instead (`items.ItemVocab.ctr_messages`).
* seqrec: `<run>/recbench/seqrec_train.parquet`, windows of each user's positives before their
  validation and test targets; an example is the history in item tokens (`items.ItemVocab`) and
  the answer the target's tokens.

`check_disjoint` refuses examples that coincide with a test sample (same user and item for ctr,
same user and target for seqrec, or the same prompt), so a mistake upstream cannot leak.

PerRecBench's examples (held-out user groups, none sharing a user or query item with the build) are
in `perrecbench_examples`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from recharness.baselines.base import SEQUENCE_PARTS, pairs_path
from recharness.core.errors import ConfigError
from recharness.core.rundir import RunDir

SUITE = "recbench"


@dataclass(frozen=True)
class Example:
    """One supervised example: a chat prompt and the answer text the loss is computed on."""

    id: str
    messages: list[dict]
    answer: str
    #: ctr: the label (1 = click); seqrec: None
    label: int | None = None
    #: what identifies it against the test samples: (user_id, item_id) or (user_id, target)
    key: tuple[str, str] | None = None
    #: perrecbench: every user of the group the example comes from (checked against the build's users)
    users: tuple[str, ...] = ()


def fingerprint(examples: list[Example]) -> str:
    """A hash of the examples in order (prompts and answers): a checkpoint only resumes the same data."""
    h = hashlib.sha256()
    for e in examples:
        h.update(json.dumps([e.messages, e.answer], sort_keys=True).encode())
    return h.hexdigest()[:16]


def _build_info(run_dir: Path) -> dict:
    return RunDir(run_dir).build_info()


def _test_samples(run_dir: Path, task: str) -> list[dict]:
    from recharness.core.io import read_jsonl

    path = RunDir(run_dir).samples_jsonl
    return [s for s in read_jsonl(path) if s.get("task") == task] if path.exists() else []


def _sample(df: pl.DataFrame, limit: int | None, seed: int) -> pl.DataFrame:
    """A seeded sample of `limit` rows, in their file order (all rows when limit is None)."""
    if limit is None or limit >= df.height:
        return df
    take = np.sort(np.random.default_rng(seed).choice(df.height, size=limit, replace=False))
    return df[take]


def ctr_examples(run_dir: Path, dataset, *, limit: int | None = None, seed: int = 0, vocab=None) -> list[Example]:
    """Yes/No examples from the build's training pairs, prompted exactly like its test samples (text
    items), or with `vocab`'s item identifiers."""
    from recharness.tasks.options import check
    from recharness.tasks.recbench.ctr import ctr_messages
    from recharness.tasks.recbench.options import CtrOptions

    info = _build_info(run_dir)
    path = pairs_path(run_dir, SUITE)
    if not path.exists():
        raise ConfigError(f"no training pairs in {path}: build the run with `recharness build recbench -t ctr`")
    opts = check(CtrOptions, info.get("options") or {}, f"{SUITE}/ctr")
    prompt = {"task_description": opts.task_description, "behaviour": opts.behaviour,
              "format_indicator": opts.format_indicator}
    titles = {i: t or i for i, t in zip(dataset.items["item_id"].to_list(), dataset.items["title"].to_list())}
    pairs = _sample(pl.read_parquet(path), limit, seed)
    def messages(h: list[str], i: str) -> list[dict]:
        if vocab is not None:
            return vocab.ctr_messages(h, i)
        return ctr_messages([titles.get(x, x) for x in h], titles.get(i, i), **prompt)

    out = [Example(id=f"train-ctr-{u}-{i}", messages=messages(h, i), answer="Yes" if y == 1 else "No", label=int(y),
                   key=(u, i))
           for u, i, y, h in pairs.select("user_id", "item_id", "label", "history").iter_rows()]
    check_disjoint(out, _test_samples(run_dir, "ctr"), lambda s: (s["user_id"], s["item_id"]))
    return out


def seqrec_examples(run_dir: Path, vocab, *, limit: int | None = None, seed: int = 0) -> list[Example]:
    """Next-item examples from the build's training windows, history and target in `vocab`'s item tokens."""
    path = pairs_path(run_dir, SUITE, SEQUENCE_PARTS["train"])
    if not path.exists():
        raise ConfigError(f"no training sequences in {path}: build the run with `recharness build recbench -t seqrec`")
    rows = _sample(pl.read_parquet(path), limit, seed)
    out = [Example(id=f"train-seqrec-{k}", messages=vocab.messages(h), answer=vocab.text(t), key=(u, t))
           for k, (u, h, t) in enumerate(rows.select("user_id", "history", "target").iter_rows())
           if t in vocab.items]
    tests = _test_samples(run_dir, "seqrec")
    check_disjoint(out, tests, lambda s: (s["user_id"], s["target"]))
    return out


def check_disjoint(examples: list[Example], samples: list[dict], key) -> None:
    """ConfigError if any example is a test sample (same key, or the same prompt and answer)."""
    test_keys = {key(s) for s in samples}
    test_prompts = {json.dumps(s.get("messages"), sort_keys=True) for s in samples if s.get("messages")}
    for e in examples:
        if e.key in test_keys or json.dumps(e.messages, sort_keys=True) in test_prompts:
            raise ConfigError(f"training example {e.id} coincides with a test sample: the build's training "
                              "split overlaps its test samples; rebuild the run")
