"""What a benchmark task is to the harness: build samples, parse answers, score.

A sample is a plain dict (one JSONL line) so every stage can be inspected and
re-run on its own. Required keys: `id` (unique in the file), `task`, and
either `messages` (chat to generate from) or `request` (for tasks that
drive the model themselves, e.g. pairwise ranking). Anything else a task
needs at scoring time (targets, candidates) travels in the sample too.
"""

from __future__ import annotations

import json
import math
import numbers
import types
import typing
from abc import ABC, abstractmethod
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any, is_typeddict

from recharness.core.errors import AnswerError
from recharness.core.types import BuildConfig, GenerationParams, Parsed, Prediction, RequestKind


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
    #: the version of the task's prompt (its template and wording, the reminder, the decoding defaults): raise it
    #: when a change would change a model's answers. A run records it (`<name>.run.json`, each answer) and a
    #: resume under another version is refused, as a resume with another model is
    prompt_version: str = "1"
    #: the run directory, set by the pipeline before scoring (tasks that read side files use it)
    run_dir: Path | None = None
    #: the reference recommenders (`recharness.baselines` names) that answer this task, in row order
    baselines: tuple[str, ...] = ()
    #: the shape of a valid answer's `Parsed.value`: a TypedDict whose required keys are those `score`
    #: reads (a union of TypedDicts: any one of them), or a plain type for a scalar answer; None: not
    #: declared. Every answer scored is checked against it (`check_answers`), whoever made it.
    answer_type: Any = None
    #: decoding settings a run gives on the command line (--temperature, --top-p, --max-tokens, --seed): they
    #: override the task's own, last
    overrides: dict[str, Any] = {}

    #: whether `score`/`units` read the dataset (then the score stage calls `prepare_scoring` first)
    scoring_needs_dataset: bool = False
    #: tasks of the suite this one cannot share a build with (they write different splits of the training
    #: data to the same files): `build` refuses them together, before any work
    builds_apart_from: tuple[str, ...] = ()

    def setup(self, dataset, context: Any = None) -> None:
        """Once before running, parsing or scoring (e.g. build a catalog matcher); `context` as in BuildConfig."""

    def prepare_scoring(self, dataset) -> None:
        """Before `score`/`units` when `scoring_needs_dataset`: what scoring takes from the dataset (e.g. the
        training popularity that beyond-accuracy metrics read); cheaper than `setup`."""

    async def predict(self, model, sample: dict, *, max_retries: int | None) -> Prediction:
        """For `request = "custom"`: drive the model (a execution.executor.CachedModel) for one sample;
        `max_retries` None: the task's own (its build's setting, else 1)."""
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
        """The task's defaults; a sample built with `--option max_tokens=N` overrides the length, the run's
        `overrides` everything they name."""
        params = self.params
        if sample.get("max_tokens"):
            params = params.model_copy(update={"max_tokens": int(sample["max_tokens"])})
        return params.model_copy(update=self.overrides) if self.overrides else params

    @abstractmethod
    def parse(self, sample: dict, text: str) -> Parsed: ...

    @abstractmethod
    def score(self, samples: list[dict], predictions: dict[str, dict]) -> dict[str, float]:
        """Metrics for one method; `predictions` maps sample id → prediction record."""

    def target_rank(self, sample: dict, record: dict | None) -> int | None:
        """The 1-based rank of `sample["target"]` in a prediction record as this task's score reads it (None:
        not ranked), for the report's examples; the default is `listed_rank`."""
        return listed_rank(sample, record)

    def ground_truth_hits(self, sample: dict, record: dict) -> int:
        """How many of `sample["gt"]` (a query's ground-truth items) the answer in `record` holds as this task's
        score reads it, for the report's examples; the default is `listed_hits`."""
        return listed_hits(sample, record)

    def reference_answer(self, ranker, sample: dict) -> Any:
        """A baseline's parsed answer to `sample` through its request kinds (`rank`, `top_k`,
        `target_rank`, `p_click` of a baselines.Ranker): what makes a ranker answer this task."""
        raise ValueError(f"task {self.name!r} takes no ranker's answers (it declares no baselines)")

    def check_answers(self, records: dict[str, dict], method: str) -> None:
        """AnswerError naming the method, task, sample and field when a valid record's `parsed` is not
        of `answer_type` (required keys only: a cheap check, once per scoring)."""
        if self.answer_type is None:
            return
        for sid, rec in records.items():
            if isinstance(rec, dict) and rec.get("valid", True):
                problem = answer_problem(self.answer_type, rec.get("parsed"))
                if problem:
                    raise AnswerError(f"{method}: task {self.name!r}, sample {sid!r}: {problem} (the task's answer "
                                      f"type: {answer_type_name(self.answer_type)})")

    def reference_answers(self, baseline, samples: list[dict]) -> list[Any]:
        """A baseline's parsed answers to `samples`, in order: one `reference_answer` each, unless the
        task asks a batched request kind (`target_ranks`, `p_clicks`) that a trained model answers fast."""
        return [self.reference_answer(baseline, s) for s in samples]

    def import_answer(self, sample: dict, line: dict) -> tuple[dict | None, str | None] | None:
        """`score --predictions`: an imported line's answer in this task's own keys, as
        ({"parsed", "valid", "error"[, "output"]}, None) or (None, why the line is unusable); None (the default):
        the generic keys (items, titles, answer, probability) go through `parse`."""
        return None

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



