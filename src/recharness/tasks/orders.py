"""Asking one sample under several candidate orders (order sensitivity, LLMRank: Hou et al., ECIR 2024), shared
by the suites whose prompts list candidates: the seeded orders with the target's position balanced, the
order spread and position bias they show, and the Borda aggregate of the rankings a method gave under them."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from recharness.metrics.registry import metric as declare_metric

# what `order_metrics` adds to a task's scores (hidden: the report draws position bias from them)
declare_metric("orders", None, "candidate orders each user was asked under", ci=False, hidden=True)
declare_metric("target at {p}: HR@1", None,
               "HR@1 over samples whose target stood at this candidate position (position bias)", hidden=True)


def candidate_orders(cand: list[str], target: str, k: int, rng) -> list[list[str]]:
    """`k` orders of the same candidates, the target's position balanced: order j puts it at
    (p₀ + j·n/k) mod n, p₀ its place in `cand` (already a seeded random order, kept as order 0);
    the other candidates are shuffled afresh (seeded) around it in every later order."""
    n = len(cand)
    p0 = cand.index(target)
    out = [list(cand)]
    others = [c for c in cand if c != target]
    for j in range(1, k):
        pos = (p0 + (j * n) // k) % n
        rest = [others[i] for i in rng.permutation(len(others))]
        out.append(rest[:pos] + [target] + rest[pos:])
    return out


def borda(rankings: list[list[str]], candidates: list[str], *, unnamed: bool = True) -> list[str]:
    """One ranking from several (LLMRank's bootstrapped ranking): each ranking gives n - p points to its
    p-th candidate (p from 0); candidates a ranking leaves out share its remaining points equally; ties
    by candidate order. With `unnamed=False` a candidate no ranking names is left out of the result (a
    partial answer, as each of them was), not placed by the candidate order. An empty list of rankings
    gives []."""
    if not rankings:
        return []
    n = len(candidates)
    points = dict.fromkeys(candidates, 0.0)
    for ranking in rankings:
        named = [c for c in dict.fromkeys(ranking) if c in points]
        for p, c in enumerate(named):
            points[c] += n - p
        left = [c for c in candidates if c not in set(named)]
        if left:
            share = sum(n - p for p in range(len(named), n)) / len(left)
            for c in left:
                points[c] += share
    place = {c: i for i, c in enumerate(candidates)}
    named_once = {c for ranking in rankings for c in ranking}
    return sorted((c for c in candidates if unnamed or c in named_once), key=lambda c: (-points[c], place[c]))


def order_clusters(samples: list[dict]):
    """With several orders the samples of one user / group (`order_of`) are one unit of resampling: their
    labels; None without orders."""
    if any("order_of" in s for s in samples):
        return np.asarray([s.get("order_of", s["id"]) for s in samples])
    return None


def order_metrics(samples: list[dict], values: Sequence[float], hits: Sequence[float], metric: str) -> dict[str, float]:
    """`metric`'s spread across orders (population std of the per-order means of `values`, one per sample) and
    HR@1 by the target's shown position (`hits`: each sample's top-1 hit, position bias), hidden in scores.json."""
    by_order: dict[int, list[float]] = {}
    by_pos: dict[int, list[float]] = {}
    for s, v, hit in zip(samples, values, hits):
        by_order.setdefault(s["order"], []).append(float(v))
        by_pos.setdefault(s["target_position"], []).append(float(hit))
    means = [float(np.mean(v)) for _, v in sorted(by_order.items())]
    out = {f"{metric} order spread": float(np.std(means)), "orders": float(len(means))}
    out.update({f"target at {p}: HR@1": float(np.mean(v)) for p, v in sorted(by_pos.items())})
    return out


def borda_method(samples: list[dict], recs: dict[str, dict], *, ranking: Callable[[dict, dict], list | None],
                 candidates: Callable[[list[dict]], list], answer: Callable[[dict, list], dict],
                 error: str, unnamed: bool = True) -> dict[str, dict[str, dict]]:
    """The row `--orders K` adds to a method (`Task.derived_methods`): the K rankings of one user / group, all K
    answered, aggregated by `borda` into one answer each of its samples carries. An order whose answer is invalid
    adds nothing (as in LLMRank's bootstrapping, where it scores every candidate alike), so the aggregate rests on
    the valid ones; each answer says how many (`how`: "borda over 2 of 3 orders"). `ranking(sample, rec)`: the
    answer's ranking in the group's terms (None: no valid answer); `candidates(samples)`: what they rank, ties
    in its order; `answer(sample, aggregate)`: the parsed answer in that sample's terms. No valid ranking: an
    invalid answer saying `error`. `unnamed`: as `borda`'s (False where answers may be partial)."""
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
            out[s["id"]] = ({"id": s["id"], "parsed": {**answer(s, aggregate), "how": how}, "valid": True} if ranked
                            else {"id": s["id"], "parsed": None, "valid": False, "error": error})
    return {f"(Borda over {max(len(ss) for ss in groups.values())} orders)": out}
