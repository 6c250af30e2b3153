"""LLM-as-judge for explanation generation and review summarization.

Why: BLEU/ROUGE count shared n-grams and miss what the LLMRec paper's human
study saw (a faithful, personal explanation in other words scores ~0). A
judge model (any backend) compares each candidate with the user's real text
and answers in a fixed JSON schema:

    {"faithfulness": 1-5, "personalization": 1-5, "rationale": "..."}

validated by `JUDGE_FORMAT` (validation.JsonObject: whole numbers 1..5, the
trailing-comma tolerance documented there), with one retry carrying a format
reminder. Every judge call goes through the executor (`run_samples`, via
`execution.requests`), so it is cached, bounded and resumable like any other model call (re-judging costs nothing; a new judge or a changed
prompt is a new key).

Files: `judge_run` writes <run>/judgments/<pred-stem>__<judge-slug>.jsonl,
one record per judged sample: id, task, judge (identity), judge_slug,
prediction_file, candidate, candidate_sha (sha256 of the judged text,
16 hex digits), faithfulness, personalization, rationale, valid, error,
output (raw judge answer), attempts, cached, latency_s. Reference rows
(lead words, previous review) are judged too, as ``ref-<method>``.

How `score` picks judgments up (`judge_metrics`): every
<run>/judgments/*.jsonl is read; a judgment applies to a prediction when
its (sample id, candidate_sha) equals the prediction's (id, sha256 of its
validated text) — so stale judgments of an older run are ignored, and the
same text gets the same judgment whichever row produced it. For each judge
slug J that judged at least one of these predictions the row gets:
  faith[J], pers[J]   mean scores; a sample whose candidate was invalid or
                      missing counts as 1 (the floor; the judge is not asked),
                      a sample whose judgment is missing or itself invalid
                      after the retry is left out of the mean; NaN when the
                      judge gave no valid judgment at all;
  judged[J]           share of the samples that entered the mean (0 when
                      the judge never answered in the schema).
The run directory is `task.run_dir` if the pipeline sets it, else the
`run_dir` recorded in the samples at build time.
"""

from __future__ import annotations

import hashlib
import statistics
from pathlib import Path

from recharness.core.io import read_jsonl, write_jsonl_atomic
from recharness.core.types import GenerationParams
from recharness.tasks.llmrec.text_prompts import JUDGE_SCHEMA_TEXT, MAX_REVIEW_CHARS, hypothesis, judge_prompt, short
from recharness.tasks.validation import JsonField, JsonObject

JUDGED_TASKS = ("explanation", "summarization")
JUDGE_FORMAT = JsonObject(
    {
        "faithfulness": JsonField("int", 1, 5),
        "personalization": JsonField("int", 1, 5),
        "rationale": JsonField("str", required=False, max_chars=500),
    },
    last=True,
)
JUDGE_PARAMS = GenerationParams(max_tokens=120)
JUDGE_REMINDER = f"Answer with the JSON object only, exactly in this form: {JUDGE_SCHEMA_TEXT}"

__all__ = ["judge_predictions", "judge_run", "judge_metrics", "candidate_sha", "JUDGE_FORMAT", "JUDGED_TASKS"]


def candidate_sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _question_id(sample_id: str, sha: str) -> str:
    return f"{sample_id}#{sha}"


def _judgment(sample: dict, candidate: str, rec: dict) -> dict:
    """A judgment row from the executor's answer record (parsed, valid, outputs, attempts...)."""
    v = rec.get("parsed") if rec.get("valid") and isinstance(rec.get("parsed"), dict) else {}
    return {
        "id": sample["id"],
        "task": sample["task"],
        "candidate": candidate,
        "candidate_sha": candidate_sha(candidate),
        "faithfulness": v.get("faithfulness"),
        "personalization": v.get("personalization"),
        "rationale": v.get("rationale"),
        "valid": bool(rec.get("valid")),
        "error": rec.get("error"),
        "output": rec.get("output"),
        "attempts": rec.get("attempts"),
        "cached": rec.get("cached"),
        "latency_s": rec.get("latency_s"),
    }


