"""PerRecBench user groups: who rated one query item close in time, with distinct preferences.

Why groups: a user's rating mixes rating bias (some users rate everything 4),
item quality (good films get good ratings) and personal preference.  The
relative rating (rating minus the user's mean) removes the bias; comparing
users on the *same* item within a short window removes item quality; what is
left to rank is preference (arXiv 2501.13391, Sec. 2.1).

A group for query item q satisfies, for every member u:
  - u rated q inside one window [t0, t0 + window_s] (temporal co-purchase),
  - u has more than `gamma` ratings strictly before that rating (active user),
and for every pair u != v: |rel(u) - rel(v)| > `lam` (distinct preferences).
Group sizes 2 / 3 / 4 are the easy / medium / hard levels. By default
(`items="distinct"`) query items are distinct across all levels and the held-out
pool (used for few-shot prompts); with `items="shared"` every level is asked on
the same query items, its members a seeded subset of one group of the largest
level's size (the authors' released outputs), so a difference between levels is
group size alone, not other items. No test group's user is in the held-out pool.

The mean in the relative rating is, by default, over the user's ratings
*before* the query item (what the model is shown, so the label leaks nothing
from the future); `mean_over="all"` uses all of the user's ratings instead.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
import polars as pl

# The difficulty levels, in presentation order, and their group sizes: the one definition every
# perrecbench module (options, scoring, Table 1) reads.
LEVELS: dict[str, int] = {"easy": 2, "medium": 3, "hard": 4}
# items go first to the levels that are hardest to fill
_CLAIM_ORDER = ("hard", "medium", "easy")


@dataclass(frozen=True)
class GroupConfig:
    gamma: int = 20
    lam: float = 0.6
    window_days: float = 7.0
    n_groups: int = 200
    levels: tuple[str, ...] = tuple(LEVELS)
    heldout: int = 0  # groups per level kept apart for few-shot examples
    mean_over: str = "history"  # or "all"
    tries: int = 20  # window anchors tried per item
    seed: int = 0
    #: "distinct": each level on its own query items; "shared": every level on the same items (members drawn from
    #: one group of the largest level's size)
    items: str = "distinct"

    def __post_init__(self):
        bad = [lv for lv in self.levels if lv not in LEVELS]
        if bad:
            raise ValueError(f"unknown level(s) {bad}; levels are {list(LEVELS)}")
        if self.items not in ("distinct", "shared"):
            raise ValueError(f"items must be 'distinct' or 'shared', not {self.items!r}")
        if self.mean_over not in ("history", "all"):
            raise ValueError(f"mean_over must be 'history' or 'all', not {self.mean_over!r}")
        if self.gamma < 0 or self.lam < 0 or self.window_days < 0 or self.n_groups < 0 or self.heldout < 0:
            raise ValueError("gamma, lam, window_days, groups and heldout must be >= 0")


@dataclass
class Member:
    user_id: str
    rating: float
    timestamp: int
    relative_rating: float
    avg_rating: float
    history_len: int  # ratings strictly before the query rating


@dataclass
class Group:
    level: str
    item_id: str
    members: list[Member]  # in presentation order (seeded shuffle)
    split: str = "test"  # or "heldout"
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"level": self.level, "item_id": self.item_id, "split": self.split,
                "members": [asdict(m) for m in self.members]}


#: a relative rating is a difference of float means: a gap of exactly lam computes as 0.6000000000000001 > 0.6;
#: the paper's "more than lam" holds only beyond this rounding
GAP_EPS = 1e-9


def rated_with_prior(interactions: pl.DataFrame, mean_over: str = "history", tables: dict | None = None) -> pl.DataFrame:
    """Every rating with the rater's count and mean of *strictly earlier* ratings and its relative rating.

    Ratings at the same second as the query rating are not "before" it. `tables`: a dict the
    caller keeps for this one `interactions` table (the build's suite context), reused across calls.
    """
    key = ("rated", mean_over)
    if tables is not None and key in tables:
        return tables[key]
    res = _rated_with_prior(interactions, mean_over)
    if tables is not None:
        tables[key] = res
    return res


def _rated_with_prior(interactions: pl.DataFrame, mean_over: str) -> pl.DataFrame:
    df = (
        interactions.select("user_id", "item_id", "rating", "timestamp")
        .filter(pl.col("rating").is_not_null() & pl.col("timestamp").is_not_null())
        .sort(["user_id", "timestamp"], maintain_order=True)
        .with_columns(
            _pos=pl.int_range(pl.len()).over("user_id"),
            _csum=pl.col("rating").cum_sum().over("user_id"),
        )
        .with_columns(
            history_len=pl.col("_pos").min().over(["user_id", "timestamp"]),
            # cumulative sum before the first rating at this timestamp (ratings are > 0, so min works)
            _prior_sum=(pl.col("_csum") - pl.col("rating")).min().over(["user_id", "timestamp"]),
        )
    )
    if mean_over == "all":
        avg = pl.col("rating").mean().over("user_id")
    else:
        avg = pl.when(pl.col("history_len") > 0).then(pl.col("_prior_sum") / pl.col("history_len"))
    return df.with_columns(avg_rating=avg).with_columns(
        relative_rating=pl.col("rating") - pl.col("avg_rating")
    ).drop("_pos", "_csum", "_prior_sum")


def find_group(ts: np.ndarray, rr: np.ndarray, users: np.ndarray, n: int, lam: float, window: float,
                rng: np.random.Generator, tries: int) -> list[int] | None:
    """Indices of n raters inside one window with pairwise relative-rating gaps > lam, or None."""
    m = ts.size
    for a in rng.permutation(m)[:tries]:
        lo = int(np.searchsorted(ts, ts[a], "left"))
        hi = int(np.searchsorted(ts, ts[a] + window, "right"))
        if hi - lo < n:
            continue
        chosen: list[int] = []
        for c in lo + rng.permutation(hi - lo):
            if all(abs(rr[c] - rr[x]) > lam + GAP_EPS and users[c] != users[x] for x in chosen):
                chosen.append(int(c))
                if len(chosen) == n:
                    return chosen
    return None


@dataclass
class _Eligible:
    """Ratings by active users, sorted by (item, time), as arrays; item runs as [starts, ends)."""

    ts: np.ndarray
    rr: np.ndarray
    users: np.ndarray  # integer codes; user_ids maps them back
    user_ids: list
    ratings: np.ndarray
    avgs: np.ndarray
    hlen: np.ndarray
    item_ids: list
    starts: np.ndarray
    ends: np.ndarray


def eligible_rows(interactions: pl.DataFrame, mean_over: str, gamma: int, tables: dict | None = None) -> _Eligible:
    key = ("eligible", mean_over, gamma)
    if tables is not None and key in tables:
        return tables[key]
    rated = rated_with_prior(interactions, mean_over, tables)
    elig = (rated.filter(pl.col("history_len") > gamma).sort(["item_id", "timestamp", "user_id"])
            .with_columns(_u=pl.col("user_id").rank("dense").cast(pl.Int64) - 1,
                          _i=pl.col("item_id").rank("dense").cast(pl.Int64) - 1))
    items = elig["_i"].to_numpy()
    starts = np.flatnonzero(np.r_[True, items[1:] != items[:-1]]) if items.size else np.zeros(0, dtype=np.int64)
    ends = np.r_[starts[1:], items.size].astype(np.int64)
    users = elig["_u"].to_numpy()
    user_ids = [None] * (int(users.max()) + 1 if users.size else 0)
    for code, uid in elig.select("_u", "user_id").unique().iter_rows():
        user_ids[code] = uid
    e = _Eligible(ts=elig["timestamp"].to_numpy().astype(np.float64), rr=elig["relative_rating"].to_numpy(),
                  users=users, user_ids=user_ids, ratings=elig["rating"].to_numpy(), avgs=elig["avg_rating"].to_numpy(),
                  hlen=elig["history_len"].to_numpy(), item_ids=elig["item_id"].gather(starts).to_list(),
                  starts=starts, ends=ends)
    if tables is not None:
        tables[key] = e
    return e


def select_groups(interactions: pl.DataFrame, cfg: GroupConfig, tables: dict | None = None) -> dict[str, list[Group]]:
    """Test groups per level, plus held-out groups under key '<level>/heldout' when cfg.heldout > 0.

    `tables`: a dict kept by the caller for this `interactions` table (the build's suite
    context), so the per-rating tables are computed once however many configs select from it.
    """
    el = eligible_rows(interactions, cfg.mean_over, cfg.gamma, tables)
    used: set[str] = set()
    test_users: set[int] = set()  # the users of the test groups (codes), kept out of the held-out pool
    out: dict[str, list[Group]] = {}
    levels = [lv for lv in _CLAIM_ORDER if lv in cfg.levels]
    if cfg.items == "shared" and levels:
        # one group of the largest size per query item; each level asks a seeded subset of its members (a subset
        # of a group still meets the window and the pairwise gaps)
        n = max(LEVELS[lv] for lv in levels)
        for split, count in (("test", cfg.n_groups), ("heldout", cfg.heldout)):
            if split == "heldout" and not count:
                continue
            rng = np.random.default_rng([cfg.seed, n, 0 if split == "test" else 1, 1])
            claimed = _claim(el, cfg, n, count, split, rng, used, test_users)
            for lv in levels:
                k = LEVELS[lv]
                out[lv if split == "test" else f"{lv}/heldout"] = [
                    Group(level=lv, item_id=item, split=split,
                          members=[members[i] for i in sorted(rng.choice(len(members), k, replace=False).tolist())])
                    for item, members in claimed]
    else:
        wanted = [(lv, "test", cfg.n_groups) for lv in levels]
        wanted += [(lv, "heldout", cfg.heldout) for lv in levels if cfg.heldout]
        for lv, split, count in wanted:
            n = LEVELS[lv]
            rng = np.random.default_rng([cfg.seed, n, 0 if split == "test" else 1])
            out[lv if split == "test" else f"{lv}/heldout"] = [
                Group(level=lv, item_id=item, members=members, split=split)
                for item, members in _claim(el, cfg, n, count, split, rng, used, test_users)]
    # present levels in easy, medium, hard order
    order = [lv for lv in LEVELS if lv in cfg.levels]
    return {k: out[k] for k in [*order, *(f"{lv}/heldout" for lv in order)] if k in out}


def _claim(el: _Eligible, cfg: GroupConfig, n: int, count: int, split: str, rng: np.random.Generator,
           used: set[str], test_users: set[int]) -> list[tuple[str, list[Member]]]:
    """Up to `count` groups of `n` members, each on a query item not in `used` (added to it), in a seeded random
    order of items; a test group's users join `test_users`, which a held-out group never holds."""
    ts, rr, users, ratings, avgs, hlen = el.ts, el.rr, el.users, el.ratings, el.avgs, el.hlen
    starts, ends, item_ids = el.starts, el.ends, el.item_ids
    sizes = ends - starts
    window = cfg.window_days * 86400.0
    found: list[tuple[str, list[Member]]] = []
    if not count:
        return found
    for j in rng.permutation(len(item_ids)):
        if sizes[j] < n or item_ids[j] in used:
            continue
        s, e = starts[j], ends[j]
        # fewer than n distinct relative-rating "slots" can never work
        if rr[s:e].max() - rr[s:e].min() <= cfg.lam * (n - 1) + GAP_EPS:
            continue
        if split == "heldout" and test_users:
            # a few-shot example never shows a test user: its history could hold that user's test label
            sub = np.flatnonzero(~np.isin(users[s:e], np.fromiter(test_users, dtype=users.dtype)))
            idx = find_group(ts[s:e][sub], rr[s:e][sub], users[s:e][sub], n, cfg.lam, window, rng,
                             cfg.tries) if sub.size >= n else None
            idx = None if idx is None else [int(sub[i]) for i in idx]
        else:
            idx = find_group(ts[s:e], rr[s:e], users[s:e], n, cfg.lam, window, rng, cfg.tries)
        if idx is None:
            continue
        rows = [s + i for i in rng.permutation(idx)]
        if split == "test":
            test_users.update(int(users[r]) for r in rows)
        members = [
            Member(user_id=str(el.user_ids[users[r]]), rating=float(ratings[r]), timestamp=int(ts[r]),
                   relative_rating=float(rr[r]), avg_rating=float(avgs[r]), history_len=int(hlen[r]))
            for r in rows
        ]
        found.append((str(item_ids[j]), members))
        used.add(item_ids[j])
        if len(found) == count:
            break
    return found


def why_no_groups(interactions: pl.DataFrame, cfg: GroupConfig, tables: dict | None = None) -> str | None:
    """Which condition of `select_groups` left no test group at any level, with its numbers (None: groups exist
    or the cause is not one of them)."""
    if not cfg.levels:
        return "perrecbench: levels= names no level"
    if cfg.n_groups == 0:
        return "perrecbench: groups=0 asks for no group per level"
    rated = rated_with_prior(interactions, cfg.mean_over, tables)
    if rated.is_empty():
        return "perrecbench: the dataset has no rating with a timestamp (a group is raters of one item close in time)"
    el = eligible_rows(interactions, cfg.mean_over, cfg.gamma, tables)
    if el.ts.size == 0:
        return (f"perrecbench: gamma={cfg.gamma} keeps 0 of the {rated.height} ratings (a member needs more than gamma "
                f"ratings before it; the most here is {int(rated['history_len'].max())}): lower it with --option "
                "gamma=N")
    # items=shared draws every level from one group of the largest size
    n = (max if cfg.items == "shared" else min)(LEVELS[lv] for lv in cfg.levels)
    sizes = el.ends - el.starts
    big = int((sizes >= n).sum())
    if not big:
        return (f"perrecbench: no item has {n} raters with more than gamma={cfg.gamma} earlier ratings (the "
                f"{'largest' if cfg.items == 'shared' else 'smallest'} level, {'/'.join(cfg.levels)}, needs {n}; "
                f"{len(el.item_ids)} items have any, at most {int(sizes.max())}): lower --option gamma")
    return (f"perrecbench: none of the {big} items with {n} or more raters (gamma={cfg.gamma}) has {n} of them within "
            f"window_days={cfg.window_days:g} whose relative ratings differ by more than lambda={cfg.lam:g} "
            f"(tries={cfg.tries} windows per item): lower --option lambda, or raise --option window_days or tries")
