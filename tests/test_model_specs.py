"""Everything that answers is a model spec: `-m baseline:NAME` is an ordinary row of `recharness run`,
resumable after kill -9 with every sample exactly once, and answers exactly as the baseline does."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter

import pytest
from typer.testing import CliRunner

from recharness.baselines import TrainData, fit
from recharness.cli import app
from recharness.core.io import read_jsonl
from recharness.core.rundir import RunDir
from recharness.runner import pipeline
from recharness.tasks.llmrec.sequential import SequentialTask
from recharness.tasks.recbench.seqrec import SeqrecTask

pytestmark = pytest.mark.slow
runner = CliRunner()
SMALL = {"hidden": 16, "inner": 32, "batch_size": 512, "max_epochs": 2, "patience": 1, "dropout": 0.1, "lr": 5e-3}


def invoke(*args: str) -> str:
    res = runner.invoke(app, list(args), catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.output


def test_popularity_as_a_model_row_answers_as_the_reference_does(ml1m, tmp_path):
    d = tmp_path / "run"
    invoke("build", "llmrec", "-d", "ml-1m", "-t", "sequential", "-n", "12", "-o", str(d))
    invoke("run", "llmrec", "-d", "ml-1m", "-o", str(d), "-m", "baseline:popularity")
    recs = {r["id"]: r for r in read_jsonl(d / "predictions" / "baseline_popularity.jsonl")}
    _, samples = pipeline.load_build(d)
    want = fit("popularity", TrainData.leave_last_out(ml1m))[0].predict(samples, SequentialTask())
    assert {i: r["parsed"] for i, r in recs.items()} == {i: r["parsed"] for i, r in want.items()}
    assert all(r["model"]["backend"] == "baseline" and r["model"]["baseline"] == "popularity" for r in recs.values())
    # latency: a single-sample call timed once per batch (12 samples: one batch), the batch's share kept apart
    assert len({r["latency_s"] for r in recs.values()}) == 1 and all(r["batch_samples"] == 12 for r in recs.values())
    assert all(r["latency_s"] > 0 and r["batch_share_s"] > 0 for r in recs.values())
    rows = {r.method: r for r in pipeline.score(d, resamples=0)}
    # the row scores exactly as the on-the-fly reference row of the same baseline
    assert rows["baseline_popularity"].metrics["NDCG@10"] == pytest.approx(rows["popularity"].metrics["NDCG@10"])
    assert rows["baseline_popularity"].kind == "model" and rows["popularity"].kind == "reference"



def test_a_reference_leaves_out_the_tasks_that_do_not_ask_it(ml1m, tmp_path):
    """`-m baseline:popularity` on a build with rating (which no ranker answers) answers sequential and says
    rating was left out; before, every rating sample was committed as an invalid answer and scored as a row."""
    d = tmp_path / "run"
    invoke("build", "llmrec", "-d", "ml-1m", "-t", "sequential", "-t", "rating", "-n", "6", "-o", str(d))
    out = invoke("run", "llmrec", "-d", "ml-1m", "-o", str(d), "-m", "baseline:popularity")
    assert "left out: task rating" in " ".join(out.split()) and "invalid after errors" not in out
    recs = list(read_jsonl(d / "predictions" / "baseline_popularity.jsonl"))
    assert len(recs) == 6 and {r["task"] for r in recs} == {"sequential"} and all(r["valid"] for r in recs)
    res = runner.invoke(app, ["run", "llmrec", "-d", "ml-1m", "-o", str(d), "-m", "baseline:popularity",
                              "-t", "rating", "--name", "pop2"])
    assert "answers no sample of --task rating" in str(res.exception)  # a ConfigError: `main` exits 2 with it
    # a --limit run covers the tasks it answers: `score` reads it as complete, not as 3 of 6 sequential samples
    d2 = tmp_path / "run2"
    invoke("build", "llmrec", "-d", "ml-1m", "-t", "rating", "-t", "sequential", "-n", "6", "-o", str(d2))
    invoke("run", "llmrec", "-d", "ml-1m", "-o", str(d2), "-m", "baseline:popularity", "--limit", "3")
    invoke("score", "llmrec", "-o", str(d2), "--resamples", "0")

def test_a_heavy_baseline_without_a_trained_model_is_one_clear_line(ml1m, tmp_path):
    d = tmp_path / "run"
    invoke("build", "recbench", "-d", "ml-1m", "-t", "seqrec", "-n", "4", "-o", str(d))
    res = subprocess.run([sys.executable, "-m", "recharness", "run", "recbench", "-d", "ml-1m", "-o", str(d),
                          "-m", "baseline:sasrec"], capture_output=True, text=True, timeout=300)
    err = " ".join(res.stderr.split())
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert "baseline:sasrec: no trained model" in err and "recharness train recbench" in err and "-b sasrec" in err
    # a killed first fit leaves only its checkpoint in the model's folder: still no trained model, the same line
    (d / "models" / "sasrec" / "fit-checkpoint").mkdir(parents=True)
    (d / "models" / "sasrec" / "fit-checkpoint" / "state.json").write_text("{}")
    res = subprocess.run([sys.executable, "-m", "recharness", "run", "recbench", "-d", "ml-1m", "-o", str(d),
                          "-m", "baseline:sasrec"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 2 and "baseline:sasrec: no trained model" in " ".join(res.stderr.split()), res.stderr


SLOW_RUN = textwrap.dedent("""
    import sys, time
    from recharness.baselines import sasrec
    predict = sasrec.SASRec.predict
    def slow(self, samples, task=None):
        time.sleep(0.02 * len(samples))  # so that a kill lands mid-run (a batch of 64 samples: over a second)
        return predict(self, samples, task)
    sasrec.SASRec.predict = slow
    from recharness.cli import main
    sys.argv = ["recharness", *sys.argv[1:]]
    main()
