"""The `train` stage: fit a suite's reference models once and keep their predictions.

`score` then scores `predictions/reference/<baseline>.jsonl` like any model's file (rows marked
`kind="reference"`) instead of refitting them on every call; a baseline without a file is still
computed on the fly by its task. Models learn only from `TrainData` (the build's training part),
never from a sample's held-out target.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from recharness.baselines import BASELINES, TrainData, fit
from recharness.core.errors import ConfigError
from recharness.core.io import atomic_write_bytes, atomic_write_text, write_jsonl_atomic
from recharness.core.rundir import RunDir, train_json_file
from recharness.data.store import load_dataset
from recharness.runner import train_log
from recharness.runner.latency import LATENCY_RUNS, timed_predict  # noqa: F401 (re-exported)
from recharness.runner.pipeline import load_build
from recharness.tasks.references import serving
from recharness.tasks.registry import get_task


def _trained(rd: RunDir, name: str, fp: str, seed: int, tune: int = 0, tune_epochs: int | None = None) -> bool:
    """Whether `name` was already trained on this build with this seed and tuning budget (its predictions file whole)."""
    from recharness.core.io import read_jsonl

    path = rd.reference(name)
    if not path.exists():
        return False
    first = next(iter(read_jsonl(path, tolerate_torn_tail=True)), None)
    return (bool(first) and first.get("build") == fp and first.get("train_seed") == seed
            and int(first.get("tune_trials") or 0) == _budget(name, tune)
            and first.get("tune_epochs") == _epoch_cap(name, tune, tune_epochs))


def _budget(name: str, tune: int) -> int:
    """The trials `name` gets under `--tune N`: N for a tunable model, 0 for one trained with its fixed setting."""
    return tune if tune and BASELINES.meta(name).get("tunable") else 0


def _epoch_cap(name: str, tune: int, tune_epochs: int | None) -> int | None:
    """The per-trial epoch cap of `name`'s search (`baselines.tuning.epoch_cap`), None when it is not tuned or has none."""
    if not _budget(name, tune):
        return None
    from recharness.baselines.tuning import epoch_cap

    return epoch_cap(BASELINES.get(name), tune_epochs)


def _tuned_line(name: str, summary: dict) -> str:
    """What `train` prints for a searched model trained in epochs (after its epochs' line)."""
    metric = summary["objective"].split(" ", 1)[0]
    params = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                       for k, v in summary["best"]["params"].items())
    cap = summary["budget"].get("epochs_per_trial")
    return (f"{name}: tuned, {summary['budget']['trials']} trials{f' of {cap} epochs' if cap else ''} "
            f"({summary['seconds']:.1f} s), best valid {metric} {summary['best']['valid']:.4f} (trial "
            f"{summary['best']['trial']}) with {params}; refitted with its own epoch limit")


