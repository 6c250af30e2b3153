"""User-profile queries (RecBench+ Sec. 2.3): common interests and demographics.

Interest: a *common interest set* is a set of items that many users interact
with consecutively (Eq. 8): here every window of `length` consecutive items
of a user's chronological history, taken as a set; its support is the number
of users with that window, kept if >= theta. Its *preceding sequences*
(Eq. 9) are the items right before the window in those users' histories,
counted per distinct sequence.

Demographics: users grouped by age, gender and occupation and their
combinations; in each group items are ranked by TF-IDF, TF being the share
of the group's users who interacted with the item and IDF the log of all
users over the item's users, so items every group watches do not dominate
every group's list. On ML-1M this reproduces the official file's scores
within a few per cent (the official counts come from a slightly smaller
interaction set) -- measured in benchmarks/bench_recbench_plus.py.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np
import polars as pl

# ---------------------------------------------------------------- interests


@dataclass
class InterestSet:
    items: tuple[str, ...]  # the common interest set, in first-seen order
    support: int  # users with these items consecutively
    previous: list[tuple[tuple[str, ...], int]]  # preceding sequences with counts, most frequent first
    occurrences: list[tuple[str, int]] = field(default_factory=list)  # (user, start position)
    quintile: int = 0  # 1 (least shared) .. 5 (most shared) among all sets found


def common_interest_sets(histories: dict[str, list[str]], *, length: int = 3, theta: int = 5,
                         prev_len: int = 3, top_previous: int = 5) -> list[InterestSet]:
    """All windows of `length` consecutive items shared (as sets) by >= theta users, most shared first."""
    if length < 2:
        raise ValueError("interest sets need length >= 2")
    if theta < 2:
        raise ValueError("theta (support) must be >= 2 users")
    vocab: dict[str, int] = {}
    users = sorted(histories)
    seqs = []
    for u in users:
        seqs.append(np.fromiter((vocab.setdefault(i, len(vocab)) for i in histories[u]), dtype=np.int64,
                                count=len(histories[u])))
    rows, owners, starts = [], [], []
    for k, s in enumerate(seqs):
        if s.size < length:
            continue
        w = np.lib.stride_tricks.sliding_window_view(s, length)
        rows.append(np.sort(w, axis=1))
        owners.append(np.full(w.shape[0], k, dtype=np.int64))
        starts.append(np.arange(w.shape[0], dtype=np.int64))
    if not rows:
        return []
    allw = np.concatenate(rows)
    own = np.concatenate(owners)
    st = np.concatenate(starts)
    # a window repeating an item (a repeat purchase) is not a set of `length` items
    whole = (np.diff(allw, axis=1) != 0).all(axis=1) if length > 1 else np.ones(allw.shape[0], dtype=bool)
    allw, own, st = allw[whole], own[whole], st[whole]
    if allw.shape[0] == 0:
        return []
    base = max(len(vocab), 2)
    if length * np.log2(base) < 62:  # one int64 per window: much faster than unique rows
        code = np.zeros(allw.shape[0], dtype=np.int64)
        for c in range(length):
            code = code * base + allw[:, c]
        _, inverse, counts = np.unique(code, return_inverse=True, return_counts=True)
    else:
        _, inverse, counts = np.unique(allw, axis=0, return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    # support: the users with the set, not its windows (one user's repeats count once)
    pairs = np.unique(np.stack([inverse, own], axis=1), axis=0)
    counts = np.bincount(pairs[:, 0], minlength=counts.size)
    kept = np.flatnonzero(counts >= theta)
    if kept.size == 0:
        return []
    qmap = dict(zip(kept.tolist(), quintiles(counts[kept].tolist())))
    inv_vocab = np.empty(len(vocab), dtype=object)
    for i, n in vocab.items():
        inv_vocab[n] = i
    sel = np.isin(inverse, kept)
    occ: dict[int, list[tuple[int, int]]] = {}
    for key, o, s0 in zip(inverse[sel].tolist(), own[sel].tolist(), st[sel].tolist()):
        occ.setdefault(key, []).append((o, s0))
    out = []
    for key in kept.tolist():
        occs = sorted(occ[key])
        prev = Counter()
        for o, s0 in occs:
            p = seqs[o][max(0, s0 - prev_len) : s0]
            if p.size:
                prev[tuple(inv_vocab[p].tolist())] += 1
        o0, s0 = occs[0]
        first_seen = tuple(inv_vocab[seqs[o0][s0 : s0 + length]].tolist())
        out.append(InterestSet(
            items=first_seen,
            support=int(counts[key]),
            previous=sorted(prev.items(), key=lambda kv: (-kv[1], kv[0]))[:top_previous],
            occurrences=[(users[o], s) for o, s in occs],
            quintile=qmap[key],
        ))
    out.sort(key=lambda x: (-x.support, x.items))
    return out


def quintiles(values: list[int]) -> list[int]:
    """1 (least) .. 5 (most) by value, equal values in one quintile: 1 + 5 x (the share of values below it),
    so two sets of the same support are never told apart (a quintile may then hold more than a fifth)."""
    v = np.asarray(values)
    if v.size == 0:
        return []
    below = np.searchsorted(np.sort(v), v, side="left")
    return (1 + below * 5 // v.size).tolist()


# ---------------------------------------------------------------- demographics

AGE_LABELS = {1: "Under 18", 18: "18-24", 25: "25-34", 35: "35-44", 45: "45-49", 50: "50-55", 56: "56+"}
GENDER_LABELS = {"M": "Male", "F": "Female"}
ATTRS = ("age", "gender", "occupation")
GROUP_TYPES = tuple("_".join(c) for n in (1, 2, 3) for c in combinations(ATTRS, n))


@dataclass
class DemographicGroup:
    group_type: str  # "age", "age_gender", ...
    attrs: dict[str, str]  # {"age": "25-34", "gender": "Male"}
    size: int
    top: list[tuple[str, float, int]]  # (item_id, tf-idf, users in the group who interacted)

    @property
    def group(self):
        """The official file's `group` field: a string for one attribute, else a list."""
        vals = [self.attrs[a] for a in self.group_type.split("_")]
        return vals[0] if len(vals) == 1 else vals


