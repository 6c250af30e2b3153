"""A suite defined under tests/ (toy_suite.py), driven through the CLI with no change to src/:
build → run (fake model) → score → report → compare → score --predictions. Suites are plug-ins."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from recharness.cli import app
from recharness.core.io import read_jsonl

sys.path.insert(0, str(Path(__file__).parent))
import toy_suite  # noqa: E402

runner = CliRunner()


def invoke(*args: str) -> str:
    res = runner.invoke(app, list(args), catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.output


@pytest.fixture
def toy(ml1m):
    toy_suite.register()
    yield toy_suite
    toy_suite.unregister()


def _accuracy(samples: list[dict], recs: dict[str, dict]) -> float:
    """By hand: the share of samples whose valid answer is the target (a missing one is wrong)."""
    hits = [1.0 if (r := recs.get(s["id"])) and r.get("valid") and r.get("parsed") == s["target"] else 0.0
            for s in samples]
    return sum(hits) / len(hits)


def test_a_suite_from_tests_runs_every_stage_through_the_cli(toy, tmp_path):
    d = tmp_path / "run"
    invoke("build", "toy", "-d", "ml-1m", "-o", str(d), "--limit", "6")
    samples = list(read_jsonl(d / "samples.jsonl"))
    assert len(samples) == 6 and all(s["target"] in s["candidates"] for s in samples)

    invoke("run", "toy", "-d", "ml-1m", "-o", str(d), "-m", "fake")
    fake = {r["id"]: r for r in read_jsonl(d / "predictions" / "fake.jsonl")}
    assert set(fake) == {s["id"] for s in samples}

    invoke("score", "toy", "-d", "ml-1m", "-o", str(d))
    rows = {r["method"]: r for r in json.loads((d / "scores.json").read_text())}
    assert set(rows) == {"fake", "popularity", "random"}
    assert rows["fake"]["metrics"]["accuracy"] == pytest.approx(_accuracy(samples, fake))
    assert rows["popularity"]["kind"] == "reference" and 0.0 <= rows["popularity"]["metrics"]["accuracy"] <= 1.0
    assert "accuracy" in rows["fake"]["ci"]  # the task's own units give the interval

    invoke("report", "toy", "-d", "ml-1m", "-o", str(d))
    html = (d / "report.html").read_text()
    assert "guess" in html and "accuracy" in html

    out = invoke("compare", str(d), "--models", "fake", "--models", "popularity")
    assert "accuracy" in out

    # another tool's answers: the candidate's number as text, parsed by the task's own parser
    answers = [{"id": s["id"], "answer": str(s["candidates"].index(s["target"]) + 1 if k % 2 == 0 else 1)}
               for k, s in enumerate(samples)]
    src = tmp_path / "theirs.jsonl"
    src.write_text("".join(json.dumps(a) + "\n" for a in answers))
    invoke("score", "toy", "-d", "ml-1m", "-o", str(d), "--predictions", str(src), "--name", "theirs")
    rows = {r["method"]: r for r in json.loads((d / "scores.json").read_text())}
    theirs = {r["id"]: r for r in read_jsonl(d / "predictions" / "theirs.jsonl")}
    want = _accuracy(samples, theirs)
    assert want >= 0.5  # every other answer is the target by construction
    assert rows["theirs"]["metrics"]["accuracy"] == pytest.approx(want)


def test_the_toy_suite_is_gone_after_the_test(ml1m):
    from recharness.tasks.registry import suites

    assert "toy" not in suites()


def test_compare_takes_the_two_methods_as_the_readme_writes_them(toy, tmp_path):
    d = tmp_path / "run"
    invoke("build", "toy", "-d", "ml-1m", "-o", str(d), "--limit", "4")
    invoke("run", "toy", "-d", "ml-1m", "-o", str(d), "-m", "fake")
    for args in (["--models", "fake", "popularity"], ["--models", "fake,popularity"], ["fake", "popularity"]):
        out = invoke("compare", str(d), *args)
        assert "fake" in out and "popularity" in out and "accuracy" in out
