"""A predictions file edited by hand: `score` and a resumed `run` name the file, line and field at fault, where
they used to end in a traceback (a "model" that is no object, a latency that is no number) or leave a sample
counted done by `run` and missing for `score` (an answer filed under another task)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from recharness.cli import app
from recharness.core.errors import InputError


@pytest.fixture()
def answered_run(ml1m, tmp_path):
    r = CliRunner()
    out = tmp_path / "run"
    for args in (["build", "llmrec", "-t", "sequential", "-n", "6", "-o", str(out)],
                 ["run", "llmrec", "-o", str(out), "-m", "fake"]):
        res = r.invoke(app, args)
        assert res.exit_code == 0, res.output
    pf = out / "predictions" / "fake.jsonl"
    return out, pf, [json.loads(x) for x in pf.read_text().splitlines()]


def _write(pf, recs):
    pf.write_text("".join(json.dumps(x) + "\n" for x in recs))


def test_a_model_field_that_is_no_object_is_named_by_score(answered_run):
    out, pf, recs = answered_run
    recs[0]["model"] = "x"
    _write(pf, recs)
    res = CliRunner().invoke(app, ["score", "llmrec", "-o", str(out), "--resamples", "0"])
    assert isinstance(res.exception, InputError) and res.exception.field == "model", res.output


@pytest.mark.parametrize("field, value", [("latency_s", "slow"), ("completion_tokens", True), ("latency_s", "NaN"),
                                          ("latency_s", 10**400)])  # an int no float holds (was: OverflowError)
def test_a_latency_that_is_no_number_is_named_with_its_line(answered_run, field, value):
    out, pf, recs = answered_run
    recs[4][field] = value if value != "NaN" else float("nan")
    _write(pf, recs)
    res = CliRunner().invoke(app, ["score", "llmrec", "-o", str(out), "--resamples", "0"])
    assert isinstance(res.exception, InputError), res.output
    assert (res.exception.line, res.exception.field) == (5, field)


def test_a_number_of_more_digits_than_python_reads_is_named_with_its_line(answered_run):
    """JSON allows any length of digits; Python's int refuses more than 4300 with a ValueError that was a
    traceback here (read_jsonl caught only decoding errors)."""
    out, pf, recs = answered_run
    lines = pf.read_text().splitlines()
    lines[2] = lines[2].replace('"latency_s":', '"latency_s": 1' + "0" * 5000 + ', "was":', 1)
    assert "0" * 5000 in lines[2]
    pf.write_text("\n".join(lines) + "\n")
    for args in (["score", "llmrec", "-o", str(out), "--resamples", "0"], ["run", "llmrec", "-o", str(out), "-m", "fake"]):
        res = CliRunner().invoke(app, args)
        assert isinstance(res.exception, InputError), res.output
        assert res.exception.line == 3 and "more digits than Python reads" in str(res.exception)


def test_an_answer_filed_under_another_task_stops_a_resume(answered_run):
    out, pf, recs = answered_run
    recs[2]["task"] = "nosuchtask"
    _write(pf, recs)
    res = CliRunner().invoke(app, ["run", "llmrec", "-o", str(out), "-m", "fake"])
    assert isinstance(res.exception, InputError) and res.exception.field == "task", res.output
    assert recs[2]["id"] in str(res.exception)


def test_ctrl_c_says_the_run_is_interrupted_and_resumable(ml1m, tmp_path):
    """SIGINT mid-run: exit 130 with a line saying so (typer returns 130 without raising, which used to exit
    silently on a frozen progress bar), and the answers committed so far are kept."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from recharness.testing.fake_server import FakeServerProcess

    out = tmp_path / "run"
    assert CliRunner().invoke(app, ["build", "llmrec", "-t", "sequential", "-n", "30", "-o", str(out)]).exit_code == 0
    with FakeServerProcess(delay_s=0.2) as srv:
        p = subprocess.Popen([sys.executable, "-m", "recharness", "run", "llmrec", "-o", str(out), "-m",
                              f"openai:m@{srv.base_url}", "-c", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env={**os.environ, "RECHARNESS_CACHE": str(tmp_path / "cache.sqlite")})
        pf = out / "predictions" / "openai-m.jsonl"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (pf.exists() and pf.read_text().count("\n") >= 2):
            time.sleep(0.1)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
        assert p.returncode == 130, err
        assert "interrupted" in err and "resume" in err, err
        kept = [json.loads(x)["id"] for x in pf.read_text().splitlines()]
        assert 2 <= len(kept) < 30
        # the resume the message promises: the rest answered, the kept answers neither asked again nor doubled
        res = CliRunner().invoke(app, ["run", "llmrec", "-o", str(out), "-m", f"openai:m@{srv.base_url}", "-c", "8"],
                                 env={"RECHARNESS_CACHE": str(tmp_path / "cache.sqlite")})
        assert res.exit_code == 0, res.output
        assert f"{30 - len(kept)} new predictions (0 from cache, {len(kept)} already done" in " ".join(res.output.split())
    ids = [json.loads(x)["id"] for x in pf.read_text().splitlines()]
    assert ids[:len(kept)] == kept and len(ids) == len(set(ids)) == 30
