"""A suite's fine-tuning recipe for one task: what `recharness finetune SUITE -t TASK` trains.

A suite declares its recipes (`register_suite(..., finetune="module:RECIPES")`, {task: Recipe});
`finetune.api` knows no suite: it reads the paper's defaults, the item representations and the
training examples from the recipe. Light on purpose (no torch), so a suite imports it freely.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Recipe:
    #: the canonical task name (output names, finetune.json)
    task: str
    #: `examples(run_dir, dataset, *, items, limit, seed, vocab, groups) -> list[Example]`: training examples
    #: from the build's training split only (never a test sample)
    examples: Callable
    #: item representations it trains (the first is the default): text, id (one token per item), sid
    items: tuple[str, ...] = ("text",)
    #: the paper's LoRA rank and alpha
    lora: tuple[int, int] = (32, 128)
    #: the paper's learning rate, epochs, batch (examples per optimizer step) and longest example (tokens)
    train: dict = field(default_factory=lambda: {"lr": 1e-4, "epochs": 1, "batch": 64, "max_len": 1024})
    #: examples per forward pass unless told (memory grows with it)
    micro_batch: int = 8
    #: the build must hold samples of this task (False: the examples come from elsewhere, e.g. held-out groups)
    needs_test_task: bool = True
    #: an id/sid answer ends the turn (the end-of-turn token is trained: CBS stops there)
    answer_ends_turn: bool = False
    #: the default recipe of its suite
    default: bool = False
    #: `describe(build_info, examples, groups) -> (finetune.json fields, notes for the user)`, or None
    describe: Callable | None = None
    #: `answerer(hf_backend, vocab, *, beams, sample_cap) -> answer(sample) -> (Parsed, seconds)`: how an id/sid
    #: model of this task answers a sample through the backend's requests (`-m ft:DIR`; text models answer as
    #: `hf:DIR`), or None
    answerer: Callable | None = None


def recipe_for(recipes: dict[str, Recipe], suite: str, task: str | None) -> Recipe:
    """The suite's recipe for `task` (any of its spellings; None: the default one), or a ConfigError."""
    from recharness.core.errors import ConfigError

    if task is None:
        return next((r for r in recipes.values() if r.default), next(iter(recipes.values())))
    if task in recipes:
        return recipes[task]
    names = sorted({r.task for r in recipes.values()})
    raise ConfigError(f"{suite} fine-tunes {', '.join(names)}; not {task!r}")
