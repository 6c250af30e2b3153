"""`-m baseline:NAME`: a reference recommender as an ordinary row of `recharness run`.

The model `recharness train` saved in the run directory (`RunDir.model_dir(NAME)`) is loaded; a
baseline with nothing to load (popularity, random) is fitted on the build's own training data,
exactly as `train` fits it. It answers each sample through the executor like an LLM does
(`aanswer_sample`: the baseline's answer to that one sample, through the task's request kinds), so
the run is cached per sample, resumable after a kill and written exactly once.
"""

from __future__ import annotations

import asyncio
import time

from recharness.baselines import BASELINES, TrainData, fit
from recharness.core.errors import ConfigError
from recharness.core.rundir import RunDir
from recharness.core.types import Completion, GenerationParams, Messages, Prediction
from recharness.models.base import ModelBackend


class ReferenceBackend(ModelBackend):
    backend = "baseline"
    #: one sample at a time: a torch model is not shared between threads
    max_concurrency = 1

    def __init__(self, name: str, run_dir, *, seed: int = 0):
        super().__init__(name)
        BASELINES.meta(name)  # an unknown name: one line naming the known ones
        rd = RunDir(run_dir)
        info = rd.build_info()
        cls = BASELINES.get(name)
        saved = rd.model_dir(name)
        if saved.exists() and hasattr(cls, "load"):
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

    async def aanswer_sample(self, task, sample: dict) -> Prediction:
        t0 = time.perf_counter()
        recs = await asyncio.to_thread(self.baseline.predict, [sample], task)
        rec = recs.get(sample["id"])
        seconds = time.perf_counter() - t0
        if rec is None:  # e.g. a model with a sample cap that does not answer this one
            return Prediction(valid=False, error=f"{self.model} gives no answer to this sample",
                              error_kind="no_answer", latency_s=seconds)
        return Prediction(parsed=rec.get("parsed"), valid=bool(rec.get("valid", True)), error=rec.get("error"),
                          latency_s=seconds)

    async def agenerate(self, messages: Messages, params: GenerationParams) -> Completion:
        raise ConfigError(f"baseline:{self.model} answers a task's samples, not chat messages")
