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
    assert "◆" not in first  # 4 users: no interval, so no strongest reference and no verdict
    assert "not used anywhere" not in first  # no generation flag given: nothing to warn about (it warned)
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
    assert p.returncode == 2 and "--suites nosuch: nosuch is none of" in p.stderr and "Traceback" not in p.stderr


def test_another_limit_into_the_same_out_rebuilds_and_keeps_the_earlier_answers(ml1m, tmp_path):
    """`eval --limit 2` then `--limit 3` into one --out: the second rebuilds and answers (exit 0, no answers of
    another build refused), setting the first build's answers aside with one line; `--limit 2` again puts them
    back: no model call, the same file."""
    out = tmp_path / "ev"
    args = ("-m", "fake", "--suites", "llmrec", "-o", str(out), "--no-train-references")
    ev(*args, "--limit", "2")
    pred = out / "llmrec" / "predictions" / "fake.jsonl"
    first = pred.read_bytes()
    assert len(first.splitlines()) == 4

    second = ev(*args, "--limit", "3")
    assert "llmrec: sequential, direct · 3 per task · built · new answers: fake 6" in second, second
    said = [x for x in second.splitlines() if "earlier build" in x]
    assert len(said) == 1 and "limit 2, seed 0" in said[0] and "earlier-builds" in said[0], second
    kept = list((out / "llmrec" / "earlier-builds").glob("*/predictions/fake.jsonl"))
    assert len(kept) == 1 and kept[0].read_bytes() == first  # set aside, whole
    assert len(pred.read_bytes().splitlines()) == 6

    third = ev(*args, "--limit", "2")
    assert "2 per task · built · nothing to answer (no model call)" in third, third
    assert pred.read_bytes() == first
    assert not kept[0].exists() and len(list((out / "llmrec" / "earlier-builds").glob("*/predictions/fake.jsonl"))) == 1
    again = ev(*args, "--limit", "2")  # the same command again: nothing redone, nothing moved
    assert "build kept · nothing to answer (no model call)" in again and "earlier build" not in again


def test_set_aside_and_put_back_move_every_answer_of_a_build(tmp_path):
    import json

    from recharness.core.rundir import RunDir
    from recharness.evaluate import put_back, set_aside

    rd = RunDir(tmp_path / "run")
    rd.path.mkdir()
    assert set_aside(rd) is None  # no build: nothing to keep
    rd.build_json.write_text(json.dumps({"suite": "llmrec", "dataset": "ml-1m", "tasks": ["direct"], "limit": 2,
                                         "seed": 0, "fingerprint": "aaaa"}))
    files = {rd.predictions("m"): "m", rd.reference("popularity"): "ref", rd.train_json("ease"): "{}",
             rd.judgments("m", "j"): "judged", rd.import_report("x"): "{}"}
    for p, text in files.items():
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    info, where = set_aside(rd)
    assert info["limit"] == 2 and where == rd.earlier_build("aaaa")
    assert not any(p.exists() for p in files)
    assert (where / "predictions" / "reference" / "popularity.jsonl").read_text() == "ref"
    assert (where / "models" / "ease" / "train.json").exists() and (where / "judgments").is_dir()
    assert put_back(rd, "bbbb") is None  # another build: nothing of it was kept
    rd.predictions_dir.mkdir()
    rd.predictions("m").write_text("written by the new build")  # e.g. outputs a builder imports itself
    assert put_back(rd, "aaaa") == where
    assert rd.predictions("m").read_text() == "written by the new build"  # the build's own file wins…
    assert (where / "predictions" / "m.jsonl").read_text() == "m"  # …and the kept one stays kept, not lost
    assert all(p.read_text() == t for p, t in files.items() if p != rd.predictions("m"))


