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
from typing import Any, Literal

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
    #: the suite's per-build context (its `context` factory's result), shared by its tasks
    context: Any = None


#: how the runner asks the model for one sample
#:   generate  chat → text → `parse` (retried once with `format_reminder` when invalid)
#:   options   chat → log-probabilities of `answer_options(sample)` → `parse_options`
#:   custom    the task drives the model itself (`predict`): several calls per sample
RequestKind = Literal["generate", "options", "custom"]


@dataclass
class Prediction:
    """What every path produces for one sample; `to_record` is its predictions-file line (minus id/task/model)."""

    output: str = ""
    parsed: Any = None
    valid: bool = True
    error: str | None = None
    attempts: int = 1
    latency_s: float | None = 0.0
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached: bool = False
    params: dict | None = None
    #: task-specific fields kept in the record (e.g. retry_outputs, calls, profiles), in this order
    extra: dict[str, Any] = field(default_factory=dict)
    #: set for a sample that failed outright (bad response, prompt too long): counted apart from bad answers
    error_kind: str | None = None

    def to_record(self) -> dict:
        rec: dict[str, Any] = {"output": self.output, "parsed": self.parsed, "valid": self.valid, "error": self.error}
        if self.error_kind is not None:
            rec["error_kind"] = self.error_kind
        rec["attempts"] = self.attempts
        rec.update(self.extra)
        rec.update({"latency_s": None if self.latency_s is None else round(self.latency_s, 6),
                    "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                    "cached": self.cached})
        if self.params is not None:
            rec["params"] = self.params
        return rec


@dataclass
class ScoreRow:
    """One row of a results table: a model or a reference method on one task."""

    method: str
    task: str
    metrics: dict[str, float]
    n: int
    kind: str = "model"  # "model" or "reference"
    extra: dict[str, Any] = field(default_factory=dict)
    #: 95% bootstrap confidence intervals, per metric (see runner.pipeline.add_confidence_intervals):
    #:   lo, hi        the percentile interval
    #:   resamples     resamples it rests on; units: "samples", "users", "groups" ...; how: how they aggregate
    #:   generic       True when computed by re-scoring resampled samples (the task has no `units`)
    #:   p_vs_best     paired bootstrap p-value of this row's difference from the table's best row
    #:                 (None for the best row itself; absent for metrics without a better side)
    #:   top           the best row, or not distinguishable from it (p_vs_best >= 0.05)
    ci: dict[str, dict[str, Any]] = field(default_factory=dict)


def reference_record(sample_id: str, parsed: Any, *, output: str | None = None, valid: bool = True) -> dict:
    """A reference method's prediction for one sample: what `score` reads, nothing a model would add
    (no timings, tokens or attempts: a reference row has none)."""
    rec: dict[str, Any] = {"id": sample_id, "parsed": parsed, "valid": valid}
    if output is not None:
        rec["output"] = output
    return rec


class Task(ABC):
    """One task of a suite. Subclasses set `name` and implement build/parse/score;
    `request` says how the runner asks the model (see RequestKind); the hooks
    below have no-op defaults, so the runner never probes for them."""

    name: str = ""
    request: RequestKind = "generate"
    #: the metric charted for the task in report.html and shown in summaries (None: report.html picks)
    headline: str | None = None
    #: short reminder sent once when an answer fails parsing (None: no retry)
    format_reminder: str | None = None
    params: GenerationParams = GenerationParams()
    #: the run directory, set by the pipeline before scoring (tasks that read side files use it)
    run_dir: Path | None = None

    def setup(self, dataset, context: Any = None) -> None:
        """Once before running, parsing or scoring (e.g. build a catalog matcher); `context` as in BuildConfig."""

    async def predict(self, model, sample: dict, *, max_retries: int) -> Prediction:
        """For `request = "custom"`: drive the model (a runner.run.CachedModel) for one sample."""
        raise NotImplementedError(f"task {self.name!r} declares request={self.request!r} but no predict()")

    def answer_options(self, sample: dict) -> list[str]:
        """For `request = "options"`: the answers whose log-probabilities are asked for."""
        raise NotImplementedError(f"task {self.name!r} declares request={self.request!r} but no answer_options()")

    def parse_options(self, sample: dict, scores) -> Parsed:
        """For `request = "options"`: a Parsed from models.base.OptionScores (default: the probabilities)."""
        return Parsed(scores.probabilities())

    def breakdown(self, samples: list[dict], predictions: dict[str, dict]) -> dict[str, dict[str, float]]:
        """Per-group tables ({group: {metric: value}}); empty when the task has none."""
        return {}

    def breakdown_members(self, samples: list[dict]) -> dict[str, list[int]]:
        """{group: indices into `samples`} for the groups of `breakdown` that are plain subsets of the
        samples, so their metrics get intervals from `units` over the subset; {} = no intervals."""
        return {}

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

    def units(self, samples: list[dict], predictions: dict[str, dict]) -> dict[str, Any]:
        """Per-metric evaluation units, for confidence intervals and paired comparisons without re-scoring.

        {metric: recharness.metrics.bootstrap.Units}: for each metric of `score` that gets an
        interval, its units' values (samples, users, groups) and how they aggregate (a mean or
        ratio of per-unit values, an AUC of scores and labels, a corpus BLEU of sentence
        statistics). Each one's point value must equal what `score` reports. The default, {},
        makes the harness resample samples and call `score` once per resample (slower; it may
        use fewer resamples, and says so in the tables).
        """
        return {}

