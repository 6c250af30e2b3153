"""`--executor ray`: samples sharded over Ray actors on a simulated 2-node cluster, the driver the only writer.

One `ray.cluster_utils.Cluster` (2 nodes × 2 CPUs, 127.0.0.1, no dashboard) serves the whole module.
Checked: the same predictions as the local executor (fake model; fake OpenAI server on two ports,
one actor per endpoint), the cache written by the driver only, a worker killed mid-shard (its
samples answered elsewhere, none lost or doubled), a driver killed mid-run (resume completes
without duplicates), and `train --executor ray`.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter

import pytest

# before Ray is imported: no usage stats, and "localhost" stays 127.0.0.1 (Ray would swap in the host's
# routable address, which this cluster never binds)
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
ray = pytest.importorskip("ray", reason="ray not installed (pip install 'recharness[ray]')")

from recharness.core.io import read_jsonl  # noqa: E402
from recharness.execution.ray_executor import RayExecutor, worker_lines  # noqa: E402
from recharness.models.fake import FakeBackend  # noqa: E402
from recharness.models.registry import resolve_model  # noqa: E402
from recharness.runner import pipeline  # noqa: E402
from recharness.testing.fake_server import FakeServerProcess  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster():
    from ray.cluster_utils import Cluster

    node = {"num_cpus": 2, "node_ip_address": "127.0.0.1", "object_store_memory": 80 * 1024 * 1024}
    c = Cluster(initialize_head=True, head_node_args={**node, "include_dashboard": False})
    c.add_node(**node)
    c.wait_for_nodes()
    ray.init(address=c.address, logging_level="WARNING", configure_logging=False)
    try:
        yield c
    finally:
        ray.shutdown()
        c.shutdown()


@pytest.fixture(scope="module")
def built(ml1m, tmp_path_factory):
    out = tmp_path_factory.mktemp("ray") / "llmrec"
    pipeline.build("llmrec", "ml-1m", out, tasks=["sequential", "direct"], seed=0, limit=12)
    return out


def fresh(built, tmp_path):
    d = tmp_path / "run"
    shutil.copytree(built, d)
    return d


def records(path, drop=("latency_s",)) -> dict[str, dict]:
    return {r["id"]: {k: v for k, v in r.items() if k not in drop} for r in read_jsonl(path)}


def counts(path) -> Counter:
    return Counter(r["id"] for r in read_jsonl(path))


def test_fake_model_same_predictions_as_local(cluster, built, tmp_path):
    d = fresh(built, tmp_path)
    n = len(list(read_jsonl(d / "samples.jsonl")))
    local, ls = pipeline.run(d, FakeBackend("fake"), "local", use_cache=False)
    seen = []
    ex = RayExecutor("fake", workers=2, shard_size=4)
    handles = list(ex.actors)
    spread, rs = pipeline.run(d, ex, "spread", use_cache=False, on_progress=seen.append)
    assert ls.complete and rs.complete and rs.done == n and sum(seen) == n
    assert records(local, drop=()) == records(spread, drop=())  # every field, latency (0.0) included
    assert max(counts(spread).values()) == 1
    assert len({w["node"] for w in rs.workers}) == 2, rs.workers  # both nodes of the cluster answered
    assert sum(w["samples"] for w in rs.workers) == n and all(w["samples"] for w in rs.workers)
    lines = worker_lines(rs)
    assert lines[0] == "ray workers: 2" and "samples/s" in lines[1]
    for h in handles:  # the run closed the executor: its actors are killed, not left holding CPUs
        with pytest.raises(ray.exceptions.RayActorError):
            ray.get(h.info.remote(), timeout=30)


def test_two_endpoints_one_actor_each_same_as_local_and_cache_by_driver(cluster, built, tmp_path, monkeypatch):
    monkeypatch.setenv("RECHARNESS_CACHE", str(tmp_path / "cache.sqlite"))
    d = fresh(built, tmp_path)
    n = len(list(read_jsonl(d / "samples.jsonl")))
    with FakeServerProcess(max_seconds=120) as a, FakeServerProcess(max_seconds=120) as b:
        urls = [a.base_url, b.base_url]
        local, ls = pipeline.run(d, resolve_model("openai:fake", base_url=urls), "local", use_cache=False)
        ex = RayExecutor("openai:fake", base_url=urls)
        assert len(ex.actors) == 2 and ex.identity()["base_url"] == "pool"
        spread, rs = pipeline.run(d, ex, "spread")
        assert ls.complete and rs.complete and rs.done == n and rs.cached == 0
        assert records(local) == records(spread)
        assert sorted(w["worker"] for w in rs.workers) == sorted(urls)
        assert all(w["endpoints"][0]["answered"] > 0 for w in rs.workers)
        # the driver wrote the cache: a second run under another name is answered from it, no worker asked
        again, rs2 = pipeline.run(d, RayExecutor("openai:fake", base_url=urls), "again")
        assert rs2.cached == n and rs2.complete and all(w["shards"] == 0 for w in rs2.workers)
        # a cached answer keeps its first latency, of unknown load: it records no concurrency
        drop = ("latency_s", "cached", "concurrency")
        assert records(again, drop=drop) == records(spread, drop=drop)


def test_one_endpoint_actors_post_inline_and_answer_as_the_local_run(cluster, built, tmp_path):
    """An actor posts from its own process (no transport child beside it, which its CPU reservation would not
    count); the answers are the local run's, whose backend posts through the child."""
    d = fresh(built, tmp_path)
    n = len(list(read_jsonl(d / "samples.jsonl")))
    with FakeServerProcess(max_seconds=120) as srv:
        backend = resolve_model(f"openai:fake@{srv.base_url}")
        assert backend._pump is not None  # the local default: the transport process
        local, ls = pipeline.run(d, backend, "local", use_cache=False)
        ex = RayExecutor(f"openai:fake@{srv.base_url}", workers=2)
        assert [i["transport_process"] for i in ex.infos] == [False, False]
        spread, rs = pipeline.run(d, ex, "spread", use_cache=False)
        assert ls.complete and rs.complete and rs.done == n
        drop = ("latency_s", "concurrency")  # two actors on one server: up to twice the requests in flight there
        assert records(local, drop) == records(spread, drop)
        assert {r["concurrency"] for r in records(spread).values()} == {ex.max_concurrency}


