"""RecBench CTR pairs from a dataset's interactions, as the paper builds them (§4.3).

Labels. With ratings (MovieLens, Amazon): rating > 3 is a click, < 3 a non-click, and a rating of 3
is dropped, as the authors' code does; an unrated row is dropped too. Without ratings every
interaction is a click and each gets `neg_ratio` (2) sampled negatives: distinct items the user never
interacted with, seeded, stamped with their positive's timestamp. A (user, item) pair is labelled
once (its first interaction), so no pair can be both a training and a test pair. With real labels
(an interactions `label` column, e.g. MIND impressions; mode `labels`, chosen by auto) those are used
as they are, an impression's entries grouped as one impression; rows whose `impression_id` is null
(MIND's history clicks) are positives for the behaviour sequence only, never pairs.

Behaviour sequence. A pair's history is the user's last `history_len` (20) positives whose
timestamp is strictly earlier than the pair's, oldest first. Ties in time never leak: a click in the
same second as the candidate is not shown.

Split (per user, by time). A test user's last `per_user` (4) labelled pairs are their test pairs:
Table 2's 20,000 test pairs from 5,000 users, each user weighing the same, like the authors' code
holding out each test user's last positives. With sampled negatives the window is widened to whole
impressions (a positive with its negatives): 4 pairs become 2 positives and their 4 negatives.
That user's training pairs are the pairs strictly earlier in time than the first test pair; pairs
in its second but before it in order belong to neither. Users not drawn for testing give all their
pairs to training. So for every test pair, its history and every training pair of its user precede
it. It is not a global time cut: another user's training pair may be later (ML-1M's users are
active in different years, and a global cut leaves fewer test users).

Split `global_time` (`--option split=global_time --option cut=q`): one cut time T for every user, the time
of the interaction at quantile q of all interactions (`data.temporal_split.cut_time`). A test user's
window is their first `per_user` labelled pairs at or after T (widened to whole impressions, as
above); a user needs that many pairs at or after T and `min_history` positives before the first.
Training pairs are drawn from every user's pairs strictly before T, and no pair at or after T is
trained on, so no training pair is later than any test pair. Ties: the pairs' order is (user,
timestamp, the file's order), and a pair stamped exactly T is after the cut.

Training pairs are a
seeded sample of `train_pairs` (100,000) of those with at least `min_history` earlier positives; a
seeded `valid_fraction` of them is the validation slice.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from recharness.core.errors import ConfigError

#: the pair columns every stage reads (samples, train.parquet, valid.parquet)
PAIR_COLUMNS = ("user_id", "item_id", "label", "timestamp", "history")


@dataclass(frozen=True)
class CtrSplit:
    test: pl.DataFrame  # PAIR_COLUMNS, ordered by user, then time
    train: pl.DataFrame
    valid: pl.DataFrame
    eligible_users: int  # users who could have been drawn for testing
    #: how many users each eligibility filter kept, in order (what `CtrTask.why_empty` reports)
    funnel: dict = field(default_factory=dict)


def negatives_mode(interactions: pl.DataFrame, negatives: str) -> str:
    """`auto` means the real labels when the interactions carry a `label` column (MIND), else ratings when
    the dataset has any rating, else sampled negatives."""
    if negatives != "auto":
        return negatives
    if "label" in interactions.columns:
        return "labels"
    return "ratings" if interactions["rating"].null_count() < interactions.height else "sampled"


def labelled_events(interactions: pl.DataFrame, catalog: list[str], *, negatives: str = "auto",
                    neg_ratio: int = 2, seed: int = 0) -> tuple[pl.DataFrame, str]:
    """(user_id, item_id, label, timestamp, impression) in (user, time, file order), and the negatives
    mode used; `impression` numbers a pair, or a positive and its sampled negatives, together."""
    if interactions["timestamp"].null_count():
        raise ConfigError("recbench ctr splits by time, but this dataset has interactions without a timestamp")
    mode = negatives_mode(interactions, negatives)
    if mode == "labels":
        return real_label_events(interactions), mode
    if "label" in interactions.columns:  # sampled negatives on a labelled dataset: its clicks are the positives
        interactions = interactions.filter(pl.col("label") == 1)
    ev = interactions.select("user_id", "item_id", "rating", "timestamp").with_row_index("_row")
    if mode == "ratings":
        ev = ev.filter(pl.col("rating") != 3).with_columns((pl.col("rating") > 3).cast(pl.Int8).alias("label"))
    else:
        ev = ev.with_columns(pl.lit(1, pl.Int8).alias("label"))
    ev = (ev.sort("user_id", "timestamp", "_row").unique(["user_id", "item_id"], keep="first", maintain_order=True)
          .with_columns(pl.lit(0, pl.Int32).alias("_sub")).drop("rating"))
    if mode == "sampled":
        ev = pl.concat([ev, sample_negatives(ev, interactions, catalog, neg_ratio, seed)])
    ev = ev.sort("user_id", "timestamp", "_row", "_sub")
    return ev.select("user_id", "item_id", "label", "timestamp", pl.col("_row").alias("impression")), mode


def real_label_events(interactions: pl.DataFrame) -> pl.DataFrame:
    """labelled_events for a dataset with real labels, plus `pair` (False: a history-only positive)."""
    imp = pl.col("impression_id") if "impression_id" in interactions.columns else pl.lit(None, pl.Utf8)
    ev = (interactions.with_row_index("_row")
          .select("user_id", "item_id", pl.col("label").cast(pl.Int8), "timestamp", "_row", imp.alias("_imp"))
          .sort("user_id", "timestamp", "_row").unique(["user_id", "item_id"], keep="first", maintain_order=True))
    pair = pl.col("_imp").is_not_null() if "impression_id" in interactions.columns else pl.lit(True)
    group = pl.when(pl.col("_imp").is_null()).then(pl.col("_row")).otherwise(pl.col("_row").min().over("user_id", "_imp"))
    return ev.select("user_id", "item_id", "label", "timestamp", group.alias("impression"), pair.alias("pair"))


def sample_negatives(pos: pl.DataFrame, interactions: pl.DataFrame, catalog: list[str], ratio: int,
                     seed: int) -> pl.DataFrame:
    """`ratio` distinct never-interacted items per positive, drawn per user (seeded): by rejection, or
    from the user's unseen items themselves when they need more than half of them; a user who has
    seen almost everything gets fewer, taken from their earliest positives."""
    items = np.array(sorted(set(catalog) | set(interactions["item_id"].unique().to_list())), dtype=object)
    n_items = len(items)
    users = np.array(sorted(pos["user_id"].unique().to_list()), dtype=object)
    u_code = {u: k for k, u in enumerate(users)}
    i_code = {i: k for k, i in enumerate(items)}
    seen_u = np.fromiter((u_code.get(u, -1) for u in interactions["user_id"].to_list()), np.int64)
    seen_i = np.fromiter((i_code[i] for i in interactions["item_id"].to_list()), np.int64)
    seen = np.unique(seen_u[seen_u >= 0] * n_items + seen_i[seen_u >= 0])  # sorted
    p_user = np.fromiter((u_code[u] for u in pos["user_id"].to_list()), np.int64)  # pos is in (user, time) order
    n_pos = np.bincount(p_user, minlength=len(users))
    unseen = n_items - np.bincount(seen // n_items, minlength=len(users))
    need = np.minimum(ratio * n_pos, unseen)
    rng = np.random.default_rng(seed)
    exact = []
    for u in np.flatnonzero(2 * need > unseen):
        lo, hi = np.searchsorted(seen, [u * n_items, (u + 1) * n_items])
        free = np.setdiff1d(np.arange(n_items), seen[lo:hi] - u * n_items)
        exact.append(u * n_items + rng.permutation(free)[: need[u]])
    got = np.concatenate([np.zeros(0, np.int64), *exact])  # accepted keys (user * n_items + item)
    while True:
        short = need - np.bincount(got // n_items, minlength=len(users))
        if not (short > 0).any():
            break
        u = np.repeat(np.flatnonzero(short > 0), 2 * short[short > 0] + 4)
        keys = u * n_items + rng.integers(0, n_items, size=u.size)
        at = np.minimum(np.searchsorted(seen, keys), seen.size - 1)
        keys = keys[seen[at] != keys] if seen.size else keys
        allk = np.concatenate([got, keys])
        _, first = np.unique(allk, return_index=True)
        allk = allk[np.sort(first)]  # distinct, in draw order
        order = np.argsort(allk // n_items, kind="stable")
        rank = np.empty(allk.size, np.int64)
        rank[order] = np.arange(allk.size) - np.searchsorted(allk[order] // n_items, allk[order] // n_items)
        got = allk[rank < need[allk // n_items]]
    # the user's k-th negative goes to their (k // ratio)-th positive counted from the last
    order = np.argsort(got // n_items, kind="stable")
    got = got[order]
    g_user = got // n_items
    k = np.arange(got.size) - np.searchsorted(g_user, g_user)
    first_pos = np.searchsorted(p_user, np.arange(len(users)))
    owner = first_pos[g_user] + n_pos[g_user] - 1 - k // ratio
    src = pos.select("user_id", "timestamp", "_row")[owner]
    return src.with_columns(pl.Series("item_id", items[got % n_items].tolist(), pl.Utf8),
                            pl.lit(0, pl.Int8).alias("label"),
                            pl.Series("_sub", (1 + k % ratio).astype(np.int32))).select(pos.columns)


class History:
    """Each pair's last `length` positives strictly before it, by one searchsorted over (user, time) keys."""

    def __init__(self, events: pl.DataFrame, length: int):
        self.length = length
        users = events["user_id"].unique().sort()
        self._code = dict(zip(users.to_list(), range(users.len())))
        ts = events["timestamp"].to_numpy()
        self._t0, self._span = int(ts.min()), int(ts.max() - ts.min()) + 1
        if users.len() * self._span >= 2**62:
            raise ConfigError("too many users x distinct timestamps for recbench's int64 time keys")
        pos = events.filter(pl.col("label") == 1)
        self._pos_key = self._keys(pos)
        self._pos_item = np.array(pos["item_id"].to_list(), dtype=object)

    def _keys(self, df: pl.DataFrame) -> np.ndarray:
        u = np.fromiter((self._code[x] for x in df["user_id"].to_list()), np.int64, df.height)
        return u * self._span + (df["timestamp"].to_numpy().astype(np.int64) - self._t0)

    def bounds(self, df: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """(start, end) into the positives: the user's positives strictly earlier than each row."""
        key = self._keys(df)
        end = np.searchsorted(self._pos_key, key, "left")
        start = np.searchsorted(self._pos_key, key - key % self._span, "left")  # the user's first positive
        return start, end

    def counts(self, df: pl.DataFrame) -> np.ndarray:
        start, end = self.bounds(df)
        return end - start

    def attach(self, df: pl.DataFrame) -> pl.DataFrame:
        start, end = self.bounds(df)
        start = np.maximum(start, end - self.length)
        hist = [self._pos_item[a:b].tolist() for a, b in zip(start, end)]
        return df.with_columns(pl.Series("history", hist, pl.List(pl.Utf8)))


def split(events: pl.DataFrame, *, test_users: int, per_user: int, train_pairs: int, valid_fraction: float,
          history_len: int, min_history: int, seed: int, only: tuple[str, ...] | list[str] | None = None,
          cut_time=None) -> CtrSplit:
    """Test windows for a seeded draw of users (of `only` when given, every eligible one of them unless
    `test_users` is fewer), training pairs before them (see the module docstring). `cut_time`: the global
    temporal split instead (one cut for every user: the first `per_user` pairs at or after it are a test
    user's window, every pair strictly before it of any user may be trained on, nothing after it is)."""
    ev = events.with_row_index("seq").with_columns(pl.col("seq").min().over("user_id", "impression").alias("first"))
    hist = History(ev, history_len)
    if "pair" in ev.columns:  # real labels: history-only positives feed `hist`, never a pair
        ev = ev.filter(pl.col("pair"))
    if cut_time is None:
        starts = ev.group_by("user_id").agg(pl.len().alias("n"),
                                            pl.col("first").sort_by("seq").tail(per_user).first().alias("start"))
    else:  # the window: from the first pair at or after the cut to the impression of its per_user-th
        starts = (ev.filter(pl.col("timestamp") >= cut_time).group_by("user_id")
                  .agg(pl.len().alias("n"), pl.col("first").min().alias("start"),
                       pl.col("first").sort_by("seq").head(per_user).last().alias("end")))
    funnel = {"users": starts.height, "most_pairs": int(starts["n"].max() or 0)}
    starts = (starts.filter(pl.col("n") >= per_user)
              .join(ev.select(pl.col("seq").alias("start"), pl.col("timestamp").alias("t_start")), on="start")
              .sort("user_id"))
    before = hist.counts(starts.select("user_id", pl.col("t_start").alias("timestamp")))
    funnel.update(with_pairs=starts.height, most_history=int(before.max()) if before.size else 0)
    starts = starts.filter(before >= min_history)
    funnel["with_history"] = starts.height
    if only is not None:
        starts = starts.filter(pl.col("user_id").is_in(list(only)))
    rng = np.random.default_rng(seed)
    n_test = min(test_users, starts.height)
    chosen = starts[np.sort(rng.choice(starts.height, size=n_test, replace=False))] if n_test else starts.head(0)
    # the training pairs are drawn by row position below: the joins keep `ev`'s order (polars does not promise
    # it by default, so a build could otherwise differ between runs with one seed)
    if cut_time is None:
        ev = ev.join(chosen.select("user_id", "start", "t_start"), on="user_id", how="left", maintain_order="left")
        test = ev.filter(pl.col("seq") >= pl.col("start"))
        pool = ev.filter(pl.col("start").is_null() | (pl.col("timestamp") < pl.col("t_start")))
    else:
        ev = ev.join(chosen.select("user_id", "start", "end"), on="user_id", how="left", maintain_order="left")
        # (an impression is one moment, so its pairs are all at or after T; the time filter keeps that true)
        test = ev.filter((pl.col("seq") >= pl.col("start")) & (pl.col("first") <= pl.col("end"))
                         & (pl.col("timestamp") >= cut_time))
        pool = ev.filter(pl.col("timestamp") < cut_time)
    pool = pool.filter(hist.counts(pool) >= min_history)
    take = np.sort(rng.choice(pool.height, size=min(train_pairs, pool.height), replace=False))
    in_valid = rng.random(take.size) < valid_fraction
    cols = list(PAIR_COLUMNS[:-1])
    return CtrSplit(
        test=hist.attach(test.sort("seq").select(cols)),
        train=hist.attach(pool[take[~in_valid]].select(cols)),
        valid=hist.attach(pool[take[in_valid]].select(cols)),
        eligible_users=starts.height,
        funnel=funnel,
    )
