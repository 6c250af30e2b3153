"""RecBench list-wise sequences from a dataset's interactions (§3.2, §4.3): leave-last-out per user.

Positives. Each user's positive interactions in time order (ties: file order), as the paper builds
behaviour sequences (§4.3): with ratings (MovieLens, Amazon) rating > 3, as ctr's clicks; with
click labels (MIND) the clicks; otherwise every interaction. A (user, item) pair counts once, at
its first positive, so a target never reappears in its own history.

Split (the same rule for every user). With positives p_1 … p_n, p_n is the user's test target and
p_{n-1} their validation target; only p_1 … p_{n-2} are ever trained on. A history is the last
`history_len` (20, the paper's truncation) positives before its target, oldest first. Users with
at least `min_history` positives before their validation target are eligible; a seeded draw of
`test_users` (5,000, Table 2) of them are tested (all of them with `all_users`), and their
validation rows are the validation set (early stopping).

Training sequences. Every user's trainable part p_1 … p_{n-2} is cut, from its end, into windows of
`history_len` + 1 positives that share one item with the window before (stride `history_len`), so
every trainable positive but the first is the next item of exactly one window position: a window
is written as (history, target) like a test row, and a next-item model trains on each of its
positions. A seeded sample of `train_sequences` (40,000, Table 2) windows is kept (all with
`all_users`, RecBole-comparable). Nothing at or after a user's validation target is in any training
window, so no model fitted on them sees a test (or validation) target of that user.

Global temporal split (`--option split=global_time [cut=q]`, `global_split`). Leave-last-out lets one
user's training windows hold positives stamped after another user's test target (on ML-1M most of
them: `seqrec_split.json` records, averaged over test targets, the share of training positions stamped
after the target as `train_after_test_target`). Here one cut time T
for everyone (`data.temporal_split.cut_time`: the interaction at quantile q of all interactions'
times): a user's test target is their first positive at or after T, their validation target their
last positive before T, and only positives before that are trained on (every user's, tested or not),
so no training positive is stamped at or after T. Eligible: a positive at or after T and
`min_history` positives before the validation target.

Ties in time keep the file's order (positives are sorted by user, timestamp, row), in both splits:
`seqrec_split.json` records the share of test targets stamped in the same second as the history's
last item (`test_target_ties`), whose order is therefore the file's, not time's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from recharness.tasks.recbench.data import negatives_mode

#: the columns of the test samples' source and of seqrec_train/seqrec_valid.parquet
SEQ_COLUMNS = ("user_id", "history", "target")
_SCHEMA = {"user_id": pl.Utf8, "history": pl.List(pl.Utf8), "target": pl.Utf8}


@dataclass(frozen=True)
class SeqrecSplit:
    test: pl.DataFrame  # SEQ_COLUMNS, one row per tested user, by user id
    valid: pl.DataFrame  # the tested users' validation rows, by user id
    train: pl.DataFrame  # training windows, by user id then time
    eligible_users: int  # users who could have been drawn for testing


def positives_rule(interactions: pl.DataFrame, positives: str = "auto") -> str:
    """`labels`, `ratings` or `all`: what makes an interaction a positive (see the module docstring)."""
    if positives != "auto":
        return positives
    mode = negatives_mode(interactions, "auto")
    return "all" if mode == "sampled" else mode


def positive_sequences(interactions: pl.DataFrame, positives: str = "auto") -> tuple[pl.DataFrame, str]:
    """(user_id, items, times) per user, items oldest first and each once (times: their timestamps, None
    without a timestamp column); and the rule used."""
    rule = positives_rule(interactions, positives)
    ev = interactions.with_row_index("_row")
    if rule == "labels":
        ev = ev.filter(pl.col("label") == 1)
    elif rule == "ratings":
        ev = ev.filter(pl.col("rating") > 3)
    ev = (ev.sort("user_id", "timestamp", "_row", nulls_last=False)
          .unique(["user_id", "item_id"], keep="first", maintain_order=True))
    times = pl.col("timestamp").alias("times") if "timestamp" in ev.columns else pl.lit(None).alias("times")
    seqs = ev.group_by("user_id", maintain_order=True).agg(pl.col("item_id").alias("items"), times).sort("user_id")
    return seqs, rule


def _frame(rows: list[tuple[str, list[str], str]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=_SCHEMA, orient="row")


def windows(items: list[str], length: int) -> list[tuple[list[str], str]]:
    """`items` cut from its end into (history, target) windows of `length` + 1 items, consecutive
    windows sharing one item, oldest first: every item but the first is one window position's next item."""
    out = []
    for end in range(len(items) - 1, 0, -length):
        chunk = items[max(0, end - length): end + 1]
        out.append((chunk[:-1], chunk[-1]))
    return out[::-1]


