"""`build SUITE --users FILE`: exactly the users of a file (ids one a line, or the `user_id` of JSONL / JSON /
CSV lines), for every task that selects users one by one; the others refuse; unknown users are named."""

from __future__ import annotations

import json

import polars as pl
import pytest
from typer.testing import CliRunner

from recharness.cli import app
from recharness.core.errors import ConfigError, InputError
from recharness.core.io import read_jsonl
from recharness.runner import pipeline
from recharness.runner.imported import read_users


def _users_by_task(out):
    got: dict[str, list[str]] = {}
    for s in read_jsonl(out / "samples.jsonl"):
        got.setdefault(s["task"], []).append(str(s["user_id"]))
    return got


@pytest.fixture(scope="module")
def some_users(ml1m):
    counts = ml1m.interactions.group_by("user_id").len().sort("user_id")
    many = counts.filter(pl.col("len") > 150)["user_id"].to_list()
    few = counts.filter(pl.col("len") < 40)["user_id"].to_list()
    return [str(u) for u in many[3:6]], str(few[0])


def test_llmrec_builds_exactly_the_listed_users(ml1m, tmp_path, some_users):
    users, _ = some_users
    f = tmp_path / "users.txt"
    f.write_text(f"# the authors' users\n{users[2]}\n{users[0]}\n\n{users[1]}\n{users[0]}\n")
    assert read_users(f) == [users[2], users[0], users[1]]
    out = tmp_path / "run"
    info = pipeline.build("llmrec", "ml-1m", out, tasks=["sequential", "direct"], seed=0, users=read_users(f))
    got = _users_by_task(out)
    assert sorted(got["sequential"]) == sorted(users) and sorted(got["direct"]) == sorted(users)
    assert info["counts"] == {"sequential": 3, "direct": 3} and info["users"]["count"] == 3
    # the same users' samples as a full build gives them (sequential draws nothing else per user)
    full = tmp_path / "full"
    pipeline.build("llmrec", "ml-1m", full, tasks=["sequential"], seed=0, limit=None)
    by_id = {s["id"]: s for s in read_jsonl(full / "samples.jsonl")}
    for s in read_jsonl(out / "samples.jsonl"):
        if s["task"] == "sequential":
            assert s == by_id[s["id"]]
    # another users list is another build
    info2 = pipeline.build("llmrec", "ml-1m", tmp_path / "two", tasks=["sequential"], seed=0, users=users[:2])
    assert info2["fingerprint"] != info["fingerprint"] and info2["counts"] == {"sequential": 2}


def test_users_of_a_published_jsonl_file(ml1m, tmp_path, some_users):
    users, _ = some_users
    f = tmp_path / "released.jsonl"
    f.write_text("".join(json.dumps({"user_id": u, "answer": "1. Heat (1995)"}) + "\n" for u in users))
    arr = tmp_path / "released.json"
    arr.write_text(json.dumps([{"user_id": u, "titles": []} for u in reversed(users)]))
    assert read_users(f) == users and read_users(arr) == list(reversed(users))
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"user_id": users[0]}) + "\n" + json.dumps({"id": "x"}) + "\n")
    with pytest.raises(InputError, match=r"bad\.jsonl, line 2, field 'user_id': no \"user_id\""):
        read_users(bad)


def test_users_the_dataset_lacks_are_named(ml1m, tmp_path, some_users):
    users, _ = some_users
    with pytest.raises(ConfigError, match=r"--users: 2 of the 4 listed users are not in ml-1m \(first: "
                                          r"'nobody', 'x99999'\)"):
        pipeline.build("llmrec", "ml-1m", tmp_path / "r", tasks=["sequential"], users=[users[0], "nobody", users[1],
                                                                                        "x99999"])
    assert not (tmp_path / "r" / "samples.jsonl").exists()


def test_a_listed_user_the_filters_drop_is_named(ml1m, tmp_path, some_users):
    users, few = some_users
    with pytest.raises(ConfigError, match=rf"--users: sequential keeps no sample of 1 of the 2 listed users \(first: "
                                          rf"'{few}'\)"):
        pipeline.build("llmrec", "ml-1m", tmp_path / "r", tasks=["sequential"], users=[users[0], few],
                       options={"min_history": 60})


def test_recbench_seqrec_and_ctr_take_the_listed_users(ml1m, tmp_path, some_users):
    users, _ = some_users
    out = tmp_path / "seq"
    pipeline.build("recbench", "ml-1m", out, tasks=["seqrec"], seed=0, users=users,
                   options={"train_sequences": 50})
    assert sorted(_users_by_task(out)["seqrec"]) == sorted(users)
    out = tmp_path / "ctr"
    pipeline.build("recbench", "ml-1m", out, tasks=["ctr"], seed=0, users=users[:2],
                   options={"train_pairs": 50, "test_pairs_per_user": 2})
    got = _users_by_task(out)["ctr"]
    assert sorted(set(got)) == sorted(users[:2]) and len(got) == 4  # two windows each


@pytest.mark.parametrize("suite", ["recbench-plus", "perrecbench"])
def test_suites_that_draw_no_users_one_by_one_refuse(suite, tmp_path):
    with pytest.raises(ConfigError, match=r"--users: .* draws? no users one by one .* build without --users"):
        pipeline.build(suite, "ml-1m", tmp_path / "r", users=["1"])


def test_cli_build_users(ml1m, tmp_path, some_users):
    users, _ = some_users
    f = tmp_path / "users.txt"
    f.write_text("\n".join(users) + "\n")
    out = tmp_path / "run"
    res = CliRunner().invoke(app, ["build", "llmrec", "-t", "sequential", "-o", str(out), "--users", str(f)],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "built sequential: 3 samples" in res.output
    assert "--users" in (out / "commands.jsonl").read_text()
    res = CliRunner().invoke(app, ["build", "llmrec", "-t", "sequential", "-o", str(tmp_path / "x"), "--users",
                                   str(tmp_path / "none.txt")])
    assert res.exit_code != 0 and "--users" in str(res.exception) and "no such file" in str(res.exception)


def test_what_was_run_keeps_the_flags_that_change_results(ml1m, tmp_path):
    """`score --partial --ci-seed 3` was logged without both (re-running the logged line was refused, or gave
    other intervals), `run --redo-invalid --timeout 5` without both."""
    import json

    out = tmp_path / "run"
    for args in (["build", "llmrec", "-t", "sequential", "-o", str(out), "--limit", "2"],
                 ["run", "llmrec", "-o", str(out), "-m", "fake", "--no-cache", "--timeout", "5"],
                 ["run", "llmrec", "-o", str(out), "-m", "fake", "--no-cache", "--redo-invalid"],
                 ["score", "llmrec", "-o", str(out), "--partial", "--ci-seed", "3", "--resamples", "0"]):
        res = CliRunner().invoke(app, args, catch_exceptions=False)
        assert res.exit_code == 0, res.output
    cmds = [json.loads(x)["command"] for x in (out / "commands.jsonl").read_text().splitlines()]
    assert "--timeout 5.0" in cmds[1] and "--redo-invalid" in cmds[2]
    assert "--partial" in cmds[3] and "--ci-seed 3" in cmds[3] and "--resamples 0" in cmds[3]
