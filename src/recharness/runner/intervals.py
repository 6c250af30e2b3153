"""95% intervals for a task's score rows, and which rows are not distinguishable from the best.

Each metric is resampled over the task's own units (`Task.units`), the same counts for every row
(paired); a task without units is re-scored on resampled samples within a time budget.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from recharness.core.types import ScoreRow
from recharness.metrics.bootstrap import DEFAULT_RESAMPLES

#: seconds the generic path (re-scoring resampled samples, for a task without `units`) may take per task
GENERIC_BUDGET_S = 60.0
#: p-values at or above this: a row is not distinguishable from the best
SIGNIFICANCE = 0.05


def resampled_score(task, samples: list[dict], recs: dict[str, dict]):
    """score(indices) for the generic path: the samples at `indices` (with repeats, renamed apart)."""
    def fn(idx: np.ndarray) -> dict[str, float]:
        ss, rr = [], {}
        for k, j in enumerate(idx.tolist()):
            s = samples[j]
            sid = f"{s['id']}\x1f{k}"
            ss.append({**s, "id": sid})
            if s["id"] in recs:
                rr[sid] = recs[s["id"]]
        return task.score(ss, rr)
    return fn


def swap_test(task, samples: list[dict], ra: dict, rb: dict, metrics: list[str], permutations: int, seed: int, *,
              budget_s: float) -> dict[str, dict]:
    """The paired permutation test by re-scoring, for metrics without units (each sample a unit): each sample's
    two answers swapped, both methods scored again, the difference against the observed one. Every one of the
    2**n swaps (exact, the sign-flip test's generalisation) when they fit `budget_s` at the measured cost of a
    scoring; else random swaps, each sample swapped with probability 1/2, as many as fit (at least 200, at most
    `permutations`), the p-value with scipy's +1. {metric: {p_perm, permutations, exact}}."""
    import time

    from recharness.metrics.bootstrap import is_number, permutation_p, swap_masks

    def values(pred: dict) -> dict[str, float]:
        got = task.score(samples, pred)
        return {m: float(got[m]) if is_number(got.get(m)) else float("nan") for m in metrics}

    t0 = time.perf_counter()
    va, vb = values(ra), values(rb)
    per = time.perf_counter() - t0  # one swap's two scorings
    observed = {m: va[m] - vb[m] for m in metrics}
    n = len(samples)
    fits = n < 63 and 2**n * per <= budget_s
    count = 2**n if fits else min(permutations, max(200, int(budget_s / per) if per > 0 else permutations))
    chunks, exact, count = swap_masks(n, count, seed, exact_ok=fits)
    null: dict[str, list[float]] = {m: [] for m in metrics}
    for chunk in chunks:
        for sw in chunk:
            a2 = {s["id"]: (rb if x else ra)[s["id"]] for s, x in zip(samples, sw) if s["id"] in (rb if x else ra)}
            b2 = {s["id"]: (ra if x else rb)[s["id"]] for s, x in zip(samples, sw) if s["id"] in (ra if x else rb)}
            va, vb = values(a2), values(b2)
            for m in metrics:
                null[m].append(va[m] - vb[m])
    return {m: {"p_perm": permutation_p(np.asarray(null[m]), observed[m], exact), "permutations": count,
                "exact": exact} for m in metrics}


class FailedUnits(dict):
    """What `checked_units` returns when a task's `units` raised: no units, and not the "task has none"
    case either, so no interval is made up by re-scoring plain samples (which would ignore the task's
    users, groups and orders); `error` says why, and the tables say so."""

    def __init__(self, error: str):
        super().__init__()
        self.error = error


class CheckedUnits(dict):
    """`checked_units`' answer: {metric: Units}, and whether the task offered units at all (`offered`): a task
    with units whose metrics all fell out here (none a number on these samples) is never resampled sample by
    sample instead, which would ignore its clusters."""

    offered: bool = False


def checked_units(task, samples: list[dict], recs: dict[str, dict], metrics: dict[str, float]) -> dict:
    """The task's units for the metrics that get an interval: one computation of each. The reported
    value becomes the units' own point value (`metrics` is updated), so the table, the interval and
    `compare` read the same numbers and cannot disagree; a task whose `score` computed another value
    is a bug in the task, logged — and raised under RECHARNESS_STRICT_UNITS=1 (the test suite sets it, so
    every task scored in a test is checked: a disagreement fails the test instead of being papered over)."""
    import logging
    import os

    strict = os.environ.get("RECHARNESS_STRICT_UNITS") == "1"

    from recharness.metrics.bootstrap import is_number
    from recharness.metrics.registry import wants_ci

    out = CheckedUnits()
    try:
        units = task.units(samples, recs) or {}
    except Exception as ex:  # a task's units must not sink the whole score: its rows only lose these intervals
        if strict:
            raise
        logging.getLogger(__name__).warning("%s: units failed (%s: %s): no intervals from units", task.name,
                                            type(ex).__name__, ex)
        return FailedUnits(f"the task's units failed ({type(ex).__name__})")
    out.offered = bool(units)
    for m, u in units.items():
        v = metrics.get(m)
        if not (wants_ci(m) and is_number(v)):
            continue
        pt = u.point()
        if not is_number(pt):
            continue
        if not abs(pt - v) <= 1e-9 * max(1.0, abs(v)):
            if strict:
                raise AssertionError(f"{task.name}: {m} from its units is {pt!r}, its score {v!r} (a bug in the "
                                     "task's score or units)")
            logging.getLogger(__name__).warning("%s: %s from its units is %r, its score %r: the units' value is "
                                                "reported (a bug in the task's score or units)", task.name, m, pt, v)
        metrics[m] = pt
        out[m] = u
    return out


def add_confidence_intervals(task, samples: list[dict], scored: list[tuple[ScoreRow, dict[str, dict]]], *,
                             resamples: int = DEFAULT_RESAMPLES, seed: int = 0,
                             generic_budget_s: float = GENERIC_BUDGET_S, units: list[dict] | None = None) -> None:
    """Fill `row.ci` for the rows of one task (all scored on the same `samples`).

    Metrics with units (`task.units`) are resampled as counts over their units, the same counts
    for every row (paired); the rest of the metrics that get an interval (registry `ci`), when the
    task has no units at all, by re-scoring resampled samples (`generic`; within
    `generic_budget_s` per task, at least 200 resamples). Then, per metric with a better side and at
    least two rows with an interval, the best row and the rows not distinguishable from it are `top`:
    p >= 0.05 in the exact paired sign-flip test up to EXACT_MAX_UNITS independent units (the test
    `compare` makes, so the two agree), in the paired bootstrap above that. A row alone has no mark.
    """
    from recharness.metrics.bootstrap import (
        EXACT_MAX_COSTLY_UNITS,
        EXACT_MAX_UNITS,
        MIN_UNITS,
        generic_replicates,
        is_number,
        percentile_ci,
    )
    from recharness.metrics.registry import wants_ci

    reps: dict[tuple[int, str], np.ndarray] = {}
    unit_of: dict[tuple[int, str], object] = {}
    keys: dict[tuple[int, str], tuple] = {}
    info: dict[tuple[int, str], dict] = {}
    jobs: dict[tuple, list[tuple[int, str, object]]] = defaultdict(list)
    generic: list[tuple[int, list[str]]] = []
    for i, (row, recs) in enumerate(scored):
        row_units = units[i] if units is not None else checked_units(task, samples, recs, row.metrics)
        if isinstance(row_units, FailedUnits):  # never the generic path: it would resample the wrong units
            for m, v in row.metrics.items():
                if wants_ci(m) and is_number(v):
                    row.extra.setdefault("no_interval", {})[m] = row_units.error
            continue
        if row_units:
            for m, u in row_units.items():
                k = u.independent_support()
                if k < MIN_UNITS:  # a bootstrap of so few independent units claims more than they show
                    row.extra.setdefault("no_interval", {})[m] = f"n too small: {k} unit{'s' if k != 1 else ''}"
                    continue
                jobs[u.key()].append((i, m, u))
                keys[(i, m)] = u.key()
                unit_of[(i, m)] = u
                info[(i, m)] = {"how": u.how, "generic": False}
        elif not getattr(row_units, "offered", False):
            wanted = [m for m, v in row.metrics.items() if wants_ci(m) and is_number(v)]
            if wanted and len(samples) < MIN_UNITS:  # each sample a unit: as above, too few for an interval
                for m in wanted:
                    row.extra.setdefault("no_interval", {})[m] = (f"n too small: {len(samples)} "
                                                                  f"unit{'s' if len(samples) != 1 else ''}")
            elif wanted:
                generic.append((i, wanted))
    for key, items in jobs.items():
        u0 = items[0][2]
        parts: dict[tuple[int, str], list[np.ndarray]] = defaultdict(list)
        for w in u0.counts(resamples, seed):
            for i, m, u in items:
                parts[(i, m)].append(u.replicates(w))
        for k, v in parts.items():
            reps[k] = np.concatenate(v)
    if generic:
        ids_key = ("generic", len(samples), hash(tuple(s["id"] for s in samples)))
        per_row = generic_budget_s / len(generic)
        for i, wanted in generic:
            got = generic_replicates(resampled_score(task, samples, scored[i][1]), len(samples), wanted, resamples,
                                     seed, budget_s=per_row)
            for m, r in got.items():
                reps[(i, m)], keys[(i, m)] = r, ids_key
                info[(i, m)] = {"how": "re-scored resampled samples", "generic": True}
    for (i, m), r in reps.items():
        ci = percentile_ci(r)
        if ci is None:
            continue
        scored[i][0].ci[m] = {"lo": ci[0], "hi": ci[1], "resamples": int(np.isfinite(r).sum()), **info[(i, m)]}
    swap = None
    if generic and len(samples) <= EXACT_MAX_UNITS:
        # few samples, no units: the bootstrap p of so few claims more than they show (every resample of five
        # samples can agree); the paired swap test by re-scoring decides, as the sign-flip test does with units
        wanted_of = dict(generic)
        done: dict[tuple[int, int], dict] = {}

        def swap(i: int, j: int, m: str) -> tuple[float, str]:
            if (i, j) not in done:
                ms = [x for x in wanted_of.get(i, []) if x in wanted_of.get(j, [])]
                done[(i, j)] = swap_test(task, samples, scored[i][1], scored[j][1], ms, resamples, seed,
                                         budget_s=generic_budget_s / max(1, len(scored) - 1))
            got = done[(i, j)].get(m)
            if got is None:
                return float("nan"), "permutation"
            return got["p_perm"], "exact" if got["exact"] else "permutation"

    _mark_best([row for row, _ in scored], reps, keys, unit_of, swap)
    versus_strongest_reference(task, [row for row, _ in scored], reps, keys, unit_of, swap)
    _breakdown_intervals(task, samples, scored, resamples=resamples, seed=seed)
    for row, _ in scored:
        row.extra["ci_settings"] = {"resamples": resamples, "seed": seed, "level": 0.95,
                                    "best": f"p >= {SIGNIFICANCE}: exact paired sign-flip test up to "
                                            f"{EXACT_MAX_UNITS} independent units (AUC's up to "
                                            f"{EXACT_MAX_COSTLY_UNITS}, then random flips), paired bootstrap above"}


def versus_strongest_reference(task, rows: list[ScoreRow], reps: dict, keys: dict, units: dict,
                               swap=None) -> None:
    """On the task's headline metric: the strongest reference row (the best point among references with
    an interval) is marked when a model row of `rows` is tested against it (a reference alone on its own
    samples, e.g. sample-capped, is not), and each model row says whether it beats it by the paired test `_mark_best`
    uses (exact sign-flip up to EXACT_MAX_UNITS independent units, paired bootstrap above):
    `row.extra["vs_strongest_reference"]` = {metric, reference, diff, p, test, verdict}, the verdict
    "beats" / "below" (p < 0.05 either way) or "not distinguishable"."""
    from recharness.metrics.bootstrap import EXACT_MAX_UNITS, bootstrap_p, paired_permutation
    from recharness.metrics.registry import metric_info

    m = getattr(task, "headline", None)
    info = metric_info(m) if m else None
    if info is None or info.higher_is_better is None:
        return
    from recharness.metrics.bootstrap import is_number

    sign = 1.0 if info.higher_is_better else -1.0
    idx = {id(r): i for i, r in enumerate(rows)}
    # the strongest of every reference with a value, interval or not: a stronger one without an interval must
    # not leave the verdicts to a weaker one
    refs = [r for r in rows if r.kind == "reference" and is_number(r.metrics.get(m))]
    models = [r for r in rows if r.kind == "model" and is_number(r.metrics.get(m))]
    if not refs or not models:  # e.g. a reference alone on its own samples (a sample cap): no row to compare it with
        return
    strongest = max(refs, key=lambda r: sign * r.metrics[m])
    if m not in strongest.ci:  # not marked (no row is tested against it), nor is a weaker one in its place
        why = (strongest.extra.get("no_interval") or {}).get(m) or "no interval"
        strongest.extra["no_verdicts"] = {"metric": m, "why": why}
        return
    j = idx[id(strongest)]
    tested = [r for r in models if m in r.ci and keys.get((idx[id(r)], m)) == keys.get((j, m))]
    if not tested:  # the mark names the reference each model row is tested against: none is
        return
    strongest.extra["strongest_reference"] = m
    untrained = untrained_references(task, rows)
    if untrained:  # the verdicts below are against a simple reference only: the table says which were left out
        strongest.extra["untrained_references"] = untrained
    for r in tested:
        i = idx[id(r)]
        if _subset(units.get((i, m))) != _subset(units.get((j, m))):
            r.extra["no_verdict"] = f"{m}: {DIFFERENT_SUBSETS}"
            continue
        diff = r.metrics[m] - strongest.metrics[m]
        ua, ub = units.get((i, m)), units.get((j, m))
        if ua is not None and ub is not None and ua.independent <= EXACT_MAX_UNITS:
            got = paired_permutation(ua, ub)  # exact, but for AUC past what its permutations allow
            p, test, used = got["p"], "exact sign-flip" if got["exact"] else "sign-flip, random", None
        elif ua is None and ub is None and swap is not None:  # few samples without units: re-scored swaps
            p, how = swap(i, j, m)
            test, used = ("exact paired swap" if how == "exact" else "paired swap, random"), None
        else:
            a, b = reps[(i, m)], reps[(j, m)]
            k = min(a.size, b.size)
            d = a[:k] - b[:k]
            p, test, used = bootstrap_p(d), "paired bootstrap", int(np.isfinite(d).sum())
        verdict = ("not distinguishable" if not p < SIGNIFICANCE else "beats" if sign * diff > 0 else "below")
        r.extra["vs_strongest_reference"] = {"metric": m, "reference": strongest.method, "diff": diff, "p": p,
                                             "test": test, "verdict": verdict,
                                             # the resamples the bootstrap p rests on (its floor is 2 / them)
                                             **({"resamples": used} if used is not None else {})}


def untrained_references(task, rows: list[ScoreRow]) -> list[str]:
    """The trained references (`heavy` in `BASELINES`: ItemKNN, EASE, ALS, Markov, SASRec, the DLRMs) the task
    offers when every reference row is a simple one (popularity, random, the item mean), else []: a model that
    "beats the strongest reference" of such a run beats popularity, which a reader must be told. A reference
    of any other name (trained, or imported) counts as present."""
    from recharness.baselines import BASELINES

    offered = [b for b in getattr(task, "baselines", ()) if b in BASELINES and BASELINES.meta(b).get("heavy")]
    simple = {b for b in BASELINES if not BASELINES.meta(b).get("heavy")}
    present = {r.method for r in rows if r.kind == "reference"}
    return offered if offered and present <= simple else []


def _breakdown_intervals(task, samples: list[dict], scored: list[tuple[ScoreRow, dict[str, dict]]], *,
                         resamples: int, seed: int) -> None:
    """95% intervals for the per-group tables (`row.extra["breakdown_ci"][group][metric]`): the task's
    units over the group's samples (`task.breakdown_members`), each checked against the group's value."""
    from recharness.metrics.bootstrap import MIN_UNITS, percentile_ci

    members = task.breakdown_members(samples)
    if not members:
        return
    for row, recs in scored:
        table = row.extra.get("breakdown") or {}
        out: dict[str, dict] = {}
        why: dict[str, dict] = {}  # a group's metric without an interval, and why (the charts say so)
        for label, idx in members.items():
            if label not in table or not idx:
                continue
            for m, u in checked_units(task, [samples[j] for j in idx], recs, table[label]).items():
                k = u.independent_support()
                if k < MIN_UNITS:
                    why.setdefault(label, {})[m] = f"n too small: {k} unit{'s' if k != 1 else ''}"
                    continue
                r = np.concatenate([u.replicates(w) for w in u.counts(resamples, seed)])
                ci = percentile_ci(r)
                if ci is not None:
                    out.setdefault(label, {})[m] = {"lo": ci[0], "hi": ci[1]}
        if out:
            row.extra["breakdown_ci"] = out
        if why:
            row.extra["breakdown_no_interval"] = why


#: why a column has no best mark although several rows have an interval
DIFFERENT_SUBSETS = "the rows' values rest on different samples (each row's own subset, e.g. its valid answers)"


def _subset(u) -> bytes | None:
    """The units a metric is over when that is a part of them (`Units.subset`); None for all, or unknown."""
    return u.subset() if u is not None else None


def _mark_best(rows: list[ScoreRow], reps: dict[tuple[int, str], np.ndarray], keys: dict[tuple[int, str], tuple],
               units: dict[tuple[int, str], object] | None = None, swap=None) -> None:
    """Per metric with a better side and two rows or more with an interval: p_vs_best and `top` on each
    row's interval. The p-value is the exact paired sign-flip test's (`p_test: "exact"`, all 2**k flips)
    when the rows' units are at most EXACT_MAX_UNITS independent ones (AUC's past EXACT_MAX_COSTLY_UNITS:
    random flips, "permutation"), as `compare` reports it; else the
    paired bootstrap's on the shared resamples. A row alone in its comparison (e.g. a `limit n/M` row,
    scored on samples no other row was) gets no mark: best of one is no finding."""
    from recharness.metrics.bootstrap import EXACT_MAX_UNITS, bootstrap_p, paired_permutation
    from recharness.metrics.registry import metric_info

    units = units or {}

    metrics = dict.fromkeys(m for r in rows for m in r.ci)
    for m in metrics:
        info = metric_info(m)
        if info is None or info.higher_is_better is None:
            continue
        have = [i for i, r in enumerate(rows) if m in r.ci]
        if len(have) < 2:
            for i in have:
                rows[i].ci[m].pop("top", None)
                rows[i].ci[m]["p_vs_best"] = None
            continue
        if len({_subset(units.get((i, m))) for i in have}) > 1:
            for i in have:  # e.g. RMSE over each row's own valid answers: a best of those compares unlike things
                rows[i].ci[m].pop("top", None)
                rows[i].ci[m].update(p_vs_best=None, not_compared=DIFFERENT_SUBSETS)
            continue
        sign = 1.0 if info.higher_is_better else -1.0
        best = max(have, key=lambda i: sign * rows[i].metrics[m])
        for i in have:
            c = rows[i].ci[m]
            if i == best:
                c.update(p_vs_best=None, top=True)
                continue
            a, b = reps[(i, m)], reps[(best, m)]
            ua, ub = units.get((i, m)), units.get((best, m))
            if keys[(i, m)] == keys[(best, m)] and ua is not None and ub is not None and \
                    ua.independent <= EXACT_MAX_UNITS:  # few units: the exact test decides, as in `compare`
                got = paired_permutation(ua, ub)  # exact, but for AUC past what its permutations allow
                p = got["p"]
                c.update(p_vs_best=p, p_test="exact" if got["exact"] else "permutation", top=bool(p >= SIGNIFICANCE) or
                         rows[i].metrics[m] == rows[best].metrics[m])
            elif keys[(i, m)] == keys[(best, m)] and ua is None and ub is None and swap is not None:
                p, how = swap(i, best, m)  # few samples without units: the paired swap test by re-scoring
                c.update(p_vs_best=p, p_test=how, top=bool(not p < SIGNIFICANCE) or rows[i].metrics[m] == rows[best].metrics[m])
            elif keys[(i, m)] == keys[(best, m)]:
                k = min(a.size, b.size)  # the generic path may have done fewer: a common prefix is paired
                p = bootstrap_p(a[:k] - b[:k])
                c.update(p_vs_best=p, p_test="bootstrap",
                         top=bool(p >= SIGNIFICANCE) or rows[i].metrics[m] == rows[best].metrics[m])
            else:  # not resampled alike: fall back to overlapping intervals
                bc = rows[best].ci[m]
                c.update(p_vs_best=None, top=bool(c["hi"] >= bc["lo"] and c["lo"] <= bc["hi"]), overlap=True)
