"""The train stage's Ray path (`train --executor ray`): one reference model per Ray task, fitted where it runs;
the fitted model and its saved files come back to the driver, which predicts and times each model there, one at a
time once every fit is done (timed beside other models' training, a latency would hold their load: the local
path's terms), and writes every file, the predictions through the executor as a local train does (see
runner.train)."""

from __future__ import annotations

import copy
from pathlib import Path

from recharness.execution.ray_executor import init_ray, ray_module


def _fit_remote(name: str, train_data, seed: int, data_id: dict) -> dict:
    """In a Ray task: fit one baseline; the model comes back, and its saved files as bytes."""
    import tempfile

    from recharness.baselines import fit
    from recharness.runner import train_log

    model, seconds = fit(name, train_data, seed)
    files: dict[str, bytes] = {}
    save = getattr(model, "save", None)
    with tempfile.TemporaryDirectory(prefix=f"recharness-{name}-") as tmp:
        if callable(save):
            save(Path(tmp) / name)
        train_log.write(Path(tmp) / name, model, seed=seed, data=data_id, seconds=seconds)
        if (Path(tmp) / name).exists():
            for f in sorted((Path(tmp) / name).rglob("*")):
                if f.is_file():
                    files[str(f.relative_to(Path(tmp) / name))] = f.read_bytes()
    import ray

    return {"name": name, "identity": model.identity(), "train_s": seconds, "model": model, "files": files,
            "node": ray.get_runtime_context().get_node_id()[:8]}


def predict_and_time(name: str, model, by_task: dict, served: dict, latency_runs: int, suite: str) -> list:
    """[(task, records, timing)] for each task `name` serves: `timed_predict` as the local path calls it."""
    from recharness.baselines import BASELINES
    from recharness.runner.latency import timed_predict
    from recharness.tasks.registry import get_task

    out = []
    for t, task_samples in by_task.items():
        if name not in served[t]:
            continue
        own = bool(BASELINES.meta(name).get("own_latency"))
        runs = 0 if own else latency_runs  # as the local path
        recs, timing = timed_predict(model, task_samples, runs, task=get_task(suite, t), own_latency=own)
        out.append((t, recs, timing))
    return out


def train_ray(names: list[str], train_data, seed: int, by_task: dict, served: dict, latency_runs: int, suite: str,
              data_id: dict, *,
              address: str | None = None, num_cpus: float = 1, progress=None) -> list[dict]:
    """Fit `names` in parallel, one Ray task each; results in the order of `names`."""
    ray = ray_module()
    owns = init_ray(address)
    try:
        data_ref = ray.put(train_data)
        fit_task = ray.remote(_fit_remote).options(num_cpus=num_cpus, max_retries=1)
        refs = {fit_task.remote(n, data_ref, seed, data_id): n for n in names}
        results: dict[str, dict] = {}
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            r = ray.get(ready[0])
            results[r["name"]] = r
            if progress is not None:
                progress(f"{r['name']} trained in {r['train_s']:.1f} s on node {r['node']}; "
                         f"{len(pending)} still training…")
        for n in names:  # every fit done: each model predicted and timed here, alone
            if progress is not None:
                progress(f"{n}: predicting and timing it on the driver, no other model training…")
            # a copy of the model Ray gave back: its arrays came zero-copy from the object store, read-only
            # (implicit's ALS refuses those)
            model = copy.deepcopy(results[n].pop("model"))
            results[n]["predictions"] = predict_and_time(n, model, by_task, served, latency_runs, suite)
        return [results[n] for n in names]
    finally:
        if owns:
            ray.shutdown()
