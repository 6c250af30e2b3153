"""RecBench CTR under the global temporal split (`--option split=global_time cut=q`), hand-worked and on ML-1M.

Hand-worked (ratings: > 3 a click, < 3 not, 3 dropped), cut time T = 10, 2 pairs per test user, history ≥ 1:

    u1: i0 5 @1, i1 4 @2, i2 1 @11, i3 5 @12, i4 2 @13   → window i2, i3 (first two at or after 10); i4 unused
    u2: i0 4 @3, i5 5 @10, i6 1 @14                      → window i5 (stamped exactly T: after the cut), i6
    u3: i1 5 @4, i2 2 @5, i7 4 @15                       → one pair after the cut: not a test user
    u4: i8 2 @16, i9 4 @17                               → no positive before its first pair after: not eligible

Training pairs: every pair before T of every user with ≥ 1 earlier positive: u1 i1 @2 (after i0), u3 i2 @5
(after i1). u2 i0 @3 and u1 i0 @1, u3 i1 @4 have no earlier positive.
"""

from __future__ import annotations

import json

import polars as pl
import pytest

from recharness.data.temporal_split import cut_time
from recharness.runner import pipeline
from recharness.tasks.recbench.data import labelled_events, split

ROWS = [("u1", "i0", 5, 1), ("u1", "i1", 4, 2), ("u1", "i2", 1, 11), ("u1", "i3", 5, 12), ("u1", "i4", 2, 13),
        ("u2", "i0", 4, 3), ("u2", "i5", 5, 10), ("u2", "i6", 1, 14),
        ("u3", "i1", 5, 4), ("u3", "i2", 2, 5), ("u3", "i7", 4, 15),
        ("u4", "i8", 2, 16), ("u4", "i9", 4, 17)]


def _events():
    inter = pl.DataFrame(ROWS, schema={"user_id": pl.Utf8, "item_id": pl.Utf8, "rating": pl.Float64,
                                       "timestamp": pl.Int64}, orient="row")
    ev, mode = labelled_events(inter, [f"i{k}" for k in range(10)])
    assert mode == "ratings"
    return ev


def _pairs(df: pl.DataFrame) -> list[tuple]:
    return sorted(zip(df["user_id"], df["item_id"], df["label"], df["timestamp"]))


def test_global_split_by_hand():
    sp = split(_events(), test_users=10, per_user=2, train_pairs=100, valid_fraction=0.0, history_len=20,
               min_history=1, seed=0, cut_time=10)
    assert _pairs(sp.test) == [("u1", "i2", 0, 11), ("u1", "i3", 1, 12), ("u2", "i5", 1, 10), ("u2", "i6", 0, 14)]
    assert _pairs(sp.train) == [("u1", "i1", 1, 2), ("u3", "i2", 0, 5)] and sp.valid.is_empty()
    assert sp.eligible_users == 2
    # histories: the positives strictly before each pair, the test window's own earlier click included
    hist = dict(zip(zip(sp.test["user_id"], sp.test["item_id"]), sp.test["history"].to_list()))
    assert hist[("u1", "i2")] == ["i0", "i1"] and hist[("u1", "i3")] == ["i0", "i1"]
    assert hist[("u2", "i5")] == ["i0"] and hist[("u2", "i6")] == ["i0", "i5"]
    # the per-user split of the same events differs: each user's last two pairs, training before them
    per_user = split(_events(), test_users=10, per_user=2, train_pairs=100, valid_fraction=0.0, history_len=20,
                     min_history=1, seed=0)
    assert ("u1", "i4", 0, 13) in _pairs(per_user.test) and ("u3", "i7", 1, 15) in _pairs(per_user.test)


@pytest.fixture(scope="module")
def built(ml1m, tmp_path_factory):
    out = tmp_path_factory.mktemp("ctr-global") / "run"
    pipeline.build("recbench", "ml-1m", out, tasks=["ctr"], seed=0, limit=300,
                   options={"split": "global_time", "cut": 0.8, "train_pairs": 5000})
    return out


def test_ml1m_global_split_never_trains_on_or_after_the_cut(built, ml1m):
    t = cut_time(ml1m.interactions, 0.8)
    info = json.loads((built / "recbench" / "split.json").read_text())
    assert info["split"] == "global_time" and info["cut"] == 0.8 and info["cut_time"] == t
    samples = [json.loads(x) for x in (built / "samples.jsonl").read_text().splitlines()]
    train = pl.read_parquet(built / "recbench" / "train.parquet")
    valid = pl.read_parquet(built / "recbench" / "valid.parquet")
    assert samples and int(train["timestamp"].max()) < t and int(valid["timestamp"].max()) < t
    assert min(s["timestamp"] for s in samples) >= t
    # each test user's pairs are their first 4 labelled pairs at or after the cut, found independently
    ev, _ = labelled_events(ml1m.interactions, ml1m.items["item_id"].to_list())
    after = ev.filter(pl.col("timestamp") >= t)
    by_user: dict[str, list[dict]] = {}
    for s in samples:
        by_user.setdefault(s["user_id"], []).append(s)
    assert len(by_user) == 300
    for u in list(by_user)[:40]:
        first4 = after.filter(pl.col("user_id") == u).head(4)
        assert sorted((s["item_id"], s["label"]) for s in by_user[u]) == sorted(zip(first4["item_id"],
                                                                                   first4["label"]))


def test_cut_needs_the_global_split(ml1m, tmp_path):
    from recharness.core.errors import ConfigError

    with pytest.raises(ConfigError, match="cut time applies to split=global_time only"):
        pipeline.build("recbench", "ml-1m", tmp_path / "r", tasks=["ctr"], seed=0, limit=5, options={"cut": 0.5})


def test_an_empty_global_split_says_why(ml1m, tmp_path):
    """A cut after every pair keeps no test user, and the build says it is the cut, not the labels."""
    from recharness.core.errors import ConfigError
    from recharness.core.types import BuildConfig
    from recharness.tasks.recbench.ctr import CtrTask

    task = CtrTask()
    config = BuildConfig(seed=0, limit=5, options={"split": "global_time", "cut": 0.9999999})
    got = list(task.build(ml1m, config))
    why = task.why_empty(ml1m, config)
    assert not got
    assert why and "split=global_time" in why and ("at or after the cut" in why), why
    with pytest.raises(ConfigError):
        pipeline.build("recbench", "ml-1m", tmp_path / "r", tasks=["ctr"], seed=0, limit=5,
                       options={"split": "global_time", "cut": 0.9999999})
