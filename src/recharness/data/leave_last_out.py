"""Leave-last-out split: each user's last interaction is the held-out target.

Interactions are stored sorted by (user, timestamp, file order), so the last
row per user is the most recent one; ties in time keep file order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl


@dataclass
class UserSplit:
    user_id: str
    history: list[str]  # item ids, oldest first
    ratings: list[float | None]
    target: str
    target_rating: float | None


def select_users(grouped: pl.DataFrame, *, users=None, limit: int | None = None, seed: int = 0) -> pl.DataFrame:
    """One row per user, sorted by user: only `users` when given, then a seeded sample of `limit` of them
    (kept in user order), so every split samples its users the same way."""
    if users is not None:
        grouped = grouped.filter(pl.col("user_id").is_in(list(users)))
    if limit is not None and limit < grouped.height:
        rng = np.random.default_rng(seed)
        grouped = grouped[np.sort(rng.choice(grouped.height, size=limit, replace=False))]
    return grouped


def leave_last_out(
    interactions: pl.DataFrame,
    *,
    min_history: int = 5,
    limit: int | None = None,
    seed: int = 0,
    users: tuple[str, ...] | list[str] | None = None,
) -> list[UserSplit]:
    """Users with at least `min_history` earlier items (only `users` when given); a seeded sample of `limit` of them."""
    grouped = (
        interactions.select("user_id", "item_id", "rating")
        .group_by("user_id", maintain_order=True)
        .agg(pl.col("item_id"), pl.col("rating"))
        .filter(pl.col("item_id").list.len() > min_history)
        .sort("user_id")
    )
    grouped = select_users(grouped, users=users, limit=limit, seed=seed)
    out = []
    for uid, items, ratings in grouped.iter_rows():
        out.append(UserSplit(uid, items[:-1], ratings[:-1], items[-1], ratings[-1]))
    return out


def item_popularity(interactions: pl.DataFrame, exclude_last: bool = True) -> pl.DataFrame:
    """Interaction counts per item, from the training part only (no target leakage)."""
    df = interactions.select("user_id", "item_id")
    if exclude_last:
        df = df.with_columns(pl.int_range(pl.len()).over("user_id").alias("_pos"), pl.len().over("user_id").alias("_n"))
        df = df.filter(pl.col("_pos") < pl.col("_n") - 1)
    return df.group_by("item_id").len("count").sort(["count", "item_id"], descending=[True, False])
