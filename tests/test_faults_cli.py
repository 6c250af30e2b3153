"""`recharness run` as a user runs it, under faults: kill -9, two runs at once, a rebuild in place,
a server that is down, bad arguments. Every sample must end exactly once."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from recharness.core.io import read_jsonl
from recharness.testing.fake_server import FakeServerProcess

pytestmark = pytest.mark.slow


def cli(*args: str, check: bool = False, **kw) -> subprocess.CompletedProcess:
    p = subprocess.run([sys.executable, "-m", "recharness", *args], capture_output=True, text=True, timeout=300, **kw)
    if check and p.returncode != 0:
        raise AssertionError(f"recharness {' '.join(args)} → {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


@pytest.fixture
def built(ml1m, tmp_path):
    def make(n: int, seed: int = 0, out: Path | None = None) -> Path:
        out = out or tmp_path / "run"
        cli("build", "llmrec", "-d", "ml-1m", "-t", "sequential", "-n", str(n), "--seed", str(seed), "-o", str(out),
            check=True)
        return out
    return make


def sample_ids(run: Path) -> list[str]:
    return [r["id"] for r in read_jsonl(run / "samples.jsonl")]


def pred_ids(path: Path) -> Counter:
    return Counter(r["id"] for r in read_jsonl(path)) if path.exists() else Counter()


def run_args(run: Path, url: str, *extra: str) -> list[str]:
    return ["run", "llmrec", "-d", "ml-1m", "-o", str(run), "-m", f"openai:fake@{url}", "--no-cache", *extra]


def test_kill9_at_random_moments_then_resume_exactly_once(built):
    run = built(150)
    pred = run / "predictions" / "openai-fake.jsonl"
    rng = random.Random(7)
    kills = 0
    with FakeServerProcess(delay_s=0.01) as srv:
        for _ in range(6):
            p = subprocess.Popen([sys.executable, "-m", "recharness", *run_args(run, srv.base_url, "-c", "4")],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(rng.uniform(0.3, 1.6))
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                kills += 1
            p.wait()
            counts = pred_ids(pred)  # after every kill: whole lines, nothing twice
            assert not counts or max(counts.values()) == 1
        done = cli(*run_args(run, srv.base_url), check=True)
    assert kills >= 3
    assert pred_ids(pred) == Counter({i: 1 for i in sample_ids(run)})
    assert "already done" in done.stdout


def test_second_run_on_the_same_file_exits_at_once(built):
    run = built(30)
    pred = run / "predictions" / "openai-fake.jsonl"
    # 30 answers one at a time at 0.4 s: the first run lasts ≥ 12 s, longer than a second CLI takes to start
    with FakeServerProcess(delay_s=0.4) as srv:
        first = subprocess.Popen([sys.executable, "-m", "recharness", *run_args(run, srv.base_url, "-c", "1")],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while not pred.exists() or not pred.stat().st_size:
            assert time.monotonic() < deadline and first.poll() is None
            time.sleep(0.05)
        t0 = time.monotonic()
        second = cli(*run_args(run, srv.base_url))
        assert time.monotonic() - t0 < 30
        first.communicate(timeout=120)
    assert second.returncode == 2 and "being written by another `recharness run`" in second.stderr
    assert first.returncode == 0
    assert pred_ids(pred) == Counter({i: 1 for i in sample_ids(run)})


def test_rebuild_in_place_sets_the_old_answers_aside_and_a_stray_old_file_is_refused(built):
    run = built(10, seed=0)
    pred = run / "predictions" / "openai-fake.jsonl"
    with FakeServerProcess() as srv:
        cli(*run_args(run, srv.base_url), check=True)
        first_fp = json.loads((run / "build.json").read_text())["fingerprint"]
        old = pred.read_bytes()
        built(10, seed=1, out=run)  # another build: the first one's answers go to earlier-builds/<its fingerprint>/
        kept = run / "earlier-builds" / first_fp / "predictions" / pred.name
        assert kept.read_bytes() == old and not pred.exists()
        cli(*run_args(run, srv.base_url), check=True)  # the same --name answers the new samples
        assert sorted(r["id"] for r in read_jsonl(pred)) == sorted(sample_ids(run))
        assert cli("score", "llmrec", "-d", "ml-1m", "-o", str(run), "--resamples", "0").returncode == 0
        # an old build's file put back by hand beside the new samples: refused, never mixed
        second = pred.read_bytes()
        pred.write_bytes(old)
        again = cli(*run_args(run, srv.base_url))
        assert again.returncode == 2 and "another build" in again.stderr and "--name" in again.stderr
        scored = cli("score", "llmrec", "-d", "ml-1m", "-o", str(run))
        assert scored.returncode == 2 and "another build" in scored.stderr
        pred.write_bytes(second)
    built(10, seed=0, out=run)  # the first build again: its answers come back, the second's are kept aside
    assert pred.read_bytes() == old and json.loads((run / "build.json").read_text())["fingerprint"] == first_fp


def test_server_down_and_exhausted_retries_have_their_own_exit_codes(built, refused_url):
    run = built(12)
    url = refused_url
    down = cli(*run_args(run, url))
    assert down.returncode == 4
    assert f"connection refused by {url}" in down.stderr and "rerun to finish" in down.stderr
    with FakeServerProcess(faults={"503": 0.5}, transient=100) as srv:
        part = cli(*run_args(run, srv.base_url, "--max-attempts", "1"))
    assert part.returncode == 3 and "samples remain unanswered" in part.stderr and "http_503" in part.stderr
    with FakeServerProcess() as srv:
        cli(*run_args(run, srv.base_url), check=True)
    assert pred_ids(run / "predictions" / "openai-fake.jsonl") == Counter({i: 1 for i in sample_ids(run)})


def test_credentials_in_the_url_are_never_shown_or_stored(built, tmp_path):
    run = built(5)
    env = {**os.environ, "RECHARNESS_CACHE": str(tmp_path / "cache.sqlite")}
    with FakeServerProcess() as srv:
        url = srv.base_url.replace("http://", "http://alice:hunter2@")
        r = cli("run", "llmrec", "-d", "ml-1m", "-o", str(run), "-m", f"openai:fake@{url}", check=True, env=env)
    s = cli("score", "llmrec", "-d", "ml-1m", "-o", str(run), check=True, env=env)
    blobs = [r.stdout, r.stderr, s.stdout, s.stderr] + [p.read_bytes().decode("utf-8", "replace")
                                                        for p in list(run.rglob("*")) + list(tmp_path.glob("cache*"))
                                                        if p.is_file()]
    assert not [b for b in blobs if "hunter2" in b]
    assert any("***@127.0.0.1" in b for b in blobs)


@pytest.mark.parametrize("args, message", [
    (["-n", "-5"], "Invalid value for '--limit' / '-n'"),
    (["--max-retries", "-1"], "Invalid value for '--max-retries'"),
    (["--max-attempts", "0"], "Invalid value for '--max-attempts'"),
    (["--name", "../escape"], "--name '../escape'"),
    (["--name", "a/b"], "--name 'a/b'"),
])
def test_bad_run_arguments_get_one_line(built, args, message):
    run = built(3)
    r = cli(*run_args(run, "http://127.0.0.1:9/v1", *args))
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (run.parent / "escape.jsonl").exists() and not (run / "predictions" / "a").exists()


def test_markup_in_errors_is_printed_literally(tmp_path):
    r = cli("run", "llmrec", "-d", "no-such-[hf]-data", "-o", str(tmp_path / "x"), "-m", "hf:[x]")
    assert r.returncode == 2
    assert "[hf]" in r.stderr or "[x]" in r.stderr


@pytest.mark.parametrize("status", [401, 404, 501, 400, 422])  # 400 / 422: the server says the model is unknown
def test_a_refusing_server_exits_2_with_nothing_committed_then_a_healthy_one_answers_all(built, status):
    run = built(12)
    pred = run / "predictions" / "openai-fake.jsonl"
    with FakeServerProcess(refuse=status) as srv:
        p = cli(*run_args(run, srv.base_url))
    err = [x for x in p.stderr.splitlines() if x.startswith("error")]
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert len(err) == 1 and "refuses the request for model 'fake'" in err[0] and f"HTTP {status}:" in err[0], err
    assert srv.base_url.split("//")[1] in err[0]  # the endpoint is named
    assert pred_ids(pred) == Counter()  # nothing committed: no "invalid answers" to keep
    with FakeServerProcess() as srv:
        cli(*run_args(run, srv.base_url), check=True)
    assert pred_ids(pred) == Counter({i: 1 for i in sample_ids(run)})


def test_a_server_without_log_probabilities_exits_2_with_nothing_committed_then_one_with_them_answers_all(
        ml1m, tmp_path):
    """RecBench ctr asks P(Yes) by log-probabilities: a server that ignores `logprobs` cannot answer it at all."""
    run = tmp_path / "ctr"
    cli("build", "recbench", "-d", "ml-1m", "-t", "ctr", "-n", "3", "--option", "train_pairs=2000", "-o", str(run),
        check=True)
    pred = run / "predictions" / "openai-fake.jsonl"
    args = ["run", "recbench", "-d", "ml-1m", "-o", str(run), "-m", "openai:fake@{}", "--no-cache"]
    with FakeServerProcess(no_logprobs=True) as srv:
        p = cli(*[a.format(srv.base_url) for a in args])
    err = [x for x in p.stderr.splitlines() if x.startswith("error")]
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert len(err) == 1 and "answers model 'fake' with no log-probabilities: HTTP 200" in err[0], err
    assert srv.base_url.split("//")[1] in err[0]  # the endpoint is named
    assert pred_ids(pred) == Counter()  # not one invalid `no_logprobs` answer per sample
    with FakeServerProcess() as srv:
        cli(*[a.format(srv.base_url) for a in args], check=True)
    recs = list(read_jsonl(pred))
    assert Counter(r["id"] for r in recs) == Counter({i: 1 for i in sample_ids(run)}) and len(recs) >= 3
    # the fake server's top log-probs: Yes -0.5, No -1.0 → P(Yes) = 1 / (1 + e^-0.5)
    assert all(r["valid"] and r["parsed"]["p_yes"] == pytest.approx(0.6224593312) for r in recs)


def test_transient_failures_that_outlive_their_retries_exit_3_and_the_rerun_answers_them(built):
    run = built(6)
    pred = run / "predictions" / "openai-fake.jsonl"
    with FakeServerProcess(faults={"429": 0.5}, transient=99) as srv:
        p = cli(*run_args(run, srv.base_url, "--max-attempts", "2"))
    assert p.returncode == 3 and "samples remain unanswered" in p.stderr and "http_429" in p.stderr, p.stderr
    left = len(sample_ids(run)) - sum(pred_ids(pred).values())
    assert 0 < left < 6 and f"{left} samples remain unanswered" in " ".join(p.stderr.split())
    with FakeServerProcess() as srv:
        cli(*run_args(run, srv.base_url), check=True)
    assert pred_ids(pred) == Counter({i: 1 for i in sample_ids(run)})


def test_redo_invalid_asks_again_only_the_invalid_answers(built):
    run = built(6)
    pred = run / "predictions" / "openai-fake.jsonl"
    with FakeServerProcess(answer="I am sorry, I cannot recommend anything.") as srv:  # a refusal: invalid
        cli(*run_args(run, srv.base_url), check=True)
    assert all(not r["valid"] for r in read_jsonl(pred))
    with FakeServerProcess() as srv:
        cli(*run_args(run, srv.base_url, "--redo-invalid"), check=True)
    recs = list(read_jsonl(pred))
    assert Counter(r["id"] for r in recs) == Counter({i: 1 for i in sample_ids(run)})
    assert all(r["output"].startswith("1. Fargo") for r in recs)


@pytest.mark.parametrize("args, says", [
    (["--base-url", "ftp://127.0.0.1/v1"], "over http:// or https://"),
    (["--base-url", ""], "--base-url is empty"),
])
def test_a_bad_endpoint_is_one_line_exit_2(built, args, says):
    run = built(3)
    p = cli("run", "llmrec", "-o", str(run), "-m", "openai:fake", "--no-cache", *args)
    assert p.returncode == 2 and says in p.stderr and "Traceback" not in p.stderr, p.stderr


def test_a_base_url_that_contradicts_the_spec_is_refused(built):
    run = built(3)
    p = cli("run", "llmrec", "-o", str(run), "-m", "openai:fake@http://127.0.0.1:9/v1", "--base-url",
            "http://127.0.0.1:8/v1")
    assert p.returncode == 2 and "names its server, and --base-url" in " ".join(p.stderr.split()), p.stderr


def test_credentials_in_the_url_are_the_bearer_key_and_stay_out_of_the_request_url():
    from recharness.models.openai_compat import OpenAICompatibleBackend

    b = OpenAICompatibleBackend("m", base_url="http://user:sekret@127.0.0.1:9/v1", api_key_env="NO_SUCH_KEY_VAR")
    assert b._headers["authorization"] == "Bearer sekret" and "sekret" not in b._url and b._url.startswith("http://127")
    assert "sekret" not in str(b.identity())