def _alternatives(answer_type) -> tuple:
    if isinstance(answer_type, types.UnionType) or typing.get_origin(answer_type) is typing.Union:
        return typing.get_args(answer_type)
    return (answer_type,)


def _type_text(tp) -> str:
    """A declared type as the error shows it: "a number", "a number or null", "a list (each a number or null)"."""
    if tp is type(None):
        return "null"
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        return " or ".join(_type_text(a) for a in typing.get_args(tp))
    if typing.get_origin(tp) is list:
        return f"a list (each {_type_text((typing.get_args(tp) or (Any,))[0])})"
    return "a number" if tp in (int, float) else getattr(tp, "__name__", str(tp))


def answer_type_name(answer_type) -> str:
    return " or ".join(getattr(t, "__name__", str(t)) for t in _alternatives(answer_type))


@cache
def _field_types(answer_type) -> dict:
    """A typed answer's fields and their declared types (the tasks' modules postpone annotations)."""
    try:
        return typing.get_type_hints(answer_type)
    except Exception:  # noqa: BLE001 - an annotation that does not resolve: its fields go unchecked
        return {}


def _fits(value, tp) -> bool:
    """`value` as a field declared `tp`: a number is finite and never a bool (`true` is no rating, no rank of 1),
    a list is checked item by item; a type this check does not know passes."""
    if tp is Any:
        return True
    if tp is type(None):
        return value is None
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        return any(_fits(value, a) for a in typing.get_args(tp))
    if tp in (int, float):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return False
        try:
            return math.isfinite(value)
        except OverflowError:  # an int too large for a float
            return False
    if tp is bool:
        return type(value).__name__ in ("bool", "bool_")
    if tp is str:
        return isinstance(value, str)
    if typing.get_origin(tp) is list or tp is list:
        item = (typing.get_args(tp) or (Any,))[0]
        return isinstance(value, (list, tuple)) and all(_fits(v, item) for v in value)
    if typing.get_origin(tp) is dict or tp is dict:
        return isinstance(value, dict)
    return True


def _shown(value) -> str:
    try:
        return json.dumps(value)[:40]
    except (TypeError, ValueError):
        return type(value).__name__


def answer_problem(answer_type, value) -> str | None:
    """What is wrong with `value` as an `answer_type` (see `Task.answer_type`), or None: a required field
    missing, or a field not of its declared type (a rating "four" or `true`, a rank "3": each was scored, or
    raised a traceback, before 2026-11-30)."""
    alternatives = _alternatives(answer_type)
    if isinstance(value, dict):  # a field any alternative declares is of a type it declares ("rank" beside "items")
        declared: dict[str, list] = {}
        for t in alternatives:
            for k, tp in (_field_types(t).items() if is_typeddict(t) else ()):
                declared.setdefault(k, []).append(tp)
        for k, tps in declared.items():
            if k in value and not any(_fits(value[k], tp) for tp in tps):
                return f"its field {k!r} is {_shown(value[k])}, not " + " or ".join(dict.fromkeys(map(_type_text, tps)))
    problems = []
    for t in alternatives:
        if is_typeddict(t):
            if not isinstance(value, dict):
                problems.append(f"the answer is {type(value).__name__}, not an object with fields "
                                f"{', '.join(sorted(t.__required_keys__))}")
                continue
            missing = sorted(t.__required_keys__ - value.keys())
            if not missing:
                return None
            problems.append(f"the answer has no field {missing[0]!r}" + (f" ({', '.join(missing[1:])} neither)"
                                                                        if missing[1:] else ""))
        elif (t is float and isinstance(value, int) and not isinstance(value, bool)) or isinstance(value, t):
            return None
        else:
            problems.append(f"the answer is {type(value).__name__}, not {t.__name__}")
    return "; or ".join(dict.fromkeys(problems))


def listed_hits(sample: dict, record: dict) -> int:
    """The generic count of `sample["gt"]` items in a record: its matched ids (`item_ids`) among them."""
    parsed = record.get("parsed") if isinstance(record.get("parsed"), dict) else {}
    got = {str(x) for x in (parsed.get("item_ids") or []) if x is not None}
    return len(got & {str(x) for x in sample.get("gt") or []})


def listed_rank(sample: dict, record: dict | None) -> int | None:
    """The generic rank of `sample["target"]` in a record: a ranker's `rank`, else its place in the list as
    written (`slots`, else `items` or `ranking`: an entry naming no item or naming one again holds its place,
    as the ranking tasks score); None when not ranked."""
    parsed = (record or {}).get("parsed")
    if not isinstance(parsed, dict):
        return None
    if "rank" in parsed:
        r = parsed["rank"]
        ok = isinstance(r, int | float) and not isinstance(r, bool) and 1 <= r < float("inf")
        return int(r) if ok else None
    listed = parsed.get("slots") if isinstance(parsed.get("slots"), list) else None
    ranked = [None if i is None else str(i) for i in (listed or parsed.get("items") or parsed.get("ranking") or [])]
    target = str(sample.get("target"))
    return ranked.index(target) + 1 if target in ranked else None
