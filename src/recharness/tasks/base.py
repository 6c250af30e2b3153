"""What a benchmark task is to the harness: build samples, parse answers, score.

A sample is a plain dict (one JSONL line) so every stage can be inspected and
re-run on its own. Required keys: `id` (unique in the file), `task`, and
either `messages` (chat to generate from) or `request` (for tasks that
drive the model themselves, e.g. pairwise ranking). Anything else a task
needs at scoring time (targets, candidates) travels in the sample too.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recharness.models.base import GenerationParams


@dataclass
class Parsed:
    """A parsed model answer. `valid=False` answers are kept and counted, never dropped."""

    value: Any
    valid: bool = True
    error: str | None = None


@dataclass
class BuildConfig:
    seed: int = 0
    limit: int | None = None
    options: dict[str, Any] = field(default_factory=dict)
    #: the run directory, for suites that also write files in a published layout
    out: Path | None = None


@dataclass
class ScoreRow:
    """One row of a results table: a model or a reference method on one task."""

    method: str
    task: str
    metrics: dict[str, float]
    n: int
    kind: str = "model"  # "model" or "reference"
    extra: dict[str, Any] = field(default_factory=dict)


class Task(ABC):
    """One task of a suite. Subclasses set `name` and implement build/parse/score."""

    name: str = ""
    #: short reminder sent once when an answer fails parsing (None: no retry)
    format_reminder: str | None = None
    params: GenerationParams = GenerationParams()

    @abstractmethod
    def build(self, dataset, config: BuildConfig) -> Iterator[dict]: ...

    def generation_params(self, sample: dict) -> GenerationParams:
        """The task's defaults; a sample built with `--option max_tokens=N` overrides the length."""
        if sample.get("max_tokens"):
            return self.params.model_copy(update={"max_tokens": int(sample["max_tokens"])})
        return self.params

    @abstractmethod
    def parse(self, sample: dict, text: str) -> Parsed: ...

    @abstractmethod
    def score(self, samples: list[dict], predictions: dict[str, dict]) -> dict[str, float]:
        """Metrics for one method; `predictions` maps sample id → prediction record."""

    def references(self, dataset, samples: list[dict], seed: int = 0) -> dict[str, dict[str, dict]]:
        """Reference methods' predictions, scored by the same `score`: {method: {id: record}}."""
        return {}

    # Optional hooks a task may define:
    #   setup(dataset)                      once before running/parsing (e.g. build a catalog matcher)
    #   async predict(model, sample) -> dict  drive several model calls for one sample (pairwise
    #                                        ranking, profiles); returns the prediction record fields
    #   breakdown(samples, predictions) -> {group: {metric: value}}   per-group tables
