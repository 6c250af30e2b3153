"""The types every layer shares: what a model is asked and answers, what a task records and scores.

They sit at the bottom of the package (core/ imports nothing else of recharness) so models,
baselines, tasks, the executor and the report speak one vocabulary without importing each other.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Messages = list[dict[str, str]]


def is_number(v) -> bool:
    """A finite int or float, not a bool: what a record's numeric field (a latency, a count, a rating) must hold.
    An int too large for a float (JSON allows 10**400) is not one: every reader averages these as floats, and
    `math.isfinite` raises OverflowError on it, a traceback where a bad line must get a clear error."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        return math.isfinite(v)
    except OverflowError:
        return False


def is_whole(v) -> bool:
    """An int, not a bool (JSON's true is no count): a seed, a limit, a user index as a file gives it."""
    return isinstance(v, int) and not isinstance(v, bool)


class GenerationParams(BaseModel):
    """Decoding settings; part of the cache key, so two runs with equal params share answers."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_tokens: int = Field(256, ge=1, le=32768)
    temperature: float = Field(0.0, ge=0.0, le=5.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    seed: int = 0
    stop: tuple[str, ...] = ()


@dataclass
class Completion:
    text: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_s: float = 0.0
    finish_reason: str | None = None
    cached: bool = False

    def to_dict(self) -> dict:
        """The fields as a dict: a shallow one (every field is a str, number or None), not `asdict`'s
        recursive copy, which cost ~4 µs per cached answer (benchmarks/results/overhead.md)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass
class OptionScores:
    """Log-probabilities of each answer option as the model's next output."""

    logprobs: dict[str, float]
    latency_s: float = 0.0
    cached: bool = False
    extra: dict = field(default_factory=dict)

    def probabilities(self) -> dict[str, float]:
        """Normalised over the options only (e.g. P(Yes) / (P(Yes) + P(No)))."""
        finite = [v for v in self.logprobs.values() if v > -math.inf]
        if not finite:
            return {k: 1.0 / len(self.logprobs) for k in self.logprobs}
        m = max(finite)
        exp = {k: (math.exp(v - m) if v > -math.inf else 0.0) for k, v in self.logprobs.items()}
        z = sum(exp.values())
        return {k: v / z for k, v in exp.items()}


@dataclass(frozen=True)
class ConstrainedRequest:
    """Rank the valid token paths as the answer to a chat prompt: constrained beam search (CBS).

    For answers that must be one of a known set: catalog titles, item IDs, semantic IDs. The paths
    are in the backend's own token ids (spell text with its `tokenize`).
    """

    messages: Messages
    #: the valid paths: a `models.cbs.Trie` (typed loosely: core imports nothing above it)
    trie: Any
    #: beams of the search; at most this many paths come back
    beams: int
    #: text the answer starts with before a path (e.g. "1." to decode the first line of a numbered list)
    answer_start: str = ""
    #: paths never returned (a user's history items): masked at their last token
    forbid: tuple[tuple[int, ...], ...] = ()
    #: a complete path must be followed by the end of the turn: its log-prob counts, the path omits it
    ends_turn: bool = False


@dataclass
class RankedSequences:
    """The answer to a `ConstrainedRequest`: paths, best first, with their cumulative log-probs."""

    paths: list[tuple[int, ...]]
    logprobs: list[float]
    latency_s: float = 0.0


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
    #: `build --users FILE`: exactly these users (a task that selects users one by one honours it and says so
    #: with `selects_users = True`); None: the task's own seeded draw
    users: tuple[str, ...] | None = None


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
    #: 95% bootstrap confidence intervals, per metric (see runner.intervals.add_confidence_intervals):
    #:   lo, hi        the percentile interval
    #:   resamples     resamples it rests on; units: "samples", "users", "groups" ...; how: how they aggregate
    #:   generic       True when computed by re-scoring resampled samples (the task has no `units`)
    #:   p_vs_best     p-value of this row's difference from the table's best row (`p_test`: "exact", the
    #:                 sign-flip test up to 20 independent units, AUC's up to 16 and "permutation", 1,000 random
    #:                 flips, to 20; else "bootstrap", the paired bootstrap; a task without units on 20 samples or
    #:                 fewer, `generic`: the paired swap test by re-scoring, "exact" or "permutation")
    #:                 (None for the best row itself; absent for metrics without a better side)
    #:   top           the best row, or not distinguishable from it (p_vs_best >= 0.05)
    ci: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: None when the row covers every sample of the task; else what it covers and why, e.g.
    #: {"answered": 40, "of": 400, "why": "limit"} ("limit": a run limited on purpose, "imported": another
    #: tool's answers, "partial": `score --partial` of an unfinished run). Tables show it as `partial n/M`.
    coverage: dict[str, Any] | None = None
    #: the fingerprint of the build it was scored on (`report` refuses scores of an older build); None in
    #: scores written before it was recorded
    build: str | None = None


def reference_record(sample_id: str, parsed: Any, *, output: str | None = None, valid: bool = True) -> dict:
    """A reference method's prediction for one sample: what `score` reads, nothing a model would add
    (no timings, tokens or attempts: a reference row has none)."""
    rec: dict[str, Any] = {"id": sample_id, "parsed": parsed, "valid": valid}
    if output is not None:
        rec["output"] = output
    return rec


def sample_capped(records) -> bool:
    """Whether a method answered only its first N samples on purpose (a record's parsed answer carries
    `sample_cap`: title-cbs, an id/sid fine-tune run with a limit): it is judged on the samples it answered."""
    return any(isinstance(r, dict) and isinstance(r.get("parsed"), dict) and r["parsed"].get("sample_cap")
               for r in records)
