"""Global temporal split: one cut time for every user, beside leave-last-out (`leave_last_out`).

Leave-last-out holds out each user's own last item, so one user's test target can be older than
another user's training items: a model fitted on "everything but the last items" has seen the
future of most test targets (Sun 2023, "Take a fresh look at recommender systems from an
evaluation standpoint"). Here one cut time T splits the whole data set:

* T is the timestamp of the interaction at position ⌊q·n⌋ (0-based) of all n interactions sorted
  by time, q the cut quantile (`--option cut=0.9`): nothing is drawn at random, the seed only picks
  users, as in leave-last-out.
* "before the cut" means timestamp < T, strictly: the training part (what reference models learn
  from, for every user, sampled or not) and each user's history. Interactions stamped exactly T
  are after the cut, so a share of at most q of the interactions is training data.
* a user's test target is their first interaction at or after T; their later ones are not used
  (nor sampled as negatives: they are items the user had).
* users need at least `min_history` interactions before the cut (as leave-last-out: more than
  `min_history` interactions in all) and one at or after it.

Ties in time are ordered as the stored data is, and as leave-last-out reads it: by (user,
timestamp, the source file's order), so among a user's interactions with one timestamp the one
first in the file comes first. Ties are common: measured on ML-1M (timestamps in seconds, the 500
users a build with `-n 500 --seed 0` draws), 39.2% of leave-last-out targets share their timestamp
with the item before them (42.1% of all 6,040 users), so which of the two is "last" is the file's
order. Under the global cut (cut=0.9, T = 978133414) a target never shares it with the history's
last item (that one is < T ≤ target), but 27.0% share it with the user's next item (27.4% of all
1,175 users the split keeps), so which is "first after the cut" is the file's order.
See benchmarks/results/temporal_split.md.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from recharness.core.errors import ConfigError
from recharness.data.leave_last_out import UserSplit, select_users


def _timestamps(interactions: pl.DataFrame, where: str) -> pl.Series:
    if "timestamp" not in interactions.columns:
        raise ConfigError(f"{where}: the interactions have no timestamp column; use split=leave_last_out")
    ts = interactions["timestamp"]
    if not ts.dtype.is_numeric():
        raise ConfigError(f"{where}: the timestamps are {ts.dtype}, not numbers (seconds); use split=leave_last_out")
    nulls = ts.null_count()
    if nulls:
        raise ConfigError(f"{where}: {nulls} of {interactions.height} interactions have no timestamp; "
                          "use split=leave_last_out")
    return ts


def cut_time(interactions: pl.DataFrame, cut: float, meta: dict | None = None):
    """T: the timestamp at position ⌊cut·n⌋ of the n interactions sorted by time (0 < cut < 1). `meta`: the
    dataset's; one whose timestamps are positions in each user's sequence (`sequence_timestamps`: LLMRank's
    and RecBole's split files) has no time to cut at, and is refused."""
    where = f"--option split=global_time cut={cut}"
    if meta and meta.get("sequence_timestamps"):
        raise ConfigError(f"{where}: this dataset's timestamps are positions in each user's sequence "
                          f"({meta['sequence_timestamps']}), not times: one cut over them would mix users' "
                          "positions and move the official targets; use split=leave_last_out")
    if not 0 < cut < 1:
        raise ConfigError(f"--option cut={cut}: the cut is a quantile of the interactions' times, "
                          "strictly between 0 and 1")
    ts = _timestamps(interactions, where).sort()
    if ts.is_empty():
        raise ConfigError(f"{where}: no interactions to cut")
    return ts[min(int(np.floor(cut * ts.len())), ts.len() - 1)]  # a Python int (or float)


def in_time_order(interactions: pl.DataFrame) -> pl.DataFrame:
    """By user, then timestamp, then the stored (file) order: the order every split reads."""
    return (interactions.with_row_index("_pos").sort(["user_id", "timestamp", "_pos"], maintain_order=True)
            .drop("_pos"))


def training_part(interactions: pl.DataFrame, t) -> pl.DataFrame:
    """Every interaction strictly before the cut time `t`, in time order (what references learn from)."""
    return in_time_order(interactions.filter(pl.col("timestamp") < t))


def global_time(
    interactions: pl.DataFrame,
    *,
    cut: float = 0.9,
    min_history: int = 5,
    limit: int | None = None,
    seed: int = 0,
    users: tuple[str, ...] | list[str] | None = None,
    meta: dict | None = None,
) -> tuple[list[UserSplit], object]:
    """(the users' splits, the cut time T): users with at least `min_history` interactions before T
    and one at or after it (only `users` when given); a seeded sample of `limit` of them, drawn as
    leave-last-out draws (sorted by user id, `default_rng(seed).choice`). `meta`: as `cut_time`'s."""
    t = cut_time(interactions, cut, meta)
    df = in_time_order(interactions.select("user_id", "item_id", "rating", "timestamp"))
    before = pl.col("timestamp") < t
    grouped = (
        df.group_by("user_id", maintain_order=True)
        .agg(pl.col("item_id").filter(before).alias("history"),
             pl.col("rating").filter(before).alias("ratings"),
             pl.col("item_id").filter(~before).first().alias("target"),
             pl.col("rating").filter(~before).first().alias("target_rating"))
        .filter(pl.col("target").is_not_null() & (pl.col("history").list.len() >= min_history))
        .sort("user_id")
    )
    grouped = select_users(grouped, users=users, limit=limit, seed=seed)
    splits = [UserSplit(u, list(h), list(r), tg, tr)
              for u, h, r, tg, tr in grouped.select("user_id", "history", "ratings", "target",
                                                    "target_rating").iter_rows()]
    return splits, t


def why_empty(interactions: pl.DataFrame, cut: float, min_history: int) -> str | None:
    """Which condition left a global-time split without users, with its numbers."""
    t = cut_time(interactions, cut)
    per = (interactions.group_by("user_id")
           .agg((pl.col("timestamp") < t).sum().alias("before"), (pl.col("timestamp") >= t).sum().alias("after")))
    after = per.filter(pl.col("after") > 0)
    if after.is_empty():
        return f"split=global_time cut={cut}: no interaction at or after the cut time {t}; lower --option cut"
    if not (after["before"] >= min_history).any():
        return (f"split=global_time cut={cut}: none of the {after.height} users with an interaction after the cut "
                f"has min_history={min_history} before it (the most: {int(after['before'].max())}); lower "
                "--option min_history or raise --option cut")
    return None