def test_a_worker_killed_mid_shard_loses_and_doubles_nothing(cluster, built, tmp_path):
    d = fresh(built, tmp_path)
    n = len(list(read_jsonl(d / "samples.jsonl")))
    with FakeServerProcess(delay_s=0.15, max_seconds=120) as srv:
        ex = RayExecutor(f"openai:fake@{srv.base_url}", workers=2, concurrency=2, shard_size=2, max_restarts=0)
        victim = ex.infos[0]["pid"]
        done = []

        def progress(k):
            done.append(k)
            if len(done) == 3:  # early: the victim holds shards in flight
                os.kill(victim, signal.SIGKILL)

        path, stats = pipeline.run(d, ex, "killed", use_cache=False, on_progress=progress)
    assert stats.complete and stats.done == n, stats
    assert counts(path) == Counter({i: 1 for i in records(path)}) and len(counts(path)) == n
    w = stats.workers
    assert w[0]["failures"] >= 1 and w[0]["retired"] and w[1]["samples"] > w[0]["samples"], w
    # why it was retired, on one line: Ray's error kind and its message, not only the kind
    assert w[0]["retired"].split(":")[0].endswith("Error") and len(w[0]["retired"]) > 40 and "\n" not in w[0]["retired"]


def test_a_restarted_worker_answers_the_rest(cluster, built, tmp_path, monkeypatch):
    # one worker, max_restarts=1 (the default): after its death only the actor Ray restarted can finish the
    # run, so it must get the task table again (sent with every shard). The endpoint comes from the driver's
    # OPENAI_BASE_URL, unknown to the cluster's (already running) worker processes.
    d = fresh(built, tmp_path)
    n = len(list(read_jsonl(d / "samples.jsonl")))
    with FakeServerProcess(delay_s=0.1, max_seconds=120) as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url)
        ex = RayExecutor("openai:fake", workers=1, concurrency=2, shard_size=2)
        assert ex.identity() == resolve_model("openai:fake").identity()
        victim = ex.infos[0]["pid"]
        done = []

        def progress(k):
            done.append(k)
            if len(done) == 3:
                os.kill(victim, signal.SIGKILL)

        path, stats = pipeline.run(d, ex, "restarted", use_cache=False, on_progress=progress)
    assert stats.complete and stats.done == n, stats
    assert counts(path) == Counter({i: 1 for i in records(path)}) and len(counts(path)) == n
    (w,) = stats.workers
    assert w["failures"] == 1 and not w["retired"] and w["samples"] == n, w


DRIVER = textwrap.dedent("""
    import os, sys
    import ray
    from recharness.runner import pipeline
    from recharness.execution.ray_executor import RayExecutor
    ray.init(address=sys.argv[1], logging_level="WARNING", configure_logging=False)
    pipeline.run(__import__("pathlib").Path(sys.argv[2]), RayExecutor(sys.argv[3], workers=2, concurrency=2,
                 shard_size=2), "driver", use_cache=False)
""")