def test_a_rebuild_that_fails_leaves_the_earlier_answers_in_place(ml1m, tmp_path, monkeypatch):
    """The earlier build's answers are set aside before a rebuild; when that rebuild fails (an empty build, a
    missing dataset, Ctrl-C) the directory still holds the earlier build, so its answers go back at once — and
    a directory left stranded by a kill comes back on the next eval of its build."""
    from recharness.core.errors import ConfigError
    from recharness.core.rundir import RunDir
    from recharness.evaluate import evaluate, plan
    from recharness.runner import pipeline

    out = tmp_path / "ev"
    quiet = dict(dataset="ml-1m", train_references=False, say=lambda *_: None, log=lambda *_: None)
    evaluate(["fake"], plan("llmrec", out, 2), **quiet)
    rd = RunDir(out / "llmrec")
    first = rd.predictions("fake").read_bytes()
    fp = rd.build_info()["fingerprint"]

    def fails(*a, **k):
        raise ConfigError("no sample")

    monkeypatch.setattr(pipeline, "build", fails)
    with pytest.raises(ConfigError):
        evaluate(["fake"], plan("llmrec", out, 3), **quiet)
    assert rd.predictions("fake").read_bytes() == first and not rd.earlier_build(fp).exists()
    monkeypatch.undo()

    # a kill between setting aside and rebuilding: the next eval of the same build puts them back, asks nothing
    from recharness.evaluate import set_aside

    set_aside(rd)
    assert not rd.predictions("fake").exists()
    runs = evaluate(["fake"], plan("llmrec", out, 2), **quiet)
    assert rd.predictions("fake").read_bytes() == first and runs[0].answered["fake"][0] == 0


def test_summary_marks_the_strongest_reference_and_each_models_verdict(ml1m, tmp_path):
    """With enough users for intervals (12), the summary marks each task's strongest reference ◆ and puts the
    model's paired-test verdict against it in its cell (as scores.md's sentence), with one legend line; with 4
    users there is no interval, so no strongest reference and no mark."""
    import json
    import re

    out = tmp_path / "ev"
    text = ev("-m", "fake", "--suites", "llmrec", "-o", str(out), "--limit", "12", "--no-train-references")
    assert "◆ = the strongest reference of a task" in text
    rows = json.loads((out / "llmrec" / "scores.json").read_text())
    said = {"beats": ">", "below": "<", "not distinguishable": "≈"}
    for task in ("sequential", "direct"):
        strongest = next(r["method"] for r in rows if r["task"] == task and r["extra"].get("strongest_reference"))
        verdict = next(r["extra"]["vs_strongest_reference"]["verdict"] for r in rows
                       if r["task"] == task and r["method"] == "fake")
        line = next(x for x in text.splitlines() if "│ llmrec" in x and f" {task} " in x)
        assert re.search(rf"{strongest} ◆ \d", line), line
        assert f"{said[verdict]} ◆" in line, line


def test_eval_shows_how_far_a_model_has_answered(ml1m, tmp_path):
    """While a model answers (eval's longest step) the status line counts its answers, run by run."""
    from recharness.evaluate import evaluate, plan

    runs = plan("recbench-ctr", tmp_path / "ev", 2)
    lines: list[str] = []
    evaluate(["fake"], runs, dataset="ml-1m", train_references=False, say=lambda m: None, progress=lines.append)
    total = int(lines[0].rsplit("/", 1)[1].split()[0])
    assert lines[0] == f"{runs[0].label}: fake 0/{total} answered" and total > 0
    assert lines[-1] == f"{runs[0].label}: fake {total}/{total} answered"
    assert len(lines) == total + 1  # one line per answer after the first