def user_attributes(users: pl.DataFrame) -> pl.DataFrame:
    """user_id, age, gender, occupation as the labels the official file uses."""
    missing = [c for c in ("age", "gender") if c not in users.columns]
    occ_col = "occupation_name" if "occupation_name" in users.columns else "occupation"
    if missing or occ_col not in users.columns:
        raise ValueError(f"demographics-based queries need users with age, gender and occupation; missing {missing or [occ_col]}")
    return users.select(
        pl.col("user_id"),
        pl.col("age").replace_strict(AGE_LABELS, default=pl.col("age").cast(pl.Utf8), return_dtype=pl.Utf8).alias("age"),
        pl.col("gender").replace_strict(GENDER_LABELS, default=pl.col("gender"), return_dtype=pl.Utf8).alias("gender"),
        pl.col(occ_col).cast(pl.Utf8).alias("occupation"),
    ).drop_nulls()


def demographic_groups(interactions: pl.DataFrame, users: pl.DataFrame, *, max_groups: int = 10,
                       min_users: int = 20, top: int = 10,
                       group_types: tuple[str, ...] = GROUP_TYPES) -> list[DemographicGroup]:
    """For each group type the `max_groups` largest groups (>= min_users users) with their TF-IDF top items.

    Users count once per item however often they interacted with it; users
    without demographics are left out of groups and of the IDF.
    """
    ua = user_attributes(users).with_row_index("u")
    items = interactions.select("item_id").unique(maintain_order=True).with_row_index("i")
    x = (interactions.select("user_id", "item_id").join(ua.select("user_id", "u"), on="user_id", how="inner")
         .join(items, on="item_id", how="inner"))
    n_items = items.height
    code = np.unique(x["u"].to_numpy().astype(np.int64) * n_items + x["i"].to_numpy().astype(np.int64))
    u_of, i_of = code // n_items, code % n_items
    item_ids = np.asarray(items["item_id"].to_list(), dtype=object)
    active = np.zeros(ua.height, dtype=bool)
    active[u_of] = True
    n_users = int(active.sum())
    df = np.bincount(i_of, minlength=n_items)
    idf = np.log(np.where(df > 0, n_users / np.maximum(df, 1), 1.0))
    labels = {a: ua[a].to_list() for a in ATTRS}
    out: list[DemographicGroup] = []
    for gt in group_types:
        attrs = gt.split("_")
        keys = list(zip(*(labels[a] for a in attrs)))
        members: dict[tuple, list[int]] = {}
        for u, k in enumerate(keys):
            if active[u]:
                members.setdefault(k, []).append(u)
        chosen = sorted((k for k, m in members.items() if len(m) >= min_users), key=lambda k: (-len(members[k]), k))
        for k in chosen[:max_groups]:
            in_group = np.zeros(ua.height, dtype=bool)
            in_group[members[k]] = True
            size = len(members[k])
            n = np.bincount(i_of[in_group[u_of]], minlength=n_items)
            score = n / size * idf
            cand = np.flatnonzero(n > 0)
            best = sorted(cand.tolist(), key=lambda i: (-score[i], item_ids[i]))[:top]
            out.append(DemographicGroup(
                group_type=gt,
                attrs=dict(zip(attrs, k)),
                size=size,
                top=[(str(item_ids[i]), float(score[i]), int(n[i])) for i in best],
            ))
    return out


def group_summary(g: DemographicGroup, title_of, one_plural: str = "Movies") -> str:
    """The official file's `summary` text (also the input of the Appendix H demographics prompt)."""
    names = {"age": "Age", "gender": "Gender", "occupation": "Occupation"}
    desc = ", ".join(f"('{names[a]}', '{v}')" for a, v in g.attrs.items())
    lines = [f"User Group: [{desc}]", f"Total users in this group: {g.size}", "", f"Top {len(g.top)} {one_plural} for this group:"]
    for item, score, n in g.top:
        lines.append(f"{title_of(item)} - TF-IDF: {score:.4f}, Viewed by {n} users ({100 * n / g.size:.2f}%)")
    return "\n".join(lines)
