"""The stages as functions over a run directory (see core.rundir for its layout); the CLI is a thin layer on these.

build → run → score here; intervals in runner.intervals, paired comparison in runner.compare.
"""

from __future__ import annotations

import hashlib
import json
import statistics
import time
from collections import Counter, defaultdict
from pathlib import Path

from recharness.core.errors import ConfigError, InputError, NameTaken, one_line
from recharness.core.io import (
    FileLocked,
    atomic_write_text,
    read_jsonl,
    remove_log,
    rewrite_log,
    unheld,
    write_jsonl_atomic,
)
from recharness.core.paths import shown_path
from recharness.core.rundir import RunDir, file_sha256, fingerprint, samples_record
from recharness.core.types import BuildConfig, GenerationParams, ScoreRow, is_number, sample_capped
from recharness.data.store import load_dataset
from recharness.execution.executor import RunStats, answered, check_same_model, prompt_version, run_samples, with_model
from recharness.metrics.bootstrap import DEFAULT_RESAMPLES
from recharness.models.base import ModelBackend
from recharness.runner.coverage import record_run
from recharness.runner.imported import as_given_samples
from recharness.runner.intervals import add_confidence_intervals, checked_units
from recharness.tasks.options import validate_options
from recharness.tasks.registry import get_suite, get_task, suite_context  # noqa: F401 (suite_context re-exported)
from recharness.tasks.references import check_method_name


def default_run_dir(suite: str, dataset: str) -> Path:
    return RunDir.default(suite, dataset).path


def load_build(out: Path) -> tuple[dict, list[dict]]:
    """The run's build and samples, its options checked against the suite's options models."""
    rd = RunDir(out)
    info, samples = rd.load_build()
    try:
        validate_options(info["suite"], info["tasks"], info.get("options"))
    except ConfigError as e:
        raise InputError(rd.build_json, str(e), field="options") from None
    return info, samples


def reference_dir(out: Path) -> Path:
    return RunDir(out).reference_dir