def test_eval_checks_its_options_before_it_logs_and_a_stale_run_beside_it_leaves_the_page(ml1m, tmp_path):
    """(1) `--references bogus` is refused before anything is written: the command, which did nothing, is in no
    run's "What was run". (2) A run of another suite under --out rebuilt since its scores (its scores.json now
    of another build) is left off the leaderboard, said in one line; the eval's own work and summary stand
    (it exited 2 after all its work, with no summary)."""
    out = tmp_path / "ev"
    p = subprocess.run([sys.executable, "-m", "recharness", "eval", "-m", "fake", "--suites", "llmrec", "-o",
                        str(out), "--references", "bogus"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "--references bogus" in p.stderr, p.stderr
    assert not list(out.rglob("commands.jsonl"))
    ev("-m", "fake", "--suites", "llmrec", "-o", str(out), "--limit", "2", "--no-train-references")
    b = subprocess.run([sys.executable, "-m", "recharness", "build", "llmrec", "-d", "ml-1m", "-o",
                        str(out / "llmrec"), "--limit", "3"], capture_output=True, text=True, timeout=300)
    assert b.returncode == 0, b.stderr
    second = ev("-m", "fake", "--suites", "perrecbench", "-o", str(out), "--limit", "2", "--no-train-references")
    assert "left off the page:" in second and "llmrec" in second.split("left off the page:")[1].splitlines()[0]
    assert "Summary" in second and "perrecbench" in (out / "leaderboard.html").read_text()


def test_two_specs_of_one_name_are_refused_and_an_unreachable_server_exits_as_run_does(tmp_path):
    """One model on two servers answered into one file: the second found every sample done and was never asked,
    and both columns showed the first's numbers. A server that is down made eval exit 2, the usage error's code;
    `run` exits 4."""
    from recharness.testing.refused import refusing_url

    out = tmp_path / "ev"
    with refusing_url() as url_a, refusing_url() as url_b:
        a, b = f"openai:m@{url_a}", f"openai:m@{url_b}"
        p = subprocess.run([sys.executable, "-m", "recharness", "eval", "-m", a, "-m", b, "--suites", "llmrec",
                            "-o", str(out), "--limit", "2", "--no-train-references"], capture_output=True, text=True,
                           timeout=120)
        assert p.returncode == 2 and "both answer as 'openai-m'" in " ".join(p.stderr.split()), p.stderr
        assert not list(out.rglob("commands.jsonl"))  # refused before anything was written
        p = subprocess.run([sys.executable, "-m", "recharness", "eval", "-m", a, "--suites", "llmrec", "-o",
                            str(out), "--limit", "2", "--no-train-references"], capture_output=True, text=True,
                           timeout=300)
        assert p.returncode == 4 and "unanswered" in p.stderr and "Traceback" not in p.stderr, p.stderr


def test_eval_says_its_own_way_out_when_a_models_answers_were_made_otherwise(ml1m, tmp_path):
    """Its advice was run's "another --name, or --overwrite", options eval does not have."""
    out = tmp_path / "ev"
    ev("-m", "fake", "--suites", "llmrec", "-o", str(out), "--limit", "2", "--no-train-references")
    p = subprocess.run([sys.executable, "-m", "recharness", "eval", "-m", "fake", "--suites", "llmrec", "-o", str(out),
                        "--limit", "2", "--no-train-references", "--max-tokens", "5"], capture_output=True, text=True,
                       timeout=300)
    msg = " ".join(p.stderr.split())
    assert p.returncode == 2 and "answers were made with" in msg and "eval into another --out" in msg, msg
    assert "--overwrite" not in msg
    import json

    cmds = [json.loads(x)["command"] for x in (out / "llmrec" / "commands.jsonl").read_text().splitlines()]
    assert "--max-tokens 5" in cmds[-2] and cmds[-1].startswith("# the eval above stopped before its end")


def test_eval_says_which_new_answers_came_from_the_cache(ml1m, tmp_path):
    """Into a fresh --out, a model asked before answers from the response cache: the step line said "new
    answers: fake 4" as if the model had been called."""
    ev("-m", "fake", "--suites", "llmrec", "-o", str(tmp_path / "a"), "--limit", "2", "--no-train-references")
    again = ev("-m", "fake", "--suites", "llmrec", "-o", str(tmp_path / "b"), "--limit", "2", "--no-train-references")
    assert "new answers: fake 4 (4 from the cache" in again, again
