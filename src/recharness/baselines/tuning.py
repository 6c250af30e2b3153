"""`recharness train --tune N`: every tunable reference searched with the same budget, on validation only.

A baseline class is tunable when it has a `space` ({parameter: ("int"|"float"|"log"|"logint", low, high), or
("choice", a, b, ...)}: "log" a float on a log scale, "logint" a whole number on one, as recorded), `defaults()` and `create(seed, **params)`. Each gets N Optuna trials (TPE,
seeded; trial 0 is its default configuration, so tuning never reports worse than the default on
validation). What a trial is fitted on and scored by (`objective_for`) is carved from the training
data — never a test sample:

- rankers (the HistoryScorers ItemKNN/EASE/ALS/Markov on a build without labelled pairs, SASRec and its
  layer variants): NDCG@10 over
  the full catalog (history excluded) on ≤ `VALID_USERS` validation pairs (`validation_split`: a
  list-wise build's own validation rows, else each training user's last training item, which the
  trial's fit then does not see). SASRec fits on the build's training windows and early-stops on
  all of the build's validation rows, as it does untuned; the scored pairs are a seeded sample of those
  rows, so its epoch is picked on a superset of them (the rows are the second-to-last positive of
  each user, the test target the last; under `split=global_time`, each user's last positive before the cut).
  Under a global time split the validation pairs are still per user, not by time: a trial's fit sees other
  users' interactions stamped after a validation target (none after the cut), the pattern the test split
  removes, so the search chooses as under leave-last-out; the test is untouched.
- click models (the DLRMs): AUC on the validation slice of the training pairs their fit early-stops
  on (the build's valid.parquet, else a seeded 10% of the training pairs held out), from the weights
  of the best epoch. A class chooses this through its `tuning_objective(train, seed)`.
- the HistoryScorers on a pairs (CTR) build, where the task reports AUC on labelled pairs: AUC of their
  click scores (`p_clicks`) on the same validation pairs (valid.parquet, else the DLRMs' seeded 10%),
  fitted on the other training pairs' clicks (`history_scorer.click_validation`), not next-item NDCG.

Per-trial epoch cap: a model trained in epochs may have one, `tune_epochs` (a class attribute, or
`tune(..., epochs=E)`), and it is part of the stated budget (`budget.epochs_per_trial` in
tuning.json): every trial then trains exactly E epochs (max_epochs = patience = E, so no trial stops
earlier than another) and is scored with its best epoch's weights, so every trial of a model gets
the same compute. Its value is then a best of E looks at the rows it is scored on (SASRec keeps its
best epoch by those validation rows), where a model fitted once (ItemKNN, EASE, ALS, Markov) has one
look: trial values of the two kinds are not on one footing (each kind only chooses among its own
trials; the test metric is reported once either way). SASRec's cap is 3 epochs (a trial costs minutes on ML-1M); the DLRMs have none (a
trial is seconds): each trial runs their own early stopping (patience 2, at most 50 epochs). A
short cap favours configurations that learn fast; the cap is stated so that this is visible.

The chosen configuration is then fitted on all the training data with the model's own epoch limit
and early stopping (not the cap), and its test metric reported once. The whole search (every
trial's parameters, value and seconds) is kept in `models/<name>/tuning.json`.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from recharness.baselines.base import Baseline, TrainData
from recharness.core.errors import ConfigError
from recharness.baselines.history_scorer import HistoryScorer, click_samples, click_validation, validation_split
from recharness.metrics.full_ranking import rank_metrics

#: validation pairs scored per trial (drawn with the seed when there are more): the same for every model
VALID_USERS = 2_000
METRIC = "ndcg@10"


@dataclass(frozen=True)
class Objective:
    """What a trial fits on (`fit_on`) and the validation value its fitted model gets (`score`)."""

    fit_on: TrainData
    score: Callable[[Baseline], float]
    #: the metric's name ("ndcg@10", "auc") and how many validation units it is computed on
    metric: str
    size: int
    #: the objective as tuning.json states it
    description: str
    #: (user or None, item) of each validation unit, computed when asked: what tests check against the test samples
    keys: Callable[[], list[tuple[str | None, str]]] = field(default=list)


def validation_ndcg(model: Baseline, pairs: list[tuple[list[str], str]]) -> float:
    """Mean NDCG@10 of the targets' full-catalog ranks after their histories (history removed)."""
    answers = model.target_ranks([(t, list(h), None) for h, t in pairs])
    ranks = [a.get("rank") for a in answers]
    return float(rank_metrics([np.inf if r is None else r for r in ranks], ks=(10,))["ndcg@10"])


def _pair_users(train: TrainData, pairs: list[tuple[list[str], str]]) -> list[tuple[str | None, str]]:
    """(user, target) of each validation pair: looked up from the rows `validation_split` drew them from."""
    from recharness.baselines.history_scorer import user_sequences

    if train.sequences is not None:
        import polars as pl

        rows = train.sequences.filter(pl.col("part") == "valid").select("user_id", "history", "target").iter_rows()
        owner = {(tuple(h), t): u for u, h, t in rows}
    else:
        owner = {(tuple(s[:-1]), s[-1]): u for u, s in user_sequences(train).items() if len(s) >= 2}
    return [(owner.get((tuple(h), t)), t) for h, t in pairs]