def build(suite: str, dataset_name: str, out: Path, *, tasks: list[str] | None = None, seed: int = 0,
          limit: int | None = None, options: dict | None = None, users: list[str] | None = None) -> dict:
    """Build the suite's samples into `out`. `users` (`build --users FILE`): exactly these users, each task's
    samples of them and of no one else; a user the dataset lacks, a listed user a task's filters drop, or a task
    that does not select users one by one (`selects_users`) is refused naming them."""
    before = _prediction_files(out)
    s = get_suite(suite)
    tasks = tasks or s.default_tasks
    if limit is not None and limit < 1:
        raise ConfigError(f"--limit must be at least 1, got {limit}")
    if seed < 0:
        raise ConfigError(f"--seed must be 0 or more, got {seed}")
    options = validate_options(suite, tasks, options)
    for t in tasks:
        apart = [o for o in getattr(get_task(suite, t), "builds_apart_from", ()) if o in tasks]
        if apart:
            raise ConfigError(f"{suite}'s {t} and {apart[0]} use different splits of the training data: build each "
                              f"into its own run directory (`-t {t} -o DIR1`, `-t {apart[0]} -o DIR2`)")
    if users is not None:
        users = list(dict.fromkeys(str(u) for u in users))
        if not users:
            raise ConfigError("--users: the file lists no user")
        whole = [t for t in tasks if not getattr(get_task(suite, t), "selects_users", False)]
        if whole:
            raise ConfigError(f"--users: {suite}'s task{'s' if len(whole) > 1 else ''} {', '.join(whole)} draw"
                              f"{'' if len(whole) > 1 else 's'} no users one by one (samples are groups, queries or "
                              "a published split), so a list of users cannot choose them: build without --users")
    ds = load_dataset(dataset_name)
    if users is not None:
        known = set(ds.interactions["user_id"].cast(str).unique().to_list())
        absent = [u for u in users if u not in known]
        if absent:
            raise ConfigError(f"--users: {len(absent)} of the {len(users)} listed users are not in {dataset_name} "
                              f"(first: {', '.join(repr(u) for u in absent[:5])})")
    out.mkdir(parents=True, exist_ok=True)
    config = BuildConfig(seed=seed, limit=limit, options=dict(options or {}), out=out,
                         context=suite_context(suite, ds, options, seed=seed, limit=limit),
                         users=tuple(users) if users is not None else None)
    samples: list[dict] = []
    counts = {}
    builders = {}  # a task that keeps no sample is asked why, after its build (`why_empty` may read what it saw)
    for t in tasks:
        task = builders[t] = get_task(suite, t)
        built = list(task.build(ds, config))
        counts[t] = len(built)
        samples.extend(built)
    ids = [x["id"] for x in samples]
    if len(ids) != len(set(ids)):
        raise RuntimeError("builder produced duplicate sample ids")
    if users is not None:  # exactly the listed users: none dropped by a task's filters, no one else
        for t in tasks:
            got = {str(x.get("user_id")) for x in samples if x["task"] == t}
            dropped = [u for u in users if u not in got] if limit is None else []
            if dropped:
                raise ConfigError(f"--users: {t} keeps no sample of {len(dropped)} of the {len(users)} listed users "
                                  f"(first: {', '.join(repr(u) for u in dropped[:5])}): the task's filters (history "
                                  "length, ratings, reviews, candidates) drop them; loosen them (`recharness suites "
                                  f"--options {suite}`) or leave those users out of the file")
            extra = sorted(got - set(users))
            if extra:
                raise RuntimeError(f"{t} built samples of users not listed in --users ({', '.join(extra[:5])})")
    notes = [n for t in tasks for n in (getattr(builders[t], "build_notes", None) or (lambda: []))()]
    empty = [t for t, n in counts.items() if n == 0]
    if empty:
        reasons = [r for t in empty if (why := getattr(builders[t], "why_empty", None)) and (r := why(ds, config))]
        if reasons:  # the task knows which of its filters removed every sample (tasks sharing one filter: said once)
            raise ConfigError(f"build {suite} on {dataset_name}: 0 samples: " + "; ".join(dict.fromkeys(reasons)))
        shown = ", ".join(f"{k}={v}" for k, v in sorted((options or {}).items())) or "the defaults"
        raise ConfigError(f"build {suite} on {dataset_name}: {', '.join(empty)} yielded 0 samples (seed {seed}, "
                          f"limit {limit}, options {shown}): the task's filters (history length, ratings, "
                          f"candidates, group sizes) keep no user of this dataset; see `recharness suites "
                          f"--options {suite}` and loosen them, or use another dataset")
    out.mkdir(parents=True, exist_ok=True)
    rd = RunDir(out)
    write_jsonl_atomic(rd.samples_jsonl, samples)
    chosen = ({"users": {"count": len(users), "sha256": hashlib.sha256("\n".join(users).encode()).hexdigest()}}
              if users is not None else {})
    fp = fingerprint(rd.samples_jsonl, {"suite": suite, "tasks": tasks, "seed": seed, "limit": limit,
                                              "options": options, **chosen})
    _stamp_imported_predictions(out, fp, before)
    side = rd.path / suite  # the training rows a task wrote beside the samples: read later only if unchanged
    info = {"suite": suite, "dataset": dataset_name, "tasks": tasks, "seed": seed, "limit": limit, **chosen,
            **samples_record(rd.samples_jsonl, len(samples)),
            "side_files": {p.relative_to(rd.path).as_posix(): file_sha256(p)
                           for p in sorted(side.glob("*.parquet"))} if side.is_dir() else {},
            "options": {k: v for k, v in config.options.items() if isinstance(v, (str, int, float, bool, type(None)))},
            "counts": counts, **({"notes": notes} if notes else {}), "fingerprint": fp,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S")}
    atomic_write_text(rd.build_json, json.dumps(info, indent=2))
    return info


def _prediction_files(out: Path) -> dict[Path, int]:
    return {pf: pf.stat().st_mtime_ns for pf in RunDir(out).prediction_files()}


def _stamp_imported_predictions(out: Path, fp: str, before: dict[Path, int]) -> None:
    """Predictions a builder wrote itself (e.g. imported PerRecBench outputs) belong to this build. A file a
    `run` holds is that run's, not the builder's (a run started while this build ran): left as it is, its
    answers keep the build they were made for (re-stamped, they passed as this build's, and the run went on
    appending to a replaced file)."""
    for pf, mtime in _prediction_files(out).items():
        if before.get(pf) != mtime:
            try:
                with unheld(pf) as exists:  # read and replaced under the writer's lock
                    if exists:
                        write_jsonl_atomic(pf, [{**r, "build": fp} for r in read_jsonl(pf)])
            except FileLocked:
                continue


def finetune_origin(backend) -> dict | None:
    """The `finetune.json` of a fine-tuned model a backend loads (an `hf:` folder, or the `<file>.json` beside an
    exported GGUF, which repeats it), else None."""
    from recharness.core.paths import finetune_info_at

    for attr in ("model", "model_path", "path"):
        where = getattr(backend, attr, None)
        if not isinstance(where, (str, Path)) or not str(where):
            continue
        d = finetune_info_at(where)
        if d is not None:
            return d
    try:  # an exported GGUF without its sidecar: what `export-gguf` embedded in the file (its dataset and build)
        embedded = (backend.identity() or {}).get("finetune")
    except Exception:  # noqa: BLE001 - a backend whose identity cannot be read has no origin to check
        embedded = None
    return embedded if isinstance(embedded, dict) else None


def trained_on(ft: dict | None, depth: int = 0) -> list[dict]:
    """Every fine-tune a model's weights come from ({dataset, build, run_dir}): the model's own, each merged
    source's (a merge of two builds records no common one) and, through `base_finetune`, those of the fine-tune
    it was trained from in turn."""
    if not isinstance(ft, dict) or depth > 20:
        return []
    out = [{"dataset": ft.get("dataset"), "build": ft.get("build"), "run_dir": ft.get("run_dir")}]
    merge = ft.get("merge") if isinstance(ft.get("merge"), dict) else {}
    for s in merge.get("sources") or []:
        if isinstance(s, dict):
            out.append({"dataset": s.get("dataset", ft.get("dataset")), "build": s.get("build"),
                        "run_dir": s.get("dir")})
            out += trained_on(s.get("base_finetune"), depth + 1)
    return out + trained_on(ft.get("base_finetune"), depth + 1)


def _same_build_as_its_finetune(backend, info: dict, out: Path) -> None:
    """A model fine-tuned on one build of a dataset answering another build of it is refused: its training
    examples are held out of its own build's test samples only (PerRecBench's held-out groups, CTR's test
    users), and another build's test samples may be among them: a score that would rest on seen answers. Every
    fine-tune its weights come from counts (`trained_on`: merged sources, a fine-tune of a fine-tune)."""
    other = next((t for t in trained_on(finetune_origin(backend)) if t["build"] and t["dataset"] == info.get("dataset")
                  and t["build"] != info.get("fingerprint")), None)
    if other is None:
        return
    from recharness.core.paths import shown_dataset

    raise ConfigError(f"this model was fine-tuned on another build of {shown_dataset(info.get('dataset'))} (build "
                      f"{other['build']}, {shown_path(other.get('run_dir'))}; this run's is {info.get('fingerprint')}): its "
                      "training examples are held out of that build's test samples only, so this run's may be among "
                      f"them; fine-tune on this run (`recharness finetune ... -o {shown_path(out)}`) or run the "
                      "model on the build it was fine-tuned on")


def run(out: Path, backend: ModelBackend, model_slug: str, *, limit: int | None = None, use_cache: bool = True,
        max_retries: int | None = None, concurrency: int | None = None, on_progress=None, on_total=None,
        tasks: list[str] | None = None, overwrite: bool = False, redo_invalid: bool = False,
        generation: dict | None = None, system_prompt: str | None = None) -> tuple[Path, RunStats]:
    """Answer the build's samples (only those of `tasks` when given; then the first `limit`) into
    predictions/<model_slug>.jsonl. A task left out has no rows for this model in `score` (shown "–"),
    so e.g. a single-format fine-tune can be run on its own format alone. The file is one model's:
    resuming it with another model is refused (`overwrite`: start it afresh). `redo_invalid`: the
    committed answers that failed parsing or validation are asked again (the others are kept).
    `generation` (temperature, top_p, max_tokens, seed) overrides every task's decoding settings and
    `system_prompt` goes first in every prompt; both are part of the run's settings: resuming the
    method with other ones is refused. With several orders per user / group (`order_of`) a `limit` that ends
    inside one unit is rounded up to its end (warned, and recorded so): a unit cut short has no order spread and no
    Borda answer, and would leave the Borda row on other samples than its parent row."""
    check_method_name(model_slug)
    if max_retries is not None and max_retries < 0:
        raise ConfigError(f"--max-retries must be 0 or more, got {max_retries}")
    if concurrency is not None and concurrency < 1:
        raise ConfigError(f"--concurrency must be at least 1, got {concurrency}")
    if limit is not None and limit < 1:
        raise ConfigError(f"--limit must be at least 1, got {limit}")
    info, samples = load_build(out)
    _same_build_as_its_finetune(backend, info, out)
    if not tasks and getattr(backend, "task_name", None):  # a model of one task (an id/sid fine-tune) answers that one
        tasks = [backend.task_name]
    asked = list(tasks) if tasks else None
    if tasks:
        unknown = [t for t in tasks if t not in info["tasks"]]
        if unknown:
            raise ConfigError(f"--task {', '.join(unknown)}: this build's tasks are {', '.join(info['tasks'])}")
        samples = [s for s in samples if s["task"] in tasks]
    serves = getattr(backend, "answers_task", None)  # a reference recommender answers the tasks that ask it
    if serves is not None:
        unserved = [t for t in info["tasks"] if not serves(get_task(info["suite"], t))]
        if asked and set(asked) & set(unserved):
            raise ConfigError(f"{backend.name} answers no sample of --task {', '.join(t for t in asked if t in unserved)} "
                              "(the task does not ask this reference)")
        if len(unserved) == len(info["tasks"]):
            raise ConfigError(f"{backend.name} answers none of this build's tasks ({', '.join(info['tasks'])}); "
                              "`recharness baselines` lists which reference serves which task")
        samples = [s for s in samples if s["task"] not in unserved]
        left_out = [] if asked else unserved
        if not asked:  # what this run covers, as `score` reads it (`runner.coverage`): the tasks it answers
            asked = [t for t in info["tasks"] if t not in unserved]
    else:
        left_out = []
    if limit is not None:
        asked_limit = limit
        # a user's / group's orders (`order_of`) are built one after the other: the limit goes on to its last one
        while 0 < limit < len(samples) and samples[limit].get("order_of") is not None \
                and samples[limit].get("order_of") == samples[limit - 1].get("order_of"):
            limit += 1
        if limit != asked_limit:  # recorded as run (`record_run`): `score` reads the samples it covers from it
            import logging

            logging.getLogger(__name__).warning(
                "--limit %d rounded up to %d: the samples of one user / group asked under several orders "
                "(order_of) are answered together, so the order metrics and the Borda row cover whole units",
                asked_limit, limit)
        samples = samples[:limit]
    generation = {k: v for k, v in (generation or {}).items() if v is not None}
    if generation:
        try:
            GenerationParams(**generation)
        except ValueError as e:
            raise ConfigError(f"generation settings {generation}: {' '.join(str(e).split())[:300]}") from None
    if system_prompt is not None:
        samples = [{**s, "messages": [{"role": "system", "content": system_prompt}, *s["messages"]]}
                   if s.get("messages") else s for s in samples]
    ds = load_dataset(info["dataset"])
    context = suite_context(info["suite"], ds, info.get("options"), seed=info.get("seed", 0), limit=info.get("limit"))
    tasks = {}
    for t in info["tasks"]:
        task = get_task(info["suite"], t)
        task.setup(ds, context)
        if generation or system_prompt is not None:
            if task.request == "custom" and any(s["task"] == t for s in samples):
                raise ConfigError(f"task {t} drives the model itself (several calls per sample, each with its own "
                                  "decoding settings and prompts): --temperature, --top-p, --max-tokens, --seed and "
                                  "--system-prompt do not apply to it")
            task.overrides = generation
        tasks[t] = task
    pred_path = RunDir(out).predictions(model_slug)
    if overwrite and pred_path.exists():
        remove_log(pred_path)  # FileLocked while a run writes it: its answers would go to a file no one reads
    if overwrite:  # what the replaced answers set out to cover is not this run's (a full run's limit kept a
        RunDir(out).run_record(model_slug).unlink(missing_ok=True)  # later --limit run's rows "partial")
    check_same_model(pred_path, backend.identity())
    settings = {"generation": generation,
                "system_prompt_sha256": hashlib.sha256(system_prompt.encode()).hexdigest()[:16] if system_prompt else None,
                # format retries decide which answers stand invalid: one method, one rule (None: each task's own)
                "max_retries": max_retries}
    check_same_settings(RunDir(out), model_slug, settings)
    prompts = {t: prompt_version(tasks[t]) for t in dict.fromkeys(s["task"] for s in samples)}
    check_same_prompts(RunDir(out), model_slug, prompts)
    had = answered(pred_path, info["fingerprint"])  # another build's answers, an id twice: refused before any change
    asking = {s["id"] for s in samples}
    pending_file = RunDir(out).redo_pending(model_slug)
    # an interrupted --redo-invalid's samples not answered since: still past the cache, whatever this run's flags
    pending = read_pending(pending_file) if pending_file.exists() and not overwrite else set()
    redo = {i for i in pending if i not in had and i in asking}
    if redo_invalid and pred_path.exists():
        # the invalid answers of the samples this run asks (a --limit or --task run keeps the others' answers),
        # asked again past the response cache, which would hand back the same invalid answer; their ids are
        # written down before their answers are removed, so a resume after a kill asks them past it too
        took = {i for i, r in had.items() if not r.get("valid", True) and i in asking}
        pending_file.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(pending_file, json.dumps(sorted(pending | took)))
        rewrite_log(pred_path, [r for i, r in had.items() if i not in took])
        redo |= took
    elif overwrite and pending_file.exists():
        pending_file.unlink()
    if on_total:
        on_total(len(samples))

    def recorded() -> None:  # once the file is this run's (its lock) and an answer is about to be written
        record_run(RunDir(out), model_slug, limit=limit, tasks=asked, settings=settings, prompt_versions=prompts)

    stats = with_model(backend, lambda model: run_samples(
        samples, tasks, model, pred_path, max_retries=max_retries, concurrency=concurrency, on_progress=on_progress,
        build=info["fingerprint"], fresh=redo, on_first_commit=recorded), use_cache=use_cache, buffered=True)
    stats.left_out = left_out
    if pending_file.exists():  # what is answered now is no longer pending
        now = answered(pred_path, info["fingerprint"]) if pred_path.exists() else {}
        left = sorted(i for i in read_pending(pending_file) if i not in now)
        if left:
            atomic_write_text(pending_file, json.dumps(left))
        else:
            pending_file.unlink()
    return pred_path, stats


def read_pending(path: Path) -> set[str]:
    """The sample ids an interrupted `--redo-invalid` left to ask again (`RunDir.redo_pending`)."""
    try:
        ids = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise InputError(path, f"unreadable ({one_line(e)}): it lists the samples an interrupted --redo-invalid "
                               "still has to ask; run with --redo-invalid again, or delete it") from None
    if not isinstance(ids, list) or not all(isinstance(i, str | int) for i in ids):
        raise InputError(path, "not a JSON list of sample ids: run with --redo-invalid again, or delete it")
    return set(ids)


def check_same_settings(rd: RunDir, method: str, settings: dict) -> None:
    """The decoding settings, system prompt and format retries are part of what a method is: resuming it with
    others is refused, as resuming it with another model is."""
    from recharness.runner.coverage import read_run

    if not rd.predictions(method).exists():
        return
    prev = read_run(rd, method).get("settings")
    now = json.loads(json.dumps(settings))
    # a setting a record from before it was recorded lacks is unknown there: not a refusal
    if prev is not None and prev != {k: v for k, v in now.items() if k in prev}:
        raise NameTaken(f"{method}'s answers were made with {json.dumps(prev, sort_keys=True)}, not "
                        f"{json.dumps(settings, sort_keys=True)}")


def check_same_prompts(rd: RunDir, method: str, prompts: dict[str, str]) -> None:
    """A method answers one prompt per task: resuming it after a task's prompt changed (its `prompt_version`)
    is refused, both versions named. A run record from before versions were recorded resumes (unknown: no
    refusal), and so does one written by another recharness version whose prompts are the same."""
    from recharness import __version__
    from recharness.runner.coverage import read_run

    if not rd.predictions(method).exists():
        return
    prev_run = read_run(rd, method)
    prev = prev_run.get("prompt_versions") or {}
    changed = {t: (str(prev[t]), v) for t, v in prompts.items() if t in prev and str(prev[t]) != v}
    if changed:
        was = ", ".join(f"{t} prompt version {a}" for t, (a, _) in changed.items())
        now = ", ".join(f"{t} prompt version {b}" for t, (_, b) in changed.items())
        raise NameTaken(f"{method}'s answers were asked with {was} (recharness "
                        f"{prev_run.get('harness_version') or 'unknown'}), not {now} (recharness {__version__}): "
                        "the prompt changed, and a method answers one prompt")


def _latency_summary(records: list[dict]) -> dict[str, float]:
    lat = [r["latency_s"] for r in records if r.get("latency_s") is not None and not r.get("cached")]
    lat_all = [r["latency_s"] for r in records if r.get("latency_s") is not None]
    out = {}
    if lat_all:
        out["latency_s"] = statistics.fmean(lat_all)
    if lat:
        out["latency_uncached_s"] = statistics.fmean(lat)
    ct = [r["completion_tokens"] for r in records if r.get("completion_tokens") is not None]
    if ct:
        out["completion_tokens"] = statistics.fmean(ct)
    # asked with several requests in flight, a latency holds the server's queue: said beside it (a conventional
    # model's is single calls in series; `--concurrency 1` times an LLM the same way)
    load = [r["concurrency"] for r in records if is_number(r.get("concurrency")) and r.get("latency_s") is not None
            and not r.get("cached")]
    if load and max(load) > 1:
        out["latency_concurrency"] = float(max(load))
    return out


def _records_by_task(pf: Path, fp: str, **kw) -> dict[str, dict[str, dict]]:
    """A predictions file read once: {task: {sample id: record}} (`answered`: another build's file, or an id
    answered twice, is refused)."""
    out: dict[str, dict[str, dict]] = defaultdict(dict)
    for sid, r in answered(pf, fp, **kw).items():
        out[r.get("task")][sid] = r
    return out


def _score_row(task, t: str, samples: list[dict], recs: dict[str, dict], method: str, kind: str, extra: dict) -> ScoreRow:
    metrics = task.score(samples, recs)
    metrics.update(_latency_summary(list(recs.values())))
    if kind == "reference":  # the `train` stage's timings, stamped on every record of a trained model
        metrics.pop("latency_uncached_s", None)
        first = next(iter(recs.values()), {})
        metrics.update({k: float(first[k]) for k in ("train_s", "throughput_per_s") if first.get(k) is not None})
    breakdown = task.breakdown(samples, recs)
    if breakdown:
        extra["breakdown"] = breakdown
    return ScoreRow(method=method, task=t, metrics=metrics, n=len(samples), kind=kind, extra=extra)


def reference_coverage(task_samples: list[dict], recs: dict[str, dict]) -> tuple[list[dict], dict | None]:
    """A reference row's samples and coverage mark: every sample, or only those it answered, marked
    (`sample cap` for a method that answers the first N on purpose, e.g. title-cbs; else `partial`), so
    its n, its interval and its comparisons are those of the samples it was scored on."""
    answered = [s for s in task_samples if s["id"] in recs]
    if not recs or len(answered) == len(task_samples):
        return task_samples, None
    why = "sample cap" if sample_capped(recs.values()) else "partial"
    return answered, {"answered": len(answered), "of": len(task_samples), "why": why}


def score(out: Path, *, seed: int = 0, references: bool = True, resamples: int = DEFAULT_RESAMPLES,
          ci_seed: int = 0, partial: bool = False) -> list[ScoreRow]:
    """Every predictions file, then the reference rows: from the `train` stage's files where they
    exist, else computed on the fly by the task (as before `train` existed). A model's row covers
    every sample of the task, or the subset its run was limited to (or its import answered), marked
    so; any other gap is refused unless `partial` (runner.coverage). Each task's rows then get 95%
    bootstrap intervals (`resamples` of them, seeded by `ci_seed`; 0: none) and, among rows scored
    on the same samples, the marks of which are not distinguishable from the best."""
    from recharness.runner.coverage import check_task_answered, covered

    if resamples < 0:
        raise ConfigError(f"--resamples must be 0 or more, got {resamples}")
    rd = RunDir(out)
    info, build_samples = load_build(out)
    rows: list[ScoreRow] = []
    stems = [pf.stem for pf in rd.prediction_files()]
    for t, task, task_samples, methods in methods_by_task(out, seed=seed, references=references):
        for stem in sorted(set(stems) - {name for name, kind, *_ in methods if kind == "model"}):
            check_task_answered(rd, stem, t, task_samples, build_samples, partial=partial)
        groups: dict[tuple, tuple[list[dict], list]] = {}
        for name, kind, recs, extra in methods:
            task.check_answers(recs, name)  # imported, reference and parsed answers alike: the task's answer type
            samples, cov = reference_coverage(task_samples, recs) if kind != "model" else covered(
                rd, extra.get("derived_from", name), t, task_samples, build_samples, recs, partial=partial)
            own = as_given_samples(samples, recs)  # an import scored against its own targets (--targets as-given)
            row = _score_row(task, t, own, recs, name, kind, extra)
            row.coverage, row.build = cov, info.get("fingerprint")
            units = checked_units(task, own, recs, row.metrics)  # once: the table's values are the units'
            # rows on other targets than the build's are compared with no other row
            key = tuple(s["id"] for s in samples) + ((("as-given", name),) if own is not samples else ())
            samples = own
            groups.setdefault(key, (samples, [], []))
            groups[key][1].append((row, recs))
            groups[key][2].append(units)
        for samples, scored, units in groups.values():  # rows on the same samples are compared with each other
            if resamples:
                add_confidence_intervals(task, samples, scored, resamples=resamples, seed=ci_seed, units=units)
        order = {name: k for k, (name, *_rest) in enumerate(methods)}
        rows.extend(sorted((r for _, scored, _ in groups.values() for r, _ in scored), key=lambda r: order[r.method]))
    return rows


def methods_by_task(out: Path, *, seed: int = 0, references: bool = True, only: set[str] | None = None):
    """(task name, task, its samples, [(method, kind, {id: record}, extra)]) per task of the build:
    predictions files first, then reference rows (`train`'s files, else computed by the task).
    `only`: just these methods (references are then computed only if one of them is asked for)."""
    from recharness.tasks.references import serving

    info, samples = load_build(out)
    fp = info["fingerprint"]
    by_task: dict[str, list[dict]] = defaultdict(list)
    for s in samples:
        by_task[s["task"]].append(s)
    rd = RunDir(out)
    pred_files = rd.prediction_files()
    ref_files = rd.reference_files() if references else []
    derived_asked: set[str] = set()
    if only is not None:
        # a row a task derives from a file's answers ("NAME (Borda over 3 orders)") needs that file
        derived_asked = {o for o in only for pf in pred_files if str(o).startswith(pf.stem + " ")}
        pred_files = [pf for pf in pred_files if pf.stem in only or any(o.startswith(pf.stem + " ") for o in derived_asked)]
        ref_files = [pf for pf in ref_files if pf.stem in only]
    preds = {pf: _records_by_task(pf, fp) for pf in pred_files}
    for pf, by in preds.items():  # a hand-edited record of this build answering no sample of it: named, not dropped
        for t, recs in by.items():
            ids = {s["id"] for s in by_task.get(t, ())}
            stray = next((sid for sid in recs if sid not in ids), None)
            if stray is not None:
                raise InputError(pf, f"the record of {stray!r} (task {t!r}) answers no sample of this build: remove "
                                     "the line, or run the model again into a new --name", field="id")
    digests = {pf: file_sha256(pf) for pf in pred_files}  # `report` checks the scores are of these answers
    refs = {pf: _records_by_task(pf, fp, redo="run `recharness train` again") for pf in ref_files}
    ref_digests = {pf.stem: file_sha256(pf) for pf in ref_files}  # likewise for `train`'s answers
    ds = None
    for t, task_samples in by_task.items():
        task = get_task(info["suite"], t)
        task.run_dir = out  # tasks that read side files (e.g. judgments) find them even if the run moved
        if task.scoring_needs_dataset:
            if ds is None:
                ds = load_dataset(info["dataset"])
            task.prepare_scoring(ds)
        methods: list[tuple[str, str, dict, dict]] = []
        for pf in pred_files:
            recs = preds[pf].get(t)
            if recs:
                model = next(iter(recs.values())).get("model", {})
                if not isinstance(model, dict):  # as `run` refuses it (`check_same_model`): not a file of ours
                    raise InputError(pf, 'its first record\'s "model" is not an object (the model that answered): '
                                     "not a predictions file written by `recharness run`; move it out of predictions/",
                                     field="model")
                methods.append((pf.stem, "model", recs, {"model": model, "answered": len(recs),
                                                         "predictions_sha256": digests[pf]}))
                # rows a task derives from a model's answers (e.g. one ranking aggregated over candidate orders)
                derive = getattr(task, "derived_methods", None)
                for suffix, drecs in (derive(task_samples, recs) if derive else {}).items():
                    methods.append((f"{pf.stem} {suffix}", "model", drecs,
                                    {"model": model, "answered": len(drecs), "derived_from": pf.stem,
                                     "predictions_sha256": digests[pf]}))
        if references:
            trained = {pf.stem: refs[pf][t] for pf in ref_files if refs[pf].get(t)}
            served = serving(task)
            cheap = serving(task, on_the_fly=True)
            computed: dict[str, dict[str, dict]] = {}
            wanted = only is None or bool(only - {pf.stem for pf in pred_files} - set(trained) - derived_asked)
            if wanted and (not served or not set(cheap) <= set(trained)):  # something `train` did not write
                if ds is None:
                    ds = load_dataset(info["dataset"])
                computed = task.references(ds, task_samples, seed=seed)
            for name in dict.fromkeys([*computed, *served, *trained]):
                if only is not None and name not in only:
                    continue
                recs = trained[name] if name in trained else computed.get(name)
                if recs is not None:  # where its answers came from: `report` refuses rows `train` has replaced
                    methods.append((name, "reference", recs, {"predictions_sha256": ref_digests[name]}
                                    if name in trained else {"computed": True}))
            # a model `train` began (its folder exists) but whose predictions it never wrote: named, not dropped
            unfinished = [n for n in served if n not in trained and n not in computed and rd.model_dir(n).exists()]
            if unfinished and methods:
                methods[0][3].setdefault("unfinished_references", unfinished)
        twice = sorted(n for n, c in Counter(m[0] for m in methods).items() if c > 1)
        if twice:  # a predictions file named as a reference row (written before `run` refused such names)
            raise ConfigError(f"{shown_path(rd.predictions_dir / (twice[0] + '.jsonl'))}: {t} also has a reference "
                              f"row {twice[0]!r}; rename the file (predictions/NEW_NAME.jsonl, and its .run.json "
                              "beside it) so the rows and `compare` can tell them apart")
        yield t, task, task_samples, methods
