"""Asking one sample under several candidate orders (order sensitivity, LLMRank: Hou et al., ECIR 2024), shared
by the suites whose prompts list candidates: the seeded orders with the target's position balanced, and the
Borda aggregate of the rankings a method gave under them."""

from __future__ import annotations

import numpy as np


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


def borda(rankings: list[list[str]], candidates: list[str]) -> list[str]:
    """One ranking from several (LLMRank's bootstrapped ranking): each ranking gives n - p points to its
    p-th candidate (p from 0); candidates a ranking leaves out share its remaining points equally; ties
    by candidate order. An empty list of rankings gives []."""
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
    return sorted(candidates, key=lambda c: (-points[c], place[c]))


def order_clusters(samples: list[dict]):
    """With several orders the samples of one user / group (`order_of`) are one unit of resampling: their
    labels; None without orders."""
    if any("order_of" in s for s in samples):
        return np.asarray([s.get("order_of", s["id"]) for s in samples])
    return None