def split(seqs: pl.DataFrame, *, test_users: int | None, train_sequences: int | None, history_len: int,
          min_history: int, seed: int, only: tuple[str, ...] | list[str] | None = None) -> SeqrecSplit:
    """Test, validation and training rows (see the module docstring); `None` sizes mean all. `only`: the
    test users are these (those eligible), `test_users` of them when fewer; training windows stay everyone's."""
    users = seqs["user_id"].to_list()
    items = seqs["items"].to_list()
    eligible = [k for k, its in enumerate(items) if len(its) - 2 >= min_history]
    rng = np.random.default_rng(seed)
    chosen = _draw(eligible, users, test_users, rng, only)
    L = history_len
    test = [(users[k], items[k][-1 - L:-1], items[k][-1]) for k in chosen]
    valid = [(users[k], items[k][max(0, len(items[k]) - 2 - L):-2], items[k][-2]) for k in chosen]
    train = [(u, h, t) for u, its in zip(users, items) for h, t in windows(its[:-2], L)]
    if train_sequences is not None and len(train) > train_sequences:
        train = [train[k] for k in np.sort(rng.choice(len(train), size=train_sequences, replace=False))]
    return SeqrecSplit(_frame(test), _frame(valid), _frame(train), len(eligible))


def _draw(eligible: list[int], users: list[str], test_users: int | None, rng, only) -> list[int]:
    """The tested users among `eligible` (indices): `only` when given, then a seeded draw of `test_users`."""
    if only is not None:
        wanted = set(only)
        eligible = [k for k in eligible if users[k] in wanted]
    if test_users is None or test_users >= len(eligible):
        return eligible
    return [eligible[k] for k in np.sort(rng.choice(len(eligible), size=test_users, replace=False))]


def global_eligible(seqs: pl.DataFrame, t, min_history: int) -> tuple[list[int], list[int]]:
    """Each user's count of positives stamped before the cut `t` (times ascend), and the users (row numbers)
    `global_split` may test: one positive at or after `t`, `min_history` before their validation target.
    Without the split's windows, so `why_empty` can ask it cheaply."""
    import bisect

    before = [bisect.bisect_left(ts, t) for ts in seqs["times"].to_list()]
    lengths = seqs["items"].list.len().to_list()
    return before, [k for k, n in enumerate(lengths) if before[k] < n and before[k] - 1 >= min_history]


def global_split(seqs: pl.DataFrame, t, *, test_users: int | None, train_sequences: int | None, history_len: int,
                 min_history: int, seed: int, only: tuple[str, ...] | list[str] | None = None) -> SeqrecSplit:
    """`split` with one cut time `t` for every user (see the module docstring): positives before `t` are
    history and training data, a user's first positive at or after `t` their test target."""
    users = seqs["user_id"].to_list()
    items = seqs["items"].to_list()
    before, eligible = global_eligible(seqs, t, min_history)
    chosen = _draw(eligible, users, test_users, np.random.default_rng(seed), only)
    L = history_len
    test = [(users[k], items[k][:before[k]][-L:], items[k][before[k]]) for k in chosen]
    valid = [(users[k], items[k][:before[k] - 1][-L:], items[k][before[k] - 1]) for k in chosen]
    train = [(u, h, tg) for u, its, b in zip(users, items, before) for h, tg in windows(its[:max(b - 1, 0)], L)]
    if train_sequences is not None and len(train) > train_sequences:
        rng = np.random.default_rng([seed, 1])
        train = [train[k] for k in np.sort(rng.choice(len(train), size=train_sequences, replace=False))]
    return SeqrecSplit(_frame(test), _frame(valid), _frame(train), len(eligible))


def split_facts(seqs: pl.DataFrame, sp: SeqrecSplit) -> dict:
    """What a reader needs to judge the split (None without timestamps): how much of the training data lies
    in a test target's future — per test target the share of training positions (window next items)
    stamped after it, averaged over test targets — and the share of test targets stamped in the same
    second as the history's last item (their order is the file's)."""
    if seqs.is_empty() or seqs["times"].dtype == pl.Null or sp.test.is_empty():
        return {"train_after_test_target": None, "test_target_ties": None}
    when = {(u, i): t for u, its, ts in seqs.select("user_id", "items", "times").iter_rows()
            for i, t in zip(its, ts)}
    targets = np.array([when[(u, tg)] for u, _, tg in sp.test.iter_rows()], dtype=np.float64)
    train_t = np.sort(np.array([when[(u, tg)] for u, _, tg in sp.train.iter_rows()], dtype=np.float64))
    later = (len(train_t) - np.searchsorted(train_t, targets, side="right")) / max(len(train_t), 1)
    ties = [when.get((u, h[-1])) == when.get((u, tg)) for u, h, tg in sp.test.iter_rows() if h]
    return {"train_after_test_target": round(float(later.mean()), 4),
            "test_target_ties": round(sum(ties) / max(len(ties), 1), 4)}