async def judge_predictions(samples: list[dict], predictions: dict[str, dict], judge_model, *, max_retries: int = 1,
                            log: Path | None = None) -> dict[str, dict]:
    """{sample id: judgment} for every explanation/summarization sample with a valid prediction, asked
    through the executor (`execution.requests`): bounded concurrency, cached, one retry with the format
    reminder; `log` keeps the judge's answers so a killed judging resumes. Invalid or missing
    predictions are not sent to the judge (score floors them at 1); a judgment whose retries ran out
    on the transport is absent."""
    from recharness.execution.requests import TextRequest, answer_messages

    todo: dict[str, tuple[dict, str]] = {}
    for s in samples:
        if s.get("task") not in JUDGED_TASKS:
            continue
        h = hypothesis(predictions.get(s["id"]))
        if h is not None:
            todo[_question_id(s["id"], candidate_sha(h))] = (s, h)
    questions = {q: judge_prompt(s["task"], h, short(s["reference"], MAX_REVIEW_CHARS), s.get("judge_context", ""))
                 for q, (s, h) in todo.items()}
    request = TextRequest(JUDGE_PARAMS, JUDGE_FORMAT.check, JUDGE_REMINDER)
    answers, _ = await answer_messages(judge_model, questions, request, log, max_retries=max_retries)
    return {todo[q][0]["id"]: _judgment(*todo[q], rec) for q, rec in answers.items()}


def judge_run(out: Path, backend, judge_slug: str, *, pred_stems: list[str] | None = None, references: bool = True,
              use_cache: bool = True, max_retries: int = 1, seed: int = 0) -> list[Path]:
    """Judge every predictions file of a run (or `pred_stems`) and, optionally, the reference rows;
    write <out>/judgments/<pred-stem>__<judge-slug>.jsonl. Returns the files written."""
    from recharness.core.rundir import RunDir
    from recharness.data.store import load_dataset
    from recharness.execution.executor import with_model
    from recharness.tasks.registry import get_task

    out = Path(out)
    rd = RunDir(out)
    info, all_samples = rd.load_build()
    samples = [s for s in all_samples if s["task"] in JUDGED_TASKS]
    if not samples:
        from recharness.core.errors import ConfigError

        raise ConfigError(f"{out}: no explanation or summarization samples to judge (tasks built: {', '.join(info['tasks'])})")
    sets: dict[str, dict[str, dict]] = {}
    stems = pred_stems if pred_stems is not None else [p.stem for p in rd.prediction_files()]
    for stem in stems:
        recs = {r["id"]: r for r in read_jsonl(rd.predictions(stem)) if r.get("task") in JUDGED_TASKS}
        if recs:
            sets[stem] = recs
    if references:
        ds = load_dataset(info["dataset"])
        for t in sorted({s["task"] for s in samples}):
            task = get_task(info["suite"], t)
            for method, recs in task.references(ds, [s for s in samples if s["task"] == t], seed=seed).items():
                if f"ref-{method}" in stems:  # a model run named like a reference's judgments: one would hide the other
                    from recharness.core.errors import ConfigError

                    raise ConfigError(f"{rd.relative(rd.predictions('ref-' + method))} is named like the judgments "
                                      f"of the reference {method}: rename that run (--name), or judge with "
                                      "--no-references")
                sets.setdefault(f"ref-{method}", {}).update(recs)
    identity = backend.identity()
    written: list[Path] = []

    def done(path: Path, recs: dict[str, dict]) -> bool:
        """The judgments file already holds this judge's judgment of every candidate it would be asked
        (a rerun after a kill skips the files it finished, even without the response cache)."""
        if not use_cache or not path.exists():  # --no-cache: the judge is asked again, not read from a file
            return False
        have = {(r.get("id"), r.get("candidate_sha")) for r in read_jsonl(path, tolerate_torn_tail=True)
                if r.get("judge") == identity}
        want = {(s["id"], candidate_sha(h)) for s in samples if (h := hypothesis(recs.get(s["id"]))) is not None}
        return want <= have

    async def go(model):
        for stem, recs in sets.items():
            path = rd.judgments(stem, judge_slug)
            if done(path, recs):
                written.append(path)
                continue
            log = path.with_name(path.name + ".answers")  # the judge's answers as they come: a kill resumes here
            judged = await judge_predictions(samples, recs, model, max_retries=max_retries, log=log)
            rows = [{**j, "judge": identity, "judge_slug": judge_slug, "prediction_file": stem} for j in judged.values()]
            write_jsonl_atomic(path, rows)
            log.unlink(missing_ok=True)
            written.append(path)

    with_model(backend, go, use_cache=use_cache)
    return written