def test_driver_killed_then_resume_completes_without_duplicates(cluster, built, tmp_path):
    d = fresh(built, tmp_path)
    n = len(list(read_jsonl(d / "samples.jsonl")))
    path = d / "predictions" / "driver.jsonl"
    with FakeServerProcess(delay_s=0.2, max_seconds=120) as srv:
        spec = f"openai:fake@{srv.base_url}"
        script = tmp_path / "driver.py"
        script.write_text(DRIVER)
        env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
        proc = subprocess.Popen([sys.executable, str(script), cluster.address, str(d), spec], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            if path.exists() and len(path.read_bytes().splitlines()) >= 3:
                break
            time.sleep(0.05)
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        proc.kill()
        proc.wait(timeout=10)
        proc.stderr.close()
        first = len(counts(path))
        assert 0 < first < n
        again, stats = pipeline.run(d, RayExecutor(spec, workers=2, concurrency=4), "driver", use_cache=False)
    assert stats.complete and stats.skipped == first and stats.skipped + stats.done == n
    assert max(counts(again).values()) == 1 and len(counts(again)) == n


def test_a_resume_under_ray_refuses_an_answer_filed_under_another_task(cluster, built, tmp_path):
    """As the local runner (tests/test_damaged_predictions.py): such an answer would count as done and never be
    scored. The Ray driver skipped this check before."""
    from recharness.core.errors import InputError

    d = fresh(built, tmp_path)
    path, _ = pipeline.run(d, FakeBackend("fake"), "fake", use_cache=False)
    recs = list(read_jsonl(path))
    recs[1]["task"] = "direct" if recs[1]["task"] != "direct" else "sequential"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    with pytest.raises(InputError) as e:
        pipeline.run(d, RayExecutor("fake", workers=2, shard_size=4), "fake", use_cache=False)
    assert e.value.field == "task" and recs[1]["id"] in str(e.value)
    assert list(read_jsonl(path)) == recs  # nothing asked, nothing written


@pytest.mark.heavy  # trains every reference twice
def test_train_with_ray_tasks_matches_local(cluster, built, tmp_path):
    from recharness.runner.train import train

    d = fresh(built, tmp_path)
    local = {p.name: list(read_jsonl(p)) for p in train(d, seed=3, latency_runs=5)}
    shutil.rmtree(d / "predictions" / "reference")
    seen = []
    spread = {p.name: list(read_jsonl(p)) for p in train(d, seed=3, latency_runs=5, executor="ray",
                                                          progress=seen.append)}
    assert local.keys() == spread.keys() and len(local) >= 2
    timing = ("train_s", "latency_s", "throughput_per_s")
    for name in local:
        a = [{k: v for k, v in r.items() if k not in timing} for r in local[name]]
        b = [{k: v for k, v in r.items() if k not in timing} for r in spread[name]]
        assert a == b
        assert all(isinstance(r["train_s"], float) for r in spread[name])
    assert any("trained in" in s for s in seen)
    # every model timed once every fit is done, one at a time (before, each was timed beside others' training)
    timed = [k for k, s in enumerate(seen) if "predicting and timing" in s]
    assert len(timed) == len(local) and not any("trained in" in s for s in seen[timed[0]:])
    assert json.dumps(spread)  # plain JSON records


def test_an_actor_posts_inline_unless_its_environment_chose_a_transport():
    from recharness.execution.ray_executor import post_inline_unless_chosen

    for had, want in [({}, "inline"), ({"RECHARNESS_TRANSPORT": ""}, "inline"),
                      ({"RECHARNESS_TRANSPORT": "process"}, "process")]:
        env = dict(had)
        post_inline_unless_chosen(env)
        assert env["RECHARNESS_TRANSPORT"] == want


def test_a_ray_run_stopped_by_another_runs_lock_changes_nothing_on_disk(cluster, built, tmp_path):
    """The run's record (`predictions/NAME.run.json`) is written under the file's lock, before the first answer,
    as on the local path: a Ray run refused by a running one wrote it first."""
    from recharness.core.io import FileLocked, GroupCommitLog
    from recharness.core.rundir import RunDir

    d = fresh(built, tmp_path)
    rd = RunDir(d)
    rd.predictions_dir.mkdir(parents=True, exist_ok=True)
    holder = GroupCommitLog(rd.predictions("m"))  # another run writing the file
    try:
        with pytest.raises(FileLocked):
            pipeline.run(d, RayExecutor("fake", workers=1, shard_size=4), "m", use_cache=False)
        assert not rd.run_record("m").exists()
    finally:
        holder.close()
    _, stats = pipeline.run(d, RayExecutor("fake", workers=1, shard_size=4), "m", use_cache=False)
    assert stats.complete and rd.run_record("m").exists()
