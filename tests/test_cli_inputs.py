"""Bad command-line input gets one `error:` line and exit 2, never a traceback or a hang (issue: honest
results, section 7). Each case as a user would type it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from recharness.runner import pipeline

pytestmark = pytest.mark.slow


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "recharness", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


def one_error(p: subprocess.CompletedProcess, says: str) -> None:
    errors = [x for x in p.stderr.splitlines() if x.startswith("error")]
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert len(errors) == 1 and says in " ".join(p.stderr.split()), p.stderr


@pytest.fixture(scope="module")
def built(ml1m, tmp_path_factory):
    d = tmp_path_factory.mktemp("in") / "run"
    pipeline.build("llmrec", "ml-1m", d, tasks=["sequential"], seed=0, limit=3)
    return d


@pytest.mark.parametrize("c", ["0", "-3"])
def test_concurrency_below_one(built, c):
    one_error(cli("run", "llmrec", "-o", str(built), "-m", "fake", "-c", c), "'--concurrency' / '-c'")


def test_a_negative_seed(tmp_path, ml1m):
    one_error(cli("build", "llmrec", "-o", str(tmp_path / "r"), "-n", "2", "--seed", "-1"), "'--seed'")


def test_rating_on_a_dataset_without_ratings(tmp_path, llmrank_games):
    one_error(cli("build", "llmrec", "-d", "llmrank-games", "-t", "rating", "-o", str(tmp_path / "r"), "-n", "3"),
              "llmrank-games has no ratings (implicit feedback only)")


def test_more_recommendations_than_the_catalog_has(tmp_path, ml1m):
    one_error(cli("build", "llmrec", "-t", "sequential", "-o", str(tmp_path / "r"), "-n", "2", "--option",
                  "n_recs=5000"), "--option n_recs=5000: the ml-1m catalog has 3883 items")


def test_a_corrupted_response_cache(built, tmp_path):
    bad = tmp_path / "cache.sqlite"
    bad.write_bytes(b"this is not sqlite at all" * 100)
    one_error(cli("run", "llmrec", "-o", str(built), "-m", "fake", "--name", "c", env={"RECHARNESS_CACHE": str(bad)}),
              "the response cache is not a readable SQLite file")


def test_recharness_home_pointing_at_a_file(tmp_path):
    f = tmp_path / "home"
    f.write_text("x")
    one_error(cli("build", "llmrec", "-o", str(tmp_path / "r"), "-n", "2", env={"RECHARNESS_HOME": str(f)}),
              "is a file, not a directory")


def test_a_run_directory_that_cannot_be_written(built, tmp_path):
    import shutil

    d = tmp_path / "run"
    shutil.copytree(built, d)
    shutil.rmtree(d / "predictions", ignore_errors=True)
    (d / "predictions").write_text("a file where the predictions folder goes")
    one_error(cli("run", "llmrec", "-o", str(d), "-m", "fake"), "predictions")


def test_report_runs_takes_every_path(built, tmp_path):
    import shutil

    from recharness.models.fake import FakeBackend
    from recharness.report.tables import write_scores

    dirs = []
    for k in range(3):
        d = tmp_path / f"run {k}"  # a space in the name is kept, not split
        shutil.copytree(built, d)
        shutil.rmtree(d / "predictions", ignore_errors=True)
        pipeline.run(d, FakeBackend("fake"), "fake", use_cache=False)
        write_scores(pipeline.score(d, resamples=0), d)
        dirs.append(str(d))
    p = cli("report", "--runs", *dirs, "-o", str(tmp_path / "board"))
    assert p.returncode == 0 and "leaderboard of 3 runs" in p.stdout, p.stdout + p.stderr
    one_error(cli("report", "llmrec", "perrecbench"), "report takes one SUITE")
