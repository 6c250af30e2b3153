"""Asking one sample under several candidate orders (order sensitivity, LLMRank: Hou et al., ECIR 2024), shared
by the suites whose prompts list candidates: the seeded orders with the target's position balanced, the
order spread and position bias they show, and the Borda aggregate of the rankings a method gave under them.

The order spread is per unit (a user, a PerRecBench group): the population std (ddof=0) of the unit's K metric
values, one per order, then the mean over units. Not the std of the K per-order means over all units: as the
target's first position is random per unit, every order's mean averages over the same mix of positions, so
that std is sampling noise shrinking with the number of units (0.003 at 500 users for a model that answers in
the shown order, whose per-user spread is 0.23)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from recharness.core.errors import ConfigError
from recharness.metrics.registry import metric as declare_metric

# what `order_metrics` adds to a task's scores (hidden: the report draws position bias from them)
declare_metric("orders", None, "candidate orders each user was asked under", ci=False, hidden=True)
declare_metric("target at {p}: HR@1", None,
               "HR@1 over samples whose target stood at this candidate position (position bias), over the units "
               "the order spread is over", hidden=True)
declare_metric("target at {p}: samples", None,
               "samples HR@1 at this candidate position rests on (the complete units' samples whose target stood "
               "there)", ci=False, hidden=True)
declare_metric("target at {p}: chance", None,
               "HR@1 at this candidate position without any position bias: the mean over its samples of 1/(candidates "
               "shown), which falls with the position where later positions exist only in larger groups", ci=False,
               hidden=True)
declare_metric("order units left out", None, "users (PerRecBench: groups) left out of the order spread and HR@1 by "
               "position: not all K orders answered (a run cut mid-user), or an answer the headline drops "
               "(PerRecBench invalid=drop, compat); shown only when there are some", ci=False)


def candidate_orders(cand: list[str], target: str, k: int, rng) -> list[list[str]]:
    """`k` orders of the same candidates, the target's position balanced: order j puts it at
    (p₀ + j·n/k) mod n, p₀ its place in `cand` (already a seeded random order, kept as order 0);
    the other candidates are shuffled afresh (seeded) around it in every later order. More orders than
    candidates are refused: positions would repeat unevenly, and with 2 candidates the same prompt twice."""
    n = len(cand)
    if k > n:
        raise ConfigError(f"--option orders={k}: a sample shows {n} candidates, so at most {n} orders put its target "
                          f"at distinct positions (more repeat positions unevenly, and prompts): use orders={n} or "
                          "fewer")
    p0 = cand.index(target)
    out = [list(cand)]
    others = [c for c in cand if c != target]
    for j in range(1, k):
        pos = (p0 + (j * n) // k) % n
        rest = [others[i] for i in rng.permutation(len(others))]
        out.append(rest[:pos] + [target] + rest[pos:])
    return out


def borda(rankings: list[list[str]], candidates: list[str], *, unnamed: bool = True) -> list[str]:
    """One ranking from several, as LLMRank aggregates its bootstrapped rankings (`llmrank/model/rank.py`):
    each ranking gives n - p points to the candidate at its place p (p from 0: its first place as written, an entry
    naming no candidate or one named before holding its place, as the task's metrics read it) and -10000 to a
    candidate it leaves out, and the points are summed. So a candidate left out by fewer rankings always comes first, then the
    higher sum over the rankings that named it; ties by candidate order. With `unnamed=False` a candidate no
    ranking names is left out of the result (a partial answer, as each of them was), not placed by the
    candidate order. An empty list of rankings gives []."""
    if not rankings:
        return []
    n = len(candidates)
    points = dict.fromkeys(candidates, 0.0)
    missed = dict.fromkeys(candidates, 0)  # LLMRank's -10000 each: it outweighs any sum of places
    for ranking in rankings:
        first: dict[str, int] = {}
        for p, c in enumerate(ranking):
            if c in points and c not in first:
                first[c] = p
        for c, p in first.items():
            points[c] += n - p
        for c in set(candidates) - set(first):
            missed[c] += 1
    place = {c: i for i, c in enumerate(candidates)}
    named_once = {c for ranking in rankings for c in ranking if c is not None}
    return sorted((c for c in candidates if unnamed or c in named_once),
                  key=lambda c: (missed[c], -points[c], place[c]))


def order_clusters(samples: list[dict]):
    """With several orders the samples of one user / group (`order_of`) are one unit of resampling: their
    labels; None without orders."""
    if any("order_of" in s for s in samples):
        return np.asarray([s.get("order_of", s["id"]) for s in samples])
    return None


def complete_units(samples: list[dict], usable: Sequence[bool] | None = None) -> tuple[dict[str, list[int]], int, int]:
    """({unit: its samples' indices, order 0 first} for the units (`order_of`) with all their orders among
    `samples` and `usable` (answered, and counted by the task's headline), K, how many units are left out). K is
    the most orders any sample shows (1 + its `order`), and a unit's own count unless it says it has fewer
    (`unit_orders`: a PerRecBench group of fewer users than K): a unit missing one of its orders is left out."""
    usable = [True] * len(samples) if usable is None else list(usable)
    by: dict[str, dict[int, int]] = {}
    own: dict[str, int] = {}
    for i, s in enumerate(samples):
        by.setdefault(s["order_of"], {})[int(s["order"])] = i
        if s.get("unit_orders") is not None:
            own[s["order_of"]] = int(s["unit_orders"])
    k = 1 + max((int(s["order"]) for s in samples), default=-1)
    done = {u: [ix[j] for j in range(own.get(u, k))] for u, ix in by.items()
            if sorted(ix) == list(range(own.get(u, k))) and all(usable[i] for i in ix.values())}
    return done, k, len(by) - len(done)


def order_metrics(samples: list[dict], values: Sequence[float], hits: Sequence[float], metric: str,
                  usable: Sequence[bool] | None = None) -> dict[str, float]:
    """Order sensitivity of one row, over the units whose K orders all count (`complete_units`): `<metric> order
    spread`, the mean over units of the population std (ddof=0) of a unit's K `values` (one per sample: 0 when
    every unit scores the same under all its orders), and HR@1 by the target's shown position (`hits`: each
    sample's top-1 hit, position bias), on the same units so no order or position rests on other users; the
    units left out are counted (`order units left out`, only when some are). No complete unit: no spread."""
    units, k, left = complete_units(samples, usable)
    out = {"orders": float(k)}
    if left:
        out["order units left out"] = float(left)
    if not units:
        return out
    out[f"{metric} order spread"] = float(np.mean([np.std([float(values[i]) for i in ix]) for ix in units.values()]))
    by_pos: dict[int, list[float]] = {}
    chance: dict[int, list[float]] = {}
    for ix in units.values():
        for i in ix:
            by_pos.setdefault(samples[i]["target_position"], []).append(float(hits[i]))
            n = shown_count(samples[i])
            chance.setdefault(samples[i]["target_position"], []).append(1.0 / n if n else float("nan"))
    out.update({f"target at {p}: HR@1": float(np.mean(v)) for p, v in sorted(by_pos.items())})
    out.update({f"target at {p}: samples": float(len(v)) for p, v in sorted(by_pos.items())})
    out.update({f"target at {p}: chance": float(np.mean(v)) for p, v in sorted(chance.items())
                if np.all(np.isfinite(v))})
    return out


def shown_count(sample: dict) -> int:
    """How many candidates a sample shows (LLMRec direct: its items; PerRecBench: its group's users), 0 unknown."""
    return len(sample.get("candidates") or sample.get("users") or [])


def spread_units(samples: list[dict], values: Sequence[float], usable: Sequence[bool] | None = None, *,
                 strata=None, clusters=None, unit: str = "users"):
    """The order spread as units for an interval: each sample of a complete unit carries its unit's std (the
    others weigh 0), a unit's K samples resampled together (`order_clusters`), so the point value is
    `order_metrics`'s mean over units; None without a complete unit."""
    from recharness.metrics.bootstrap import RatioUnits

    units, _, _ = complete_units(samples, usable)
    if not units:
        return None
    num, den = np.zeros(len(samples)), np.zeros(len(samples))
    for ix in units.values():  # each unit weighs one, however many orders it has (`unit_orders`)
        num[ix] = np.std([float(values[i]) for i in ix]) / len(ix)
        den[ix] = 1.0 / len(ix)
    return RatioUnits([s["id"] for s in samples], num, den, strata=strata,
                      clusters=order_clusters(samples) if clusters is None else clusters,
                      how=f"mean over {unit} of the std across their orders ({unit} resampled whole)")


def aggregated(samples: list[dict], recs: dict[str, dict]) -> bool:
    """Whether `recs` are a `borda_method` row's: one answer per unit, so no order spread or position bias."""
    return any((recs.get(s["id"]) or {}).get("aggregated") for s in samples)


def borda_method(samples: list[dict], recs: dict[str, dict], *, ranking: Callable[[dict, dict], list | None],
                 candidates: Callable[[list[dict]], list], answer: Callable[[dict, list], dict],
                 error: str, unnamed: bool = True) -> dict[str, dict[str, dict]]:
    """The row `--orders K` adds to a method (`Task.derived_methods`): the K rankings of one user / group, all K
    answered, aggregated by `borda` into one answer each of its samples carries. An order whose answer is invalid
    adds nothing (as in LLMRank's bootstrapping, where it scores every candidate alike), so the aggregate rests on
    the valid ones; each answer says how many (`how`: "borda over 2 of 3 orders"). `ranking(sample, rec)`: the
    answer's ranking in the group's terms (None: no valid answer); `candidates(samples)`: what they rank, ties
    in its order; `answer(sample, aggregate)`: the parsed answer in that sample's terms. No valid ranking: an
    invalid answer saying `error`. `unnamed`: as `borda`'s (False where answers may be partial). Every answer is
    marked `aggregated` (read by `aggregated`): the task's score then gives the row no order spread (0 by
    construction). A unit not all answered gets none: the row covers the complete units, which a `run --limit`
    rounded up to whole units (`runner.pipeline.run`) makes the parent row's samples too (the same coverage mark)."""
    groups: dict[str, list[dict]] = {}
    for s in samples:
        if "order_of" in s:
            groups.setdefault(s["order_of"], []).append(s)
    if not groups:
        return {}
    out: dict[str, dict] = {}
    for ss in groups.values():
        if not all(s["id"] in recs for s in ss):
            continue
        ranked = [r for r in (ranking(s, recs[s["id"]]) for s in ss) if r is not None]
        aggregate = borda(ranked, candidates(ss), unnamed=unnamed)
        how = f"borda over {len(ranked)} of {len(ss)} orders"  # an invalid answer's order adds nothing
        for s in ss:
            out[s["id"]] = ({"id": s["id"], "parsed": {**answer(s, aggregate), "how": how}, "valid": True}
                            if ranked else {"id": s["id"], "parsed": None, "valid": False, "error": error})
            out[s["id"]]["aggregated"] = "borda"
    return {f"(Borda over {max(len(ss) for ss in groups.values())} orders)": out}
