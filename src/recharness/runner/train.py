"""The `train` stage: fit a suite's reference models once and keep their predictions.

`score` then scores `predictions/reference/<baseline>.jsonl` like any model's file (rows marked
`kind="reference"`) instead of refitting them on every call; a baseline without a file is still
computed on the fly by its task. Models learn only from `TrainData` (the build's training part),
never from a sample's held-out target. Each fitted model answers through the executor like any
model spec (`runner.reference_backend.TrainedReference`): locked, committed a task at a time,
resumed after a kill; the file takes its name only once whole, so `score` never reads half of one.
`-m baseline:NAME` then runs the same model as an ordinary row of `recharness run`.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path

from recharness.baselines import BASELINES, TrainData, fit, resumed_from
from recharness.core.errors import ConfigError, RecharnessError
from recharness.core.io import atomic_write_bytes, atomic_write_text, read_jsonl, remove_log
from recharness.core.rundir import RunDir, train_json_file
from recharness.data.store import load_dataset
from recharness.execution.executor import run_samples, with_model
from recharness.runner import train_log
from recharness.runner.latency import LATENCY_RUNS, timed_predict
from recharness.runner.pipeline import load_build
from recharness.runner.reference_backend import TrainedReference
from recharness.tasks.references import serving
from recharness.tasks.registry import get_task


def _training(fp: str, name: str, seed: int, tune: int, tune_epochs: int | None) -> dict:
    """What says which training of `name` a reference record comes from: the build, the seed, the tuning budget,
    and for a tuned one its search (`tune_space`: the space and defaults searched; a range changed in the code
    is another search, never kept under the old one's choice)."""
    return {"build": fp, "train_seed": seed, "tune_trials": _budget(name, tune),
            "tune_epochs": _epoch_cap(name, tune, tune_epochs), "tune_space": _space_digest(name, tune)}


def _space_digest(name: str, tune: int) -> str | None:
    """A short digest of the search space and defaults `name` is tuned over, None when it is not tuned."""
    if not _budget(name, tune):
        return None
    import hashlib

    cls = BASELINES.get(name)
    what = {"space": {k: list(v) for k, v in cls.space.items()}, "default": cls.defaults()}
    return hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _first(path: Path) -> dict | None:
    """A predictions file's first record (every record of a reference carries the same stamp), None if none."""
    return next(iter(read_jsonl(path, tolerate_torn_tail=True)), None) if path.exists() else None


def _made_by(first: dict | None, training: dict) -> bool:
    return first is not None and {"build": first.get("build"), "train_seed": first.get("train_seed"),
                                  "tune_trials": int(first.get("tune_trials") or 0),
                                  "tune_epochs": first.get("tune_epochs"),
                                  "tune_space": first.get("tune_space")} == training


def _settings_changed(name: str, seed: int, first: dict | None, training: dict) -> bool:
    """Whether an untuned reference's answers were made with other settings than its class now gives (a default
    changed in the code): then it is fitted again, not kept under the same name. A tuned one's settings are its
    search's choice, checked by the budget instead."""
    if training.get("tune_trials") or not isinstance((first or {}).get("model"), dict):
        return False
    try:
        model = BASELINES.get(name).create(seed=seed)
        now = json.loads(json.dumps(model.identity(), default=str))
    except Exception:  # noqa: BLE001 - a class that cannot say its settings unfitted: judged by the stamp alone
        return False
    had = first["model"]
    decided = [k for k in BASELINES.meta(name).get("decided_by_fit", ())
               if isinstance(now.get("settings"), dict) and k in now["settings"] and now["settings"][k] is None]
    if decided and isinstance(had.get("settings"), dict):  # what fit set from the data is no change of settings
        had = {**had, "settings": {k: None if k in decided else v for k, v in had["settings"].items()}}
    return now != had


def _resumable(rd: RunDir, name: str, training: dict):
    """(model, train_s) of a `train` killed while `name` was predicting: the saved model, loaded, when its
    partial file answers this training and the loaded model is the one that answered it; else None (a
    model with nothing saved is fitted again and predicts everything again)."""
    first = _first(rd.reference_partial(name))
    cls = BASELINES.get(name)
    if not _made_by(first, training) or not hasattr(cls, "load") or not rd.has_saved_model(name):
        return None
    model = cls.load(rd.model_dir(name))
    if json.loads(json.dumps(model.identity(), default=str)) != first.get("model"):
        return None
    return model, float(first["train_s"])


def _budget(name: str, tune: int) -> int:
    """The trials `name` gets under `--tune N`: N for a tunable model, 0 for one trained with its fixed setting."""
    return tune if tune and BASELINES.meta(name).get("tunable") else 0


def _epoch_cap(name: str, tune: int, tune_epochs: int | None) -> int | None:
    """The per-trial epoch cap of `name`'s search (`baselines.tuning.epoch_cap`), None when it is not tuned or has none."""
    if not _budget(name, tune):
        return None
    from recharness.baselines.tuning import epoch_cap

    return epoch_cap(BASELINES.get(name), tune_epochs)


def train(out: Path, *, suite: str | None = None, baselines: list[str] | None = None, seed: int = 0,
          latency_runs: int = LATENCY_RUNS, progress=None, executor: str = "local",
          address: str | None = None, retrain: bool = False, tune: int = 0,
          tune_epochs: int | None = None) -> list[Path]:
    """Fit each baseline serving the build's tasks (or only `baselines`) and write its predictions for
    every sample of those tasks through the executor. Returns the reference files. A model already
    trained on this build with this seed is kept; one killed while predicting resumes with its saved
    model (`_resumable`), else a killed `train` resumes with the next model; `retrain` fits every one
    again. `tune`: N Optuna trials per tunable model on a validation split of the training data
    (`baselines.tuning`), the same budget for each; the search is kept beside the model.
    `tune_epochs`: the per-trial epoch cap of models trained in epochs (default: each class's
    `tune_epochs`, SASRec 3; the DLRMs none), stated in the budget.
    `executor="ray"`: the models train in parallel, one Ray task each (`address` as for `run`), each
    timing its own fit and predictions; their predictions and saved weights come back to be written here."""
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
    rd = RunDir(out)
    fp = info["fingerprint"]
    training = {n: _training(fp, n, seed, tune, tune_epochs) for n in names}
    firsts = {} if retrain else {n: _first(rd.reference(n)) for n in names}  # each reference file read once
    kept = [n for n in firsts if _made_by(firsts[n], training[n])]
    changed = [n for n in kept if _settings_changed(n, seed, firsts[n], training[n])]
    if changed and progress is not None:
        progress(f"settings changed since they were trained: {', '.join(changed)}: fitted again")
    kept = [n for n in kept if n not in changed]
    if kept and progress is not None:
        progress(f"already trained on this build (seed {seed}), kept: {', '.join(kept)} (--retrain fits them again)")
    for n in kept:  # a killed --retrain's checkpoint: its model is kept as it was
        rd.remove_fit_checkpoint(n)
    names = [n for n in names if n not in kept]
    if executor == "ray" and tune and names:
        raise ConfigError("--tune runs locally (one search after another, the same budget each): drop --executor ray")
    if executor not in ("local", "ray"):
        raise ConfigError(f"unknown executor {executor!r}: local or ray")
    resumed = {} if retrain else {n: r for n in names if (r := _resumable(rd, n, training[n])) is not None}
    for n in names:
        if n not in resumed:  # another training's answers, or a model to fit again: its answers start afresh
            remove_log(rd.reference_partial(n))
        if retrain:  # fitted again from epoch 1, not from a killed fit's checkpoint
            rd.remove_fit_checkpoint(n)
    fresh = [n for n in names if n not in resumed]
    train_data = data_id = remote = None
    if fresh:
        train_data = TrainData.of_build(load_dataset(info["dataset"]), out, info["suite"])
        #: what the models learn from, recorded with each (train.json): the build and its training data's size
        data_id = {"build": fp, "dataset": info["dataset"], "suite": info["suite"],
                   "train_interactions": train_data.interactions.height,
                   "train_pairs": train_data.pairs.height if train_data.pairs is not None else None,
                   "train_sequences": train_data.sequences.height if train_data.sequences is not None else None}
    if executor == "ray" and fresh:  # one Ray task per model, in parallel; the files are still written here
        from recharness.runner.train_ray import train_ray

        if progress is not None:
            progress(f"training {len(fresh)} models as Ray tasks…")
        remote = {r["name"]: r for r in train_ray(fresh, train_data, seed, dict(by_task), served, latency_runs,
                                                  info["suite"], data_id, address=address, progress=progress)}
    for name in names:
        own = bool(BASELINES.meta(name).get("own_latency"))
        runs = 0 if own else latency_runs
        if name in resumed:
            model, seconds = resumed[name]
            identity, answer = model.identity(), _timed(name, model, runs, progress, own)
            if progress is not None:
                progress(f"{name}: a killed train left its predictions unfinished: resumed with the model saved in "
                         f"{rd.relative(rd.model_dir(name))}")
        elif remote is not None:
            r = remote[name]
            rd.tuning_json(name).unlink(missing_ok=True)  # an earlier search's record would call this fit tuned
            for rel, data in r["files"].items():
                atomic_write_bytes(rd.model_dir(name) / rel, data)
            rd.remove_fit_checkpoint(name)  # fitted afresh there: a local one is stale
            by_name = {t: (recs, timing) for t, recs, timing in r["predictions"]}
            identity, seconds, answer = r["identity"], r["train_s"], lambda _task, ss, k=by_name: k[ss[0]["task"]]
        else:
            model, seconds = _fit(rd, name, train_data, data_id, seed, tune, tune_epochs, progress)
            identity, answer = model.identity(), _timed(name, model, runs, progress, own)
        stamp = {"kind": "reference", "train_s": round(seconds, 6), "train_seed": seed,
                 "tune_trials": training[name]["tune_trials"]}
        for key in ("tune_epochs", "tune_space"):
            if training[name][key] is not None:
                stamp[key] = training[name][key]
        _predict(rd, TrainedReference(name, identity, stamp, answer), by_task, served, info["suite"], fp)
    return [rd.reference(n) for n in kept + names]


def _fit(rd: RunDir, name: str, train_data: TrainData, data_id: dict, seed: int, tune: int,
         tune_epochs: int | None, progress):
    """(model, seconds): `name` fitted here (searched first under `--tune`), saved beside the run with its
    train.json."""
    if progress is not None:
        progress(f"training {name}…")
    search = None
    if _budget(name, tune):
        from recharness.baselines.tuning import tune as search_space

        search = search_space(BASELINES.get(name), train_data, tune, seed, progress=progress, epochs=tune_epochs,
                              log=rd.tuning_trials(name), stamp={"build": data_id["build"]})
        atomic_write_text(rd.tuning_json(name), json.dumps(search, indent=2))
    else:
        # fitted with its defaults: an earlier search's record would have the report show it tuned
        rd.tuning_json(name).unlink(missing_ok=True)
        if tune and progress is not None:
            progress(f"{name} has no search space: trained with its fixed configuration")
    model, seconds = fit(name, train_data, seed, search["best"]["params"] if search else None,
                         checkpoint=(rd.fit_checkpoint(name), {"build": data_id["build"]}))
    fit_log, (after, _) = getattr(model, "log", None), resumed_from(model)
    if after and not (isinstance(fit_log, dict) and fit_log.get("shared_fit")) and progress is not None:
        progress(f"{name}: went on from a killed fit's checkpoint after epoch {after}")
    summary = {k: search[k] for k in ("budget", "objective", "best", "seconds")} if search else None
    if summary is not None and isinstance(getattr(model, "log", None) or {}, dict):
        model.log = {**(getattr(model, "log", None) or {}), "tuning": summary}  # a DLRM's is a FitLog
    log = getattr(model, "log", None)
    if isinstance(log, dict) and log.get("shared_fit") and log.get("seconds") is not None:
        seconds = float(log["seconds"])  # reused another variant's training run: report that run's time
    save = getattr(model, "save", None)
    if callable(save):  # trained weights kept beside the run: `score`/`report` never retrain, a killed train resumes
        save(rd.model_dir(name))
    logged = train_log.write(rd.model_dir(name), model, seed=seed, data=data_id, seconds=seconds)
    if progress is not None:
        progress(train_log.summary_line(name, logged))
    if summary is not None and logged is not None and "tuning" not in logged:
        # a model trained in epochs: train.json is its epochs' record, the search is added beside them
        logged["tuning"] = summary
        atomic_write_text(train_json_file(rd.model_dir(name)), json.dumps(logged, indent=2, default=str))
        if progress is not None:
            progress(train_log.tuned_line(name, summary, "refitted with its own epoch limit"))
    if search is not None:  # the model is saved: a later --retrain searches afresh
        rd.tuning_trials(name).unlink(missing_ok=True)
    rd.remove_fit_checkpoint(name)  # the model it led to is saved with its train.json
    return model, seconds


def _timed(name: str, model, runs: int, progress, own_latency: bool = False):
    """How a model fitted (or loaded) here answers a task's samples: one timed batch (`timed_predict`)."""
    def answer(task, samples: list[dict]) -> tuple[dict[str, dict], dict]:
        if progress is not None:
            progress(f"{name}: predicting {len(samples)} {samples[0]['task']} samples, timing {runs} "
                     "single-sample calls…")
        return timed_predict(model, samples, runs, task=task, own_latency=own_latency)

    return answer


def _predict(rd: RunDir, backend: TrainedReference, by_task: dict[str, list[dict]], served: dict, suite: str,
             fp: str) -> None:
    """`backend`'s answers to every sample of the tasks it serves, through the executor into the partial
    file, which becomes the reference file once whole. An answer that failed leaves no file: a
    reference with invalid rows where the model crashed would be scored as the model's own."""
    name = backend.model
    tasks = {t: get_task(suite, t) for t in by_task if name in served[t]}
    samples = [s for t in tasks for s in by_task[t]]
    partial = rd.reference_partial(name)
    stats = with_model(backend, lambda m: run_samples(samples, tasks, m, partial, build=fp), use_cache=False)
    if stats.errors:
        bad = next(r for r in read_jsonl(partial, tolerate_torn_tail=True) if r.get("error_kind"))
        partial.unlink()
        raise RecharnessError(f"{name} failed to answer {sum(stats.errors.values())} samples (sample {bad['id']}: "
                              f"{bad['error']}); none of its predictions were kept, its trained model is in "
                              f"{rd.relative(rd.model_dir(name))}")
    if not stats.complete:
        raise RecharnessError(f"{name} left {stats.total - stats.skipped - stats.done - stats.unanswered} samples "
                              f"unanswered ({dict(stats.undone)}): run `train` again to finish them")
    os.replace(partial, rd.reference(name))