""")


def test_a_trained_sasrec_as_a_model_row_survives_kill9_exactly_once(ml1m, tmp_path):
    from recharness.baselines.sasrec import SASRec1L

    d = tmp_path / "run"
    pipeline.build("recbench", "ml-1m", d, tasks=["seqrec"], seed=0, limit=120, options={"train_sequences": 400})
    model = SASRec1L(seed=0, threads=1, progress=False, **SMALL).fit(TrainData.of_build(ml1m, d, "recbench"))
    model.save(RunDir(d).model_dir("sasrec-1l"))
    script = tmp_path / "slow_run.py"
    script.write_text(SLOW_RUN)
    args = [sys.executable, str(script), "run", "recbench", "-d", "ml-1m", "-o", str(d), "-m", "baseline:sasrec-1l"]
    pred = d / "predictions" / "baseline_sasrec-1l.jsonl"
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (pred.exists() and pred.read_text().count("\n") >= 10):
        assert p.poll() is None, p.stderr.read()
        assert time.monotonic() < deadline
        time.sleep(0.01)
    p.send_signal(signal.SIGKILL)
    p.wait()
    first = Counter(r["id"] for r in read_jsonl(pred, tolerate_torn_tail=True))
    _, samples = pipeline.load_build(d)
    assert 10 <= sum(first.values()) < len(samples) and max(first.values()) == 1  # killed mid-run
    done = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    recs = list(read_jsonl(pred))
    assert Counter(r["id"] for r in recs) == Counter({s["id"]: 1 for s in samples})  # 0 lost, 0 duplicated
    want = SASRec1L.load(RunDir(d).model_dir("sasrec-1l")).predict(samples, SeqrecTask())
    assert {r["id"]: r["parsed"] for r in recs} == {i: r["parsed"] for i, r in want.items()}
    row = next(r for r in pipeline.score(d, resamples=0) if r.method == "baseline_sasrec-1l")
    assert row.n == len(samples) and 0.0 <= row.metrics["NDCG@10"] <= 1.0


def test_model_specs_reach_the_run_help():
    out = runner.invoke(app, ["run", "--help"]).output
    assert "baseline:NAME" in out and "ft:DIR" in out



def _rows(text: str) -> dict[str, list[str]]:
    """A rich table's rows by their first cell, each cell's pieces over the row's lines joined (a folded
    cell whole again)."""
    rows: dict[str, list[list[str]]] = {}
    name = None
    for line in text.splitlines():
        cells = line.split("│")[1:-1]
        if not cells:
            continue
        if cells[0].strip():
            name = cells[0].strip()
            rows[name] = [[] for _ in cells]
        if name is not None:
            for k, c in enumerate(cells):
                rows[name][k].append(c.strip())
    return {n: [" ".join(p for p in parts if p) for parts in cs] for n, cs in rows.items()}


def test_baselines_lists_each_reference_with_what_it_answers_and_who_uses_it():
    rows = _rows(runner.invoke(app, ["baselines"], env={"COLUMNS": "250"}).output)
    for name in ("popularity", "sasrec", "deepfm", "title-cbs", "item_mean", "itemknn", "ease", "als", "markov"):
        assert name in rows
    # popularity serves four tasks (a folded cell read whole: a narrow column wraps it, never cuts it)
    # (in the order the suites were loaded: a set)
    assert set(rows["popularity"][3].replace(" ", "").split(",")) == {"llmrec/sequential", "llmrec/direct",
                                                                      "recbench/ctr", "recbench/seqrec"}
    assert "[implicit(AlternatingLeastSquares)]" in rows["als"][4].replace(" ", "")  # the library it comes from
