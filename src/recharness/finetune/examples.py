"""A fine-tuning example and the checks every suite's examples share: one seeded sample of training
rows, the build's test samples to stay disjoint from, a fingerprint of the examples (resume key).

Each suite builds its examples from its build's own training split (never its test samples) in its
own `finetune` module, declared as recipes (`finetune.recipe`): RecBench's ctr / seqrec, PerRecBench's
held-out user groups. `check_disjoint` refuses examples that coincide with a test sample (same key,
or the same prompt), so a mistake upstream cannot leak.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from recharness.core.errors import ConfigError
from recharness.core.rundir import RunDir


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


def build_info(run_dir: Path) -> dict:
    return RunDir(run_dir).build_info()


def test_samples(run_dir: Path, task: str) -> list[dict]:
    from recharness.core.io import read_jsonl

    path = RunDir(run_dir).samples_jsonl
    return [s for s in read_jsonl(path) if s.get("task") == task] if path.exists() else []


def seeded_rows(df: pl.DataFrame, limit: int | None, seed: int) -> pl.DataFrame:
    """A seeded sample of `limit` rows, in their file order (all rows when limit is None)."""
    if limit is None or limit >= df.height:
        return df
    take = np.sort(np.random.default_rng(seed).choice(df.height, size=limit, replace=False))
    return df[take]


def check_disjoint(examples: list[Example], samples: list[dict], key) -> list[Example]:
    """The examples to train on: ConfigError if one is a test sample (the same key: the build's split overlaps its
    test samples); one whose prompt merely equals a test sample's (another user with the same history and
    candidate) is left out, logged, rather than taught the test input, or the whole fine-tune refused."""
    import logging

    test_keys = {key(s) for s in samples}
    test_prompts = {json.dumps(s.get("messages"), sort_keys=True) for s in samples if s.get("messages")}
    kept = []
    for e in examples:
        if e.key in test_keys:
            raise ConfigError(f"training example {e.id} coincides with a test sample: the build's training "
                              "split overlaps its test samples; rebuild the run")
        if json.dumps(e.messages, sort_keys=True) not in test_prompts:
            kept.append(e)
    if len(kept) < len(examples):
        logging.getLogger(__name__).warning("%d training example(s) left out: their prompt equals a test sample's",
                                            len(examples) - len(kept))
    return kept
