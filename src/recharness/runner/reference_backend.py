"""Reference recommenders answering through the executor, as `-m baseline:NAME` and under `train`.

`ReferenceBackend` (`-m baseline:NAME`): the model `recharness train` saved in the run directory
(`RunDir.model_dir(NAME)`) is loaded; a baseline with nothing to load (popularity, random) is fitted
on the build's own training data, exactly as `train` fits it. `TrainedReference`: the model `train`
has just fitted (or resumes with), writing the run's reference file. Both answer batches of a task's
samples in one call of the baseline (`aanswer_samples`: its batched scoring is what makes it fast),
and the executor commits each batch: locked, resumable after a kill, written exactly once, like an LLM's
answers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from recharness.baselines import BASELINES, TrainData, fit
from recharness.core.errors import ConfigError
from recharness.core.rundir import RunDir
from recharness.core.types import Completion, GenerationParams, Messages, Prediction
from recharness.models.base import ModelBackend

#: samples per batched call under `run`: enough for a model's batched scoring, few enough that a kill loses little
BATCH_SIZE = 64


def _trained_on(model_dir) -> str | None:
    """The build fingerprint a saved model's train.json records (None: it records none, e.g. older models)."""
    import json

    from recharness.core.rundir import train_json_file

    path = train_json_file(model_dir)
    try:
        data = json.loads(path.read_text(encoding="utf-8")).get("data") or {}
    except (OSError, ValueError, AttributeError):
        return None
    return data.get("build") if isinstance(data, dict) else None


class ReferenceBackend(ModelBackend):
    backend = "baseline"
    #: one batch at a time: a torch model is not shared between threads
    max_concurrency = 1
    batch_size = BATCH_SIZE

    def __init__(self, name: str, run_dir, *, seed: int = 0):
        super().__init__(name)
        BASELINES.meta(name)  # an unknown name: one line naming the known ones
        rd = RunDir(run_dir)
        info = rd.build_info()
        cls = BASELINES.get(name)
        saved = rd.model_dir(name)
        if rd.has_saved_model(name) and hasattr(cls, "load"):
            trained_on = _trained_on(saved)
            if trained_on is not None and trained_on != info["fingerprint"]:
                raise ConfigError(f"baseline:{name}: the model in {saved} was trained on another build of this run "
                                  f"directory (build {trained_on[:12]}…, now {info['fingerprint'][:12]}…): run "
                                  f"`recharness train {info['suite']} -o {rd.path} -b {name} --retrain`")
            self.baseline = cls.load(saved)
        elif BASELINES.meta(name).get("heavy"):
            raise ConfigError(f"baseline:{name}: no trained model in {saved}: run `recharness train "
                              f"{info['suite']} -o {rd.path} -b {name}` first")
        else:
            from recharness.data.store import load_dataset

            self.baseline, _ = fit(name, TrainData.of_build(load_dataset(info["dataset"]), rd.path, info["suite"]),
                                   seed)

    def identity(self) -> dict:
        return {"backend": self.backend, "model": self.model, **self.baseline.identity()}

    def answers_task(self, task) -> bool:
        """Whether `task` asks this reference (it names it in `Task.baselines`): `run` leaves the other tasks
        out, as `train` does, instead of committing an invalid answer for each of their samples."""
        return self.model in getattr(task, "baselines", ())

    def _records(self, task, samples: list[dict]) -> dict[str, dict]:
        """The baseline's answers to `samples` in one call. Each sample's `latency_s` is RecBench's latency, as
        `train` measures it (`runner.latency`): one single-sample call from scratch, here the batch's first
        sample timed once more on its own (a batched call's share per sample would be a throughput, not a
        latency); the batch's share per sample is kept beside it (`batch_share_s`)."""
        from recharness.runner.latency import timed_predict

        recs, timing = timed_predict(self.baseline, samples, runs=1, task=task)
        rate = timing.get("throughput_per_s")
        extra = {"batch_share_s": 1 / rate if rate else 0.0, "batch_samples": len(samples)}
        one = timing.get("latency_s", extra["batch_share_s"])
        out = {}
        for s in samples:
            rec = recs.get(s["id"])
            out[s["id"]] = (Prediction(valid=False, error=f"{self.model} gives no answer to this sample",
                                       error_kind="no_answer", latency_s=one, extra=extra) if rec is None
                            else Prediction(parsed=rec.get("parsed"), valid=bool(rec.get("valid", True)),
                                            error=rec.get("error"), latency_s=one, extra=extra)).to_record()
        return out

    async def aanswer_samples(self, task, samples: list[dict]) -> dict[str, dict]:
        return await asyncio.to_thread(self._records, task, samples)

    async def agenerate(self, messages: Messages, params: GenerationParams) -> Completion:
        raise ConfigError(f"baseline:{self.model} answers a task's samples, not chat messages")


class TrainedReference(ModelBackend):
    """A model `train` fitted, answering into the run's reference file: each record is the baseline's own
    (`parsed`, `valid`, …) with the training's `stamp` (kind, train_s, train_seed, tune_trials, …) and its
    task's timing (`runner.latency.timed_predict`: throughput of the batched call, single-sample latency),
    as `score` reads a reference. `answer(task, samples) -> (records, timing)` predicts."""

    backend = "baseline"
    max_concurrency = 1
    #: a task's samples in one call, as before `train` wrote through the executor: a batch's answers may
    #: depend on its members (random restarts its draws per call, title-cbs answers the first of them) and
    #: the throughput is that of the whole task
    batch_size = None
    #: a baseline answers from the samples' fields, never from a prompt: its records carry no prompt_version
    reads_prompts = False

    def __init__(self, name: str, identity: dict, stamp: dict,
                 answer: Callable[[object, list[dict]], tuple[dict[str, dict], dict]]):
        super().__init__(name)
        self._identity, self.stamp, self.answer = identity, stamp, answer

    def identity(self) -> dict:
        return self._identity

    async def aanswer_samples(self, task, samples: list[dict]) -> dict[str, dict]:
        recs, timing = await asyncio.to_thread(self.answer, task, samples)
        return {i: {**{k: v for k, v in r.items() if k != "id"}, **self.stamp, **timing} for i, r in recs.items()}

    async def agenerate(self, messages: Messages, params: GenerationParams) -> Completion:
        raise ConfigError(f"the trained reference {self.model} answers a task's samples, not chat messages")