def train(out: Path, *, suite: str | None = None, baselines: list[str] | None = None, seed: int = 0,
          latency_runs: int = LATENCY_RUNS, progress=None, executor: str = "local",
          address: str | None = None, retrain: bool = False, tune: int = 0,
          tune_epochs: int | None = None) -> list[Path]:
    """Fit each baseline serving the build's tasks (or only `baselines`) and write its predictions
    for every sample of those tasks as one whole file. Returns the files written. A model already
    trained on this build with this seed is kept (a killed `train` resumes with the next model);
    `retrain` fits every one again. `tune`: N Optuna trials per tunable model on a validation split of
    the training data (`baselines.tuning`), the same budget for each; the search is kept beside the model.
    `tune_epochs`: the per-trial epoch cap of models trained in epochs (default: each class's
    `tune_epochs`, SASRec 3; the DLRMs none), stated in the budget.
    `executor="ray"`: the models train in parallel, one Ray task each (`address` as for `run`), each
    timing its own fit; their predictions and saved weights come back to be written here."""
    info, samples = load_build(out)
    if suite is not None and suite != info["suite"]:
        raise ConfigError(f"{out} holds a {info['suite']} build, not {suite}")
    by_task: dict[str, list[dict]] = defaultdict(list)
    for s in samples:
        by_task[s["task"]].append(s)
    served = {t: serving(get_task(info["suite"], t)) for t in by_task}
    available = list(dict.fromkeys(n for names in served.values() for n in names))
    for name in baselines or []:
        BASELINES.meta(name)  # an unknown name: one error line with the known ones
        if name not in available:
            raise ConfigError(f"baseline {name!r} serves none of this build's tasks ({', '.join(by_task)}); "
                              f"these do: {', '.join(available) or 'none'}")
    names = (list(dict.fromkeys(baselines)) if baselines
             else [n for n in available if not BASELINES.meta(n).get("opt_in")])  # slow ones only when named
    if not names:
        raise ConfigError(f"no reference model serves the tasks of this {info['suite']} build ({', '.join(by_task)}); "
                          "`score` computes their references on the fly")
    kept = [] if retrain else [n for n in names
                               if _trained(RunDir(out), n, info["fingerprint"], seed, tune, tune_epochs)]
    if kept and progress is not None:
        progress(f"already trained on this build (seed {seed}), kept: {', '.join(kept)} (--retrain fits them again)")
    names = [n for n in names if n not in kept]
    if not names:
        return [RunDir(out).reference(n) for n in kept]
    train_data = TrainData.of_build(load_dataset(info["dataset"]), out, info["suite"])
    #: what the models learn from, recorded with each (train.json): the build and its training data's size
    data_id = {"build": info["fingerprint"], "dataset": info["dataset"], "suite": info["suite"],
               "train_interactions": train_data.interactions.height,
               "train_pairs": train_data.pairs.height if train_data.pairs is not None else None,
               "train_sequences": train_data.sequences.height if train_data.sequences is not None else None}
    written = []
    remote = None
    if executor == "ray" and tune:
        raise ConfigError("--tune runs locally (one search after another, the same budget each): drop --executor ray")
    if executor == "ray":  # one Ray task per model, in parallel; the files are still written here
        from recharness.runner.train_ray import train_ray

        if progress is not None:
            progress(f"training {len(names)} models as Ray tasks…")
        remote = {r["name"]: r for r in train_ray(names, train_data, seed, dict(by_task), served, latency_runs,
                                                  info["suite"], data_id, address=address, progress=progress)}
    elif executor != "local":
        raise ConfigError(f"unknown executor {executor!r}: local or ray")
    for name in names:
        if remote is not None:
            r = remote[name]
            for rel, data in r["files"].items():
                atomic_write_bytes(RunDir(out).model_dir(name) / rel, data)
            identity, seconds, predicted = r["identity"], r["train_s"], r["predictions"]
        else:
            if progress is not None:
                progress(f"training {name}…")
            search = None
            if _budget(name, tune):
                from recharness.baselines.tuning import tune as search_space

                search = search_space(BASELINES.get(name), train_data, tune, seed, progress=progress,
                                      epochs=tune_epochs)
                atomic_write_text(RunDir(out).tuning_json(name), json.dumps(search, indent=2))
            elif tune and progress is not None:
                progress(f"{name} has no search space: trained with its fixed configuration")
            model, seconds = fit(name, train_data, seed, search["best"]["params"] if search else None)
            summary = {k: search[k] for k in ("budget", "objective", "best", "seconds")} if search else None
            if summary is not None and isinstance(getattr(model, "log", None) or {}, dict):
                model.log = {**(getattr(model, "log", None) or {}), "tuning": summary}  # a DLRM's is a FitLog
            log = getattr(model, "log", None)
            if isinstance(log, dict) and log.get("shared_fit") and log.get("seconds") is not None:
                seconds = float(log["seconds"])  # reused another variant's training run: report that run's time
            save = getattr(model, "save", None)
            if callable(save):  # trained weights kept beside the run: `score`/`report` never retrain
                save(RunDir(out).model_dir(name))
            logged = train_log.write(RunDir(out).model_dir(name), model, seed=seed, data=data_id, seconds=seconds)
            if progress is not None:
                progress(train_log.summary_line(name, logged))
            if summary is not None and logged is not None and "tuning" not in logged:
                # a model trained in epochs: train.json is its epochs' record, the search is added beside them
                logged["tuning"] = summary
                atomic_write_text(train_json_file(RunDir(out).model_dir(name)),
                                  json.dumps(logged, indent=2, default=str))
                if progress is not None:
                    progress(_tuned_line(name, summary))
            identity, predicted = model.identity(), []
            for t, task_samples in by_task.items():
                if name not in served[t]:
                    continue
                if progress is not None:
                    progress(f"{name}: predicting {len(task_samples)} {t} samples, timing {latency_runs} "
                             "single-sample calls…")
                runs = 0 if BASELINES.meta(name).get("own_latency") else latency_runs
                predicted.append((t, *timed_predict(model, task_samples, runs, task=get_task(info["suite"], t))))
        stamp = {"build": info["fingerprint"], "kind": "reference", "model": identity, "train_s": round(seconds, 6),
                 "train_seed": seed, "tune_trials": _budget(name, tune)}
        if (cap := _epoch_cap(name, tune, tune_epochs)) is not None:
            stamp["tune_epochs"] = cap
        records = []
        for t, recs, timing in predicted:
            records += [{"id": r["id"], "task": t, **r, **stamp, **timing} for r in recs.values()]
        path = RunDir(out).reference(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_jsonl_atomic(path, records)
        written.append(path)
    return [RunDir(out).reference(n) for n in kept] + written