def ranking_objective(train: TrainData, seed: int) -> Objective:
    """NDCG@10 over the full catalog on ≤ `VALID_USERS` pairs of `validation_split` (never a test sample)."""
    fit_on, pairs = validation_split(train, VALID_USERS, seed)
    return Objective(fit_on, lambda model: validation_ndcg(model, pairs), METRIC, len(pairs),
                     f"{METRIC} over the full catalog on {len(pairs)} validation pairs carved from the "
                     "training data (never a test sample)", lambda: _pair_users(train, pairs))


def click_objective(train: TrainData, seed: int) -> Objective:
    """A HistoryScorer's objective on a pairs (CTR) build: AUC of `p_clicks` on its validation pairs
    (`click_validation`: valid.parquet, else the DLRMs' seeded held-out slice), fitted without them; never a
    test pair."""
    from recharness.metrics.classification import auc

    fit_on, valid = click_validation(train, seed)
    samples, labels = click_samples(valid), valid["label"].to_numpy()
    where = ("the build's validation slice of the training pairs (valid.parquet)"
             if train.valid is not None and train.valid.height else "a seeded 10% of the training pairs held out")
    return Objective(fit_on, lambda model: float(auc(labels, np.asarray(model.p_clicks(samples), dtype=float))),
                     "auc", valid.height,
                     f"auc of the click scores on {valid.height} validation pairs: {where}, none of which the "
                     "trial's fit sees (never a test pair)",
                     lambda: list(zip(valid["user_id"].to_list(), valid["item_id"].to_list())))


def labelled_pairs(train: TrainData) -> bool:
    """Whether the training data are clicks and non-clicks (a CTR build's pairs), not positives alone (an llmrec
    global-time build writes its pre-cut interactions as pairs all labelled 1: a ranking task's training data)."""
    return train.pairs is not None and "label" in train.pairs.columns and train.pairs["label"].n_unique() > 1


def objective_for(cls: type[Baseline], train: TrainData, seed: int) -> Objective:
    """The class's own objective (`tuning_objective`), else for a HistoryScorer on labelled pairs (a CTR
    build) the click one, else the ranking one."""
    own = getattr(cls, "tuning_objective", None)
    if callable(own):
        return own(train, seed)
    if issubclass(cls, HistoryScorer) and labelled_pairs(train):
        return click_objective(train, seed)
    return ranking_objective(train, seed)


def _suggest(trial, name: str, spec: tuple):
    kind, *args = spec
    if kind == "choice":
        return trial.suggest_categorical(name, list(args))
    low, high = args
    if kind == "int":
        return trial.suggest_int(name, int(low), int(high))
    if kind == "logint":
        return trial.suggest_int(name, int(low), int(high), log=True)
    if kind == "log":
        return trial.suggest_float(name, float(low), float(high), log=True)
    return trial.suggest_float(name, float(low), float(high))


def epoch_cap(cls: type[Baseline], epochs: int | None = None) -> int | None:
    """The per-trial epoch cap of `cls` (`epochs` when given, else its `tune_epochs`); None: no cap, or
    a model not trained in epochs (no `max_epochs` among its defaults)."""
    cap = epochs if epochs is not None else getattr(cls, "tune_epochs", None)
    if cap is None or "max_epochs" not in cls.defaults():
        return None
    return int(cap)


def _distribution(spec: tuple):
    """The Optuna distribution `_suggest` draws `spec` from (to replay a logged trial)."""
    import optuna.distributions as d

    kind, *args = spec
    if kind == "choice":
        return d.CategoricalDistribution(list(args))
    low, high = args
    if kind == "int":
        return d.IntDistribution(int(low), int(high))
    if kind == "logint":
        return d.IntDistribution(int(low), int(high), log=True)
    if kind == "log":
        return d.FloatDistribution(float(low), float(high), log=True)
    return d.FloatDistribution(float(low), float(high))


def _logged_trials(log: Path | None, stamp: dict) -> list[dict]:
    """The finished trials of this search (same `stamp`) a killed run logged, in order; a torn last line is
    what the kill cut off."""
    if log is None or not log.exists():
        return []
    rows = []
    for line in log.read_text(encoding="utf-8").splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            break
        if r.get("stamp") != stamp:
            return []  # another search's log (another build, seed or budget): start afresh
        rows.append({k: v for k, v in r.items() if k != "stamp"})
    return rows


