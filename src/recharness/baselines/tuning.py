"""`recharness train --tune N`: every tunable reference searched with the same budget, on validation only.

Each model gets N Optuna trials (TPE, seeded; trial 0 is its default configuration, so tuning
never reports worse than the default on validation). A trial fits on the training data minus the
validation targets and is scored by NDCG@10 over the full catalog (history excluded) on
validation pairs carved from the training data (`validation_split`: a list-wise build's own
validation rows, else each training user's last training item) — never a test sample. The chosen
configuration is then fitted on all the training data and its test metric reported once. The
whole search (every trial's parameters, value and seconds) is kept in `models/<name>/tuning.json`.
"""

from __future__ import annotations

import time

import numpy as np

from recharness.baselines.history_scorer import HistoryScorer, validation_split
from recharness.metrics.full_ranking import rank_metrics

#: validation pairs scored per trial (drawn with the seed when there are more): the same for every model
VALID_USERS = 2_000
METRIC = "ndcg@10"


def validation_ndcg(model: HistoryScorer, pairs: list[tuple[list[str], str]]) -> float:
    """Mean NDCG@10 of the targets' full-catalog ranks after their histories (history removed)."""
    ranks = [model.target_rank(t, h) for h, t in pairs]
    return float(rank_metrics([np.inf if r is None else r for r in ranks], ks=(10,))["ndcg@10"])


def _suggest(trial, name: str, spec: tuple[str, float, float]):
    kind, low, high = spec
    if kind == "int":
        return trial.suggest_int(name, int(low), int(high))
    if kind == "log":
        if float(low).is_integer() and float(high).is_integer() and low >= 1:
            return trial.suggest_int(name, int(low), int(high), log=True)
        return trial.suggest_float(name, float(low), float(high), log=True)
    return trial.suggest_float(name, float(low), float(high))


def tune(cls: type[HistoryScorer], train, trials: int, seed: int = 0, progress=None) -> dict:
    """Search `cls`'s space with `trials` Optuna trials; returns the search record (best params first)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    fit_on, pairs = validation_split(train, VALID_USERS, seed)
    rows: list[dict] = []

    def objective(trial) -> float:
        params = {k: _suggest(trial, k, spec) for k, spec in cls.space.items()}
        t0 = time.perf_counter()
        value = validation_ndcg(cls.create(seed=seed, **params).fit(fit_on), pairs)
        rows.append({"trial": trial.number, "params": params, "valid": value,
                     "seconds": round(time.perf_counter() - t0, 3)})
        best = max(r["valid"] for r in rows)
        rows[-1]["best"] = best
        if progress is not None:
            progress(f"tuning {cls.name}: trial {trial.number + 1}/{trials}, valid {METRIC} {value:.4f} "
                     f"(best {best:.4f})")
        return value

    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=seed))
    study.enqueue_trial({k: v for k, v in cls.defaults().items() if k in cls.space})
    study.optimize(objective, n_trials=trials)
    best = max(rows, key=lambda r: (r["valid"], -r["trial"]))
    return {"budget": {"trials": trials, "sampler": "TPE", "seed": seed},
            "objective": f"{METRIC} over the full catalog on {len(pairs)} validation pairs carved from the "
                         "training data (never a test sample)",
            "space": {k: list(v) for k, v in cls.space.items()}, "default": cls.defaults(),
            "best": {"trial": best["trial"], "params": best["params"], "valid": best["valid"]},
            "trials": rows, "seconds": round(sum(r["seconds"] for r in rows), 3)}