def load_judgments(run_dir: Path, tasks: set[str]) -> dict[str, dict[tuple[str, str], dict]]:
    """{judge slug: {(sample id, candidate_sha): judgment}} from <run_dir>/judgments/*.jsonl."""
    index: dict[str, dict[tuple[str, str], dict]] = {}
    from recharness.core.rundir import RunDir

    jdir = RunDir(run_dir).judgments_dir
    if not jdir.is_dir():
        return index
    for f in sorted(jdir.glob("*.jsonl")):
        for r in read_jsonl(f):
            if r.get("task") in tasks and "candidate_sha" in r:
                slug = r.get("judge_slug") or f.stem.rpartition("__")[2]
                index.setdefault(slug, {})[(r["id"], r["candidate_sha"])] = r
    return index


def _judge_scores(samples: list[dict], predictions: dict[str, dict], run_dir: Path) -> dict[str, tuple]:
    """Per judge slug J: per-sample (faithfulness, personalization, entered the mean?) and whether
    any judgment was valid; judges that never saw these predictions are left out."""
    index = load_judgments(run_dir, {s["task"] for s in samples})
    out: dict[str, tuple] = {}
    for slug, idx in sorted(index.items()):
        faith: list[float] = []
        pers: list[float] = []
        used: list[bool] = []
        applies = valid = 0
        for s in samples:
            h = hypothesis(predictions.get(s["id"]))
            if h is None:  # an invalid or missing candidate counts as the floor, 1
                faith.append(1.0)
                pers.append(1.0)
                used.append(True)
                continue
            r = idx.get((s["id"], candidate_sha(h)))
            if r is not None:
                applies += 1
            if r is None or not r.get("valid"):
                faith.append(0.0)
                pers.append(0.0)
                used.append(False)
                continue
            valid += 1
            faith.append(float(r["faithfulness"]))
            pers.append(float(r["personalization"]))
            used.append(True)
        if applies:
            out[slug] = (faith, pers, used, valid)
    return out


def judge_metrics(samples: list[dict], predictions: dict[str, dict], run_dir: Path) -> dict[str, float]:
    """faith[J], pers[J], judged[J] for each judge J whose judgments match these predictions."""
    out: dict[str, float] = {}
    for slug, (faith, pers, used, valid) in _judge_scores(samples, predictions, run_dir).items():
        f = [x for x, u in zip(faith, used) if u]
        p = [x for x, u in zip(pers, used) if u]
        out[f"faith[{slug}]"] = statistics.fmean(f) if valid else float("nan")
        out[f"pers[{slug}]"] = statistics.fmean(p) if valid else float("nan")
        out[f"judged[{slug}]"] = len(f) / len(samples) if valid else 0.0
    return out


def judge_units(samples: list[dict], predictions: dict[str, dict], run_dir: Path) -> dict:
    """faith[J] and pers[J] as means over the samples that enter them, for confidence intervals."""
    from recharness.metrics.bootstrap import mean_units

    ids = [s["id"] for s in samples]
    out = {}
    for slug, (faith, pers, used, valid) in _judge_scores(samples, predictions, run_dir).items():
        if valid:
            out[f"faith[{slug}]"] = mean_units(ids, faith, used, how="mean over judged samples")
            out[f"pers[{slug}]"] = mean_units(ids, pers, used, how="mean over judged samples")
    return out