def _replay(study, rows: list[dict], dists: dict) -> bool:
    """Put a killed search's finished trials back into `study` without running them: each is asked of the
    sampler as the uninterrupted search asked it (its seeded draws advance alike, so the trials after it are
    the ones an uninterrupted search would run, not repeats of the first draws) and told its logged value.
    Returns False if a draw differs from the log (another Optuna version): that trial and the rest are then
    added as given, and the sampler's later draws may differ."""
    import optuna

    for n, r in enumerate(rows):
        t = study.ask(dists)
        if t.params == r["params"]:
            study.tell(t, r["valid"])
            continue
        study.tell(t, state=optuna.trial.TrialState.FAIL)  # not a trial of this search: the sampler skips it
        for rest in rows[n:]:
            study.add_trial(optuna.trial.create_trial(params=rest["params"], distributions=dists, value=rest["valid"]))
        return False
    return True


def tune(cls: type[Baseline], train, trials: int, seed: int = 0, progress=None, epochs: int | None = None,
         log: Path | None = None, stamp: dict | None = None) -> dict:
    """Search `cls`'s space with `trials` Optuna trials; returns the search record (best params first).
    `epochs`: the per-trial epoch cap (default: the class's `tune_epochs`). `log`: each finished trial is
    appended there (with `stamp`, what identifies the search), and a search killed part way resumes from
    it: its finished trials are replayed into the study, not run again (`_replay`: the sampler draws as it
    did, so the resumed search runs the trials an uninterrupted one would), and the budget is the same.
    A trial whose validation value is undefined (NaN: an AUC on pairs of one label) stops the search with a
    ConfigError."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    objective_ = objective_for(cls, train, seed)
    cap = epoch_cap(cls, epochs)
    fixed = {"max_epochs": cap, "patience": cap} if cap is not None else {}
    # the space and the defaults too: trials of another space (a widened range) must not fill this one's budget
    stamp = {"baseline": cls.name, "trials": trials, "seed": seed, "epochs": cap,
             "space": {k: list(v) for k, v in cls.space.items()}, "default": cls.defaults(), **(stamp or {})}
    stamp = json.loads(json.dumps(stamp, default=str))  # as the log holds it
    rows: list[dict] = _logged_trials(log, stamp)[:trials]
    if log is not None and not rows:
        if log.exists() and log.stat().st_size and progress is not None:
            progress(f"tuning {cls.name}: {log} holds trials of another search (its space, defaults, budget or "
                     "build differ): starting afresh")
        log.unlink(missing_ok=True)
    elif log is not None:  # the log as read, no more: a torn last line would glue the next trial onto it
        kept = "".join(json.dumps({**r, "stamp": stamp}) + "\n" for r in rows)
        if log.read_text(encoding="utf-8") != kept:
            tmp = log.with_suffix(log.suffix + ".tmp")
            tmp.write_text(kept, encoding="utf-8")
            os.replace(tmp, log)
    metric = objective_.metric

    def objective(trial) -> float:
        number = len(rows)  # the trial's place in this search (a replay's skipped draw is not one)
        params = {k: _suggest(trial, k, spec) for k, spec in cls.space.items()}
        t0 = time.perf_counter()
        value = objective_.score(cls.create(seed=seed, **params, **fixed).fit(objective_.fit_on))
        if not np.isfinite(value):  # no trial could be told apart from another: a search would only pretend
            raise ConfigError(f"tuning {cls.name}: the validation {metric} of trial {number} is undefined "
                              f"({value}): {objective_.description}; AUC needs both clicks and non-clicks among "
                              "them. Train without --tune, or rebuild with more training data")
        rows.append({"trial": number, "params": params, "valid": value,
                     "seconds": round(time.perf_counter() - t0, 3)})
        best = max(r["valid"] for r in rows)
        rows[-1]["best"] = best
        if log is not None:  # durable before the next trial starts: a kill loses at most the trial running
            log.parent.mkdir(parents=True, exist_ok=True)
            with open(log, "a", encoding="utf-8") as f:
                f.write(json.dumps({**rows[-1], "stamp": stamp}) + "\n")
                f.flush()
                os.fsync(f.fileno())
        if progress is not None:
            progress(f"tuning {cls.name}: trial {number} ({number + 1} of {trials}), valid {metric} {value:.4f} "
                     f"(best {best:.4f})")
        return value

    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=seed))
    study.enqueue_trial({k: v for k, v in cls.defaults().items() if k in cls.space})
    dists = {k: _distribution(spec) for k, spec in cls.space.items()}
    replayed = _replay(study, rows, dists)
    if rows and progress is not None:
        progress(f"tuning {cls.name}: resumed with {len(rows)} of {trials} trials done"
                 + ("" if replayed else " (the sampler's later draws differ from an uninterrupted search's)"))
    study.optimize(objective, n_trials=trials - len(rows))
    best = max(rows, key=lambda r: (r["valid"], -r["trial"]))
    budget = {"trials": trials, "sampler": "TPE", "seed": seed}
    if cap is not None:
        budget["epochs_per_trial"] = cap
    return {"budget": budget, "objective": objective_.description,
            "space": {k: list(v) for k, v in cls.space.items()}, "default": cls.defaults(),
            "best": {"trial": best["trial"], "params": best["params"], "valid": best["valid"]},
            "trials": rows, "seconds": round(sum(r["seconds"] for r in rows), 3)}
