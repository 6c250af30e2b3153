"""Paired comparison of two methods on the samples both answered: bootstrap CI and permutation test."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from recharness.core.errors import ConfigError
from recharness.core.rundir import RunDir
from recharness.metrics.bootstrap import DEFAULT_RESAMPLES
from recharness.runner.intervals import (
    DIFFERENT_SUBSETS,
    GENERIC_BUDGET_S,
    FailedUnits,
    checked_units,
    resampled_score,
    swap_test,
)
from recharness.runner.pipeline import methods_by_task


def compare(out: Path, models: list[str] | None = None, task: str | None = None, *, seed: int = 0,
            resamples: int = DEFAULT_RESAMPLES, permutations: int = DEFAULT_RESAMPLES, ci_seed: int = 0,
            generic_budget_s: float = GENERIC_BUDGET_S) -> list[dict]:
    """Paired comparison of two methods on the samples both answered, per task and metric.

    `models`: two method names (predictions files, `train`'s reference files or on-the-fly
    references); default: every pair of the run's predictions files, or with only one, that one
    against each reference. Each result: the two values (the task's own scorer on the common
    samples, so invalid answers count as in the tables), the difference A - B with its paired
    bootstrap 95% CI and p-value, a permutation-test p-value, and how many samples only one
    method answered (left out).
    """
    from recharness.metrics.bootstrap import (
        EXACT_MAX_UNITS,
        MIN_UNITS,
        bootstrap_p,
        generic_replicates,
        is_number,
        paired_bootstrap,
        paired_permutation,
        percentile_ci,
    )
    from recharness.metrics.registry import wants_ci

    if models is not None and len(models) != 2:
        raise ConfigError(f"--models takes two method names, got {len(models)}")
    info = RunDir(out).build_info()
    if task is not None and task not in info["tasks"]:
        raise ConfigError(f"--task {task!r}: this run has {', '.join(info['tasks'])}")
    results: list[dict] = []
    absent: dict[str, list[str]] = {}
    for t, task_obj, samples, methods in methods_by_task(out, seed=seed, only=set(models) if models else None):
        if task is not None and t != task:
            continue
        by_name = {name: (kind, recs) for name, kind, recs, _ in methods}
        if models is not None:
            missing = [m for m in models if m not in by_name]
            if missing:  # a method of some tasks only (e.g. a reference of the condition tasks): skip this task
                absent[t] = missing
                continue
            pairs = [tuple(models)]
        else:
            mods = [n for n, (k, _) in by_name.items() if k == "model"]
            refs = [n for n, (k, _) in by_name.items() if k == "reference"]
            pairs = [(a, b) for i, a in enumerate(mods) for b in mods[i + 1:]] or [(m, r) for m in mods for r in refs]
        for a, b in pairs:
            ra, rb = by_name[a][1], by_name[b][1]
            own = [n for n, recs in ((a, ra), (b, rb)) if any(isinstance(r, dict) and r.get("as_given")
                                                               for r in recs.values())]
            if own:  # scored against its own targets (score --targets as-given): not the other's samples
                results.append({"task": t, "a": a, "b": b, "n": 0, "n_task": len(samples), "only_a": 0, "only_b": 0,
                                "metric": None, "note": f"{' and '.join(own)} imported with --targets as-given: "
                                "scored against its own targets, so not on the same samples as another method; "
                                "not compared"})
                continue
            common = [s for s in samples if s["id"] in ra and s["id"] in rb]
            base = {"task": t, "a": a, "b": b, "n": len(common), "n_task": len(samples),
                    "only_a": sum(s["id"] in ra and s["id"] not in rb for s in samples),
                    "only_b": sum(s["id"] in rb and s["id"] not in ra for s in samples)}
            if not common:
                results.append({**base, "metric": None, "note": "no sample answered by both"})
                continue
            ra = {s["id"]: ra[s["id"]] for s in common}  # scorers that read every record see only these
            rb = {s["id"]: rb[s["id"]] for s in common}
            ma, mb = task_obj.score(common, ra), task_obj.score(common, rb)
            ua, ub = checked_units(task_obj, common, ra, ma), checked_units(task_obj, common, rb, mb)  # values: the units'
            wanted = [m for m in ma if wants_ci(m) and is_number(ma[m]) and is_number(mb.get(m))]
            slow: list[dict] = []
            first_of_pair, pair_notes = len(results), []
            # a metric one side cannot have (computed from no data, e.g. AUC with no usable answer): said in the
            # pair's note, not dropped without a word
            for m in dict.fromkeys([*ma, *mb]):
                who = [x for x, mm in ((a, ma), (b, mb)) if not is_number(mm.get(m))]
                if wants_ci(m) and m not in wanted and len(who) < 2:
                    pair_notes.append(f"{m}: undefined for {who[0]} (nothing to compute it from, e.g. no usable "
                                      "answer): not compared")
            if pair_notes and not wanted:  # no metric row to carry the note
                results.append({**base, "metric": None, "note": "; ".join(pair_notes)})
                continue
            for m in wanted:
                row = {**base, "metric": m, "value_a": ma[m], "value_b": mb[m], "diff": ma[m] - mb[m]}
                results.append(row)
                if m in ua and m in ub:
                    perm = paired_permutation(ua[m], ub[m], permutations, ci_seed)
                    few = ua[m].independent <= EXACT_MAX_UNITS  # the exact test decides; a bootstrap p is no p here
                    # as in the tables: a bootstrap of fewer than MIN_UNITS independent units carrying the metric
                    # (either method's) claims more than they show, down to a zero-width interval from one unit
                    support = min(ua[m].independent_support(), ub[m].independent_support())
                    if support < MIN_UNITS:
                        row.update(lo=float("nan"), hi=float("nan"), p_boot=None, resamples=0,
                                   no_interval=f"n too small: {support} unit{'s' if support != 1 else ''}")
                    else:
                        boot = paired_bootstrap(ua[m], ub[m], resamples, ci_seed)
                        row.update(lo=boot["lo"], hi=boot["hi"], p_boot=None if few else boot["p"],
                                   resamples=boot["resamples"])
                    row.update(p_perm=perm["p"], permutations=perm["permutations"], exact=perm["exact"],
                               units=ua[m].independent, how=ua[m].how, generic=False)
                    notes = []
                    if ua[m].subset() != ub[m].subset():
                        notes.append(f"{m}: {DIFFERENT_SUBSETS}, so the test compares unlike things")
                    if support < MIN_UNITS:
                        notes.append(f"{m}: n too small for an interval ({support} unit{'s' if support != 1 else ''})")
                    if few:
                        notes.append(f"{ua[m].independent} independent units: exact sign-flip test over all "
                                     f"{perm['permutations']:,} flips; no bootstrap p-value" if perm["exact"] else
                                     f"{ua[m].independent} independent units: sign-flip test over "
                                     f"{perm['permutations']:,} random flips (all of them would cost too long for "
                                     f"{m}); no bootstrap p-value")
                    if notes:
                        row["note"] = "; ".join(notes)
                        pair_notes.extend(n for n in notes if n not in pair_notes)
                elif isinstance(ua, FailedUnits) or isinstance(ub, FailedUnits):
                    row["note"] = f"{m}: no interval: {(ua if isinstance(ua, FailedUnits) else ub).error}"
                elif not (ua or ub or getattr(ua, "offered", False) or getattr(ub, "offered", False)):
                    # the task has no units: re-score resampled / swapped samples (each sample a unit)
                    if len(common) < MIN_UNITS:
                        row.update(lo=float("nan"), hi=float("nan"), p_boot=None, resamples=0,
                                   no_interval=f"n too small: {len(common)} unit{'s' if len(common) != 1 else ''}")
                        row["note"] = f"{m}: n too small for an interval ({len(common)} samples)"
                    else:
                        slow.append(row)
                else:
                    row["note"] = f"{m}: no units for one of the two methods: no interval"
                if row.get("note") and row["note"] not in pair_notes and not row.get("units"):
                    pair_notes.append(row["note"])
            if slow:
                ms = [r["metric"] for r in slow]
                n, quarter = len(common), generic_budget_s / 4
                ga = generic_replicates(resampled_score(task_obj, common, ra), n, ms, resamples, ci_seed, budget_s=quarter)
                gb = generic_replicates(resampled_score(task_obj, common, rb), n, ms, resamples, ci_seed, budget_s=quarter)
                perm = swap_test(task_obj, common, ra, rb, ms, permutations, ci_seed, budget_s=2 * quarter)
                few = n <= EXACT_MAX_UNITS  # as with units: the swap test decides, a bootstrap p is no p here
                for r in slow:
                    m = r["metric"]
                    k = min(ga[m].size, gb[m].size)  # the same counts: a common prefix is paired
                    d = ga[m][:k] - gb[m][:k]
                    ci = percentile_ci(d)
                    r.update(lo=ci[0] if ci else float("nan"), hi=ci[1] if ci else float("nan"),
                             p_boot=None if few else bootstrap_p(d), resamples=int(np.isfinite(d).sum()),
                             how="re-scored resampled samples", generic=True, units=n, **perm[m])
                    if few:
                        note = (f"{n} samples, no per-unit contract: paired swap test by re-scoring over "
                                + (f"all {perm[m]['permutations']:,} swaps" if perm[m]["exact"]
                                   else f"{perm[m]['permutations']:,} random swaps") + "; no bootstrap p-value")
                        r["note"] = f"{r['note']}; {note}" if r.get("note") else note
                        if note not in pair_notes:
                            pair_notes.append(note)
            if pair_notes:  # the first row's note is the pair's (the table's note): every metric's says
                results[first_of_pair]["note"] = "; ".join(pair_notes)
    if not results and models is None:
        raise ConfigError(f"nothing to compare in {out}: that needs two predictions files, or one and a reference "
                          "(or name two methods with --models)")
    if absent and not results:
        from recharness.core.registry import did_you_mean
        from recharness.tasks.registry import get_task

        t, missing = next(iter(absent.items()))
        rd = RunDir(out)
        known = sorted({p.stem for p in rd.prediction_files() + rd.reference_files()}
                       | {b for x in info["tasks"] for b in get_task(info["suite"], x).baselines})
        hints = "".join(did_you_mean(m, known) for m in missing)
        raise ConfigError(f"no task of {out} has predictions of both {' and '.join(models or [])} "
                          f"({t}: none of {', '.join(missing)}){hints}; methods here: {', '.join(known)}")
    return results
