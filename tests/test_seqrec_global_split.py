"""RecBench seqrec under `--option split=global_time`: one cut time for every user, checked from the raw
ratings (never through the builder's code): each tested user's target is their first positive at or after
the cut, the validation target their last before it, no training position is stamped at or after the cut,
and the build records what a reader needs (the cut time, the mean share of training positions stamped after a
test target — large under leave-last-out, 0 here — and the tie share)."""

from __future__ import annotations

import json
from collections import defaultdict

import numpy as np
import polars as pl
import pytest

from recharness.baselines import pairs_path
from recharness.baselines.base import SEQUENCE_PARTS
from recharness.core.errors import ConfigError
from recharness.core.io import read_jsonl
from recharness.core.rundir import RunDir
from recharness.runner import pipeline

N = 60


@pytest.fixture(scope="module")
def raw(ml1m):
    """Each user's rating > 3 items with their times, stored order (user, time, file order), each item once;
    and the cut time T = the time at position floor(0.9 n) of all n interactions sorted by time."""
    by_user, seen = defaultdict(list), set()
    for u, i, r, t in ml1m.interactions.select("user_id", "item_id", "rating", "timestamp").iter_rows():
        if r > 3 and (u, i) not in seen:
            seen.add((u, i))
            by_user[u].append((i, t))
    times = np.sort(ml1m.interactions["timestamp"].to_numpy())
    return by_user, int(times[int(np.floor(0.9 * len(times)))])


@pytest.fixture(scope="module")
def global_build(ml1m, tmp_path_factory):
    out = tmp_path_factory.mktemp("seqrec-global") / "run"
    pipeline.build("recbench", "ml-1m", out, tasks=["seqrec"], seed=0, limit=N, options={"split": "global_time"})
    return out, list(read_jsonl(out / "samples.jsonl"))


def test_targets_are_each_users_first_positive_after_the_cut(global_build, raw):
    out, samples = global_build
    by_user, T = raw
    assert len(samples) == N
    valid = {u: (h, t) for u, h, t in pl.read_parquet(pairs_path(out, "recbench", SEQUENCE_PARTS["valid"])).iter_rows()}
    for s in samples:
        pos = by_user[s["user_id"]]
        before = [i for i, t in pos if t < T]
        after = [i for i, t in pos if t >= T]
        assert s["target"] == after[0] and s["history"] == before[-20:]
        assert valid[s["user_id"]] == (before[:-1][-20:], before[-1])
    # eligible users: a positive at or after T and at least one positive before the validation target
    eligible = sum(1 for pos in by_user.values()
                   if any(t >= T for _, t in pos) and sum(t < T for _, t in pos) - 1 >= 1)
    info = json.loads(RunDir(out).pairs("recbench", "seqrec_split", "json").read_text())
    assert info["eligible_users"] == eligible and info["split"] == "global_time" and info["cut_time"] == T


def test_nothing_at_or_after_the_cut_is_trained_on(global_build, raw):
    out, _ = global_build
    by_user, T = raw
    when = {(u, i): t for u, pos in by_user.items() for i, t in pos}
    train = pl.read_parquet(pairs_path(out, "recbench", SEQUENCE_PARTS["train"]))
    assert train.height > 0
    stamped = [when[(u, i)] for u, h, t in train.iter_rows() for i in (*h, t)]
    assert max(stamped) < T
    # no user's validation target (their last positive before T) is a training position of theirs
    last_before = {u: [i for i, t in pos if t < T][-1] for u, pos in by_user.items() if any(t < T for _, t in pos)}
    assert not any(t == last_before.get(u) for u, _, t in train.iter_rows())
    info = json.loads(RunDir(out).pairs("recbench", "seqrec_split", "json").read_text())
    assert info["train_after_test_target"] == 0.0


def test_leave_last_out_says_how_much_training_comes_after_a_test_target(ml1m, tmp_path, raw):
    by_user, _ = raw
    out = tmp_path / "run"
    pipeline.build("recbench", "ml-1m", out, tasks=["seqrec"], seed=0, limit=N)
    samples = list(read_jsonl(out / "samples.jsonl"))
    when = {(u, i): t for u, pos in by_user.items() for i, t in pos}
    train = pl.read_parquet(pairs_path(out, "recbench", SEQUENCE_PARTS["train"]))
    stamps = [when[(u, t)] for u, _, t in train.iter_rows()]
    # per test target, the share of training positions stamped after it; averaged over the targets
    later = np.mean([sum(x > when[(s["user_id"], s["target"])] for x in stamps) / len(stamps) for s in samples])
    ties = np.mean([when[(s["user_id"], s["history"][-1])] == when[(s["user_id"], s["target"])] for s in samples])
    info = json.loads(RunDir(out).pairs("recbench", "seqrec_split", "json").read_text())
    assert info["split"] == "leave_last_out" and "cut_time" not in info
    assert info["train_after_test_target"] == pytest.approx(later, abs=1e-4) and later > 0.1
    assert info["test_target_ties"] == pytest.approx(ties, abs=1e-4)


def test_a_cut_that_leaves_no_user_says_so(ml1m, tmp_path):
    with pytest.raises(ConfigError, match="split=global_time cut=0.9 .* min_history=5000"):
        pipeline.build("recbench", "ml-1m", tmp_path / "run", tasks=["seqrec"], seed=0, limit=5,
                       options={"split": "global_time", "min_history": 5000})
