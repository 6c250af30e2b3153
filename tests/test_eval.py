"""`recharness eval`: one command from model specs to one report; re-running asks no model again and a
new -m adds a column. Through the CLI as a user runs it (the fake model: the harness, not a model)."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow


def ev(*args: str) -> str:
    p = subprocess.run([sys.executable, "-m", "recharness", "eval", *args], capture_output=True, text=True,
                       timeout=600, env={**__import__("os").environ, "COLUMNS": "200"})
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stderr + p.stdout  # the steps (stderr), then the summary and the report's path (stdout)


def test_eval_then_again_makes_no_model_call_and_a_new_model_adds_a_column(ml1m, tmp_path):
    out = tmp_path / "ev"
    first = ev("-m", "fake", "--suites", "llmrec,perrecbench", "-o", str(out))
    lines = first.splitlines()
    assert len(lines) <= 40, first
    assert "llmrec: sequential, direct · 4 per task · built · new answers: fake 8" in first
    pred = out / "llmrec" / "predictions" / "fake.jsonl"
    before = pred.read_bytes()

    again = ev("-m", "fake", "--suites", "llmrec,perrecbench", "-o", str(out))
    assert again.count("build kept · nothing to answer (no model call)") == 2, again
    assert pred.read_bytes() == before

    both = ev("-m", "fake", "-m", "fake:b", "--suites", "llmrec", "-o", str(out))
    assert "new answers: fake 0, fake_b 8" in both
    head = next(x for x in both.splitlines() if "suite" in x and "metric" in x)
    assert "fake" in head and "fake_b" in head and "references" in head
    html = (out / "leaderboard.html").read_text()
    assert "fake_b" in html and "perrecbench" in html  # one report: the earlier run of the other suite stays
    assert (out / "eval.log").read_text().count("already done") >= 2


def test_eval_names_an_unknown_suite(tmp_path):
    p = subprocess.run([sys.executable, "-m", "recharness", "eval", "-m", "fake", "--suites", "nosuch", "-o",
                        str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "--suites nosuch: none of" in p.stderr and "Traceback" not in p.stderr
