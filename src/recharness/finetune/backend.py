"""`-m ft:DIR`: a `recharness finetune` model as an ordinary row of `recharness run`.

A text-item fine-tune is a transformers model like any other (`hf:DIR`). An id / sid fine-tune
reads items as its own tokens, so its prompt is built from a sample's items rather than the
sample's text messages: the suite's recipe for the model's task (`Recipe.answerer`, e.g. P(Yes)
after the identifier prompt, or constrained beam search over the catalog's item trie) answers each
sample, through the executor, cached per sample, resumable and written exactly once.
"""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

from recharness.core.errors import ConfigError
from recharness.core.types import Completion, GenerationParams, Messages, OptionScores, Parsed, Prediction
from recharness.models.base import ModelBackend


def finetuned_backend(model_dir: Path, *, beams: int = 20, sample_cap: int | None = None) -> ModelBackend:
    """The backend of a fine-tuned model directory: `hf:DIR` for text items, else an item-token answerer."""
    from recharness.models.hf import HFBackend

    info_path = Path(model_dir) / "finetune.json"
    if not info_path.is_file():
        raise ConfigError(f"ft:{model_dir}: no finetune.json there (a directory written by `recharness finetune`)")
    try:
        info = json.loads(info_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ConfigError(f"ft:{model_dir}: finetune.json is unreadable ({e})") from None
    if (info.get("items") or "text") == "text":
        return HFBackend(str(model_dir))
    return ItemTokenBackend(Path(model_dir), info, beams=beams, sample_cap=sample_cap)


class ItemTokenBackend(ModelBackend):
    """An id / sid fine-tune answering whole samples of its task through its suite's recipe."""

    backend = "ft"
    #: one sample at a time: one model in this process
    max_concurrency = 1

    def __init__(self, model_dir: Path, info: dict, *, beams: int = 20, sample_cap: int | None = None):
        from recharness.finetune.recipe import recipe_for
        from recharness.models.hf import HFBackend
        from recharness.tasks.registry import get_suite

        super().__init__(str(model_dir))
        self.info = info
        suite, task = info.get("suite"), info.get("task")
        if not isinstance(suite, str) or not isinstance(task, str):
            raise ConfigError(f"ft:{model_dir}: finetune.json names no suite and task (written by an older version?)")
        try:
            recipe = recipe_for(get_suite(suite).hook("finetune"), suite, task)
        except ConfigError as e:
            raise ConfigError(f"ft:{model_dir}: {e}") from None
        if recipe.answerer is None:
            raise ConfigError(f"ft:{model_dir}: {suite}/{task} has no way to answer with {info.get('items')} items")
        self.task_name = recipe.task
        self.recipe = recipe
        self.beams, self.sample_cap = beams, sample_cap
        self.hf = HFBackend(str(model_dir))
        self._answer = None
        self._lock = threading.Lock()

    def identity(self) -> dict:
        ident = self.hf.identity()
        if self.recipe.answer_ends_turn:  # a beam search answers: its width is part of what the answers are
            ident = {**ident, "beams": self.beams}
        return ident

    def _answerer(self):
        with self._lock:
            if self._answer is None:
                from recharness.finetune.items import ItemVocab

                self._answer = self.recipe.answerer(self.hf, ItemVocab.load(Path(self.model)), beams=self.beams,
                                                    sample_cap=self.sample_cap)
            return self._answer

    def _answer_sync(self, sample: dict) -> tuple[Parsed, float]:
        return self._answerer()(sample)

    async def aanswer_sample(self, task, sample: dict) -> Prediction:
        if sample.get("task") != self.task_name:
            return Prediction(valid=False, error=f"a {self.task_name} model does not answer {sample.get('task')} "
                                                 "samples", error_kind="wrong_task", attempts=0, latency_s=None)
        parsed, seconds = await asyncio.to_thread(self._answer_sync, sample)
        return Prediction(parsed=parsed.value, valid=parsed.valid, error=parsed.error, latency_s=seconds)

    async def agenerate(self, messages: Messages, params: GenerationParams) -> Completion:
        raise ConfigError(f"ft:{self.model} reads items as its own tokens: it answers a task's samples, not chat")

    async def ascore_options(self, messages: Messages, options: list[str]) -> OptionScores:
        raise ConfigError(f"ft:{self.model} reads items as its own tokens: it answers a task's samples, not chat")
