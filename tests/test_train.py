"""The `train` stage: reference models fitted once on the build's training part, scored from their files.

The rows it leads to must be exactly the ones `score` computes on the fly (so nothing changes for
anyone who never runs `train`), and nothing a model fits on may contain a sample's held-out target.
"""

from __future__ import annotations

import dataclasses
import json
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter

import pytest
from typer.testing import CliRunner

from recharness.baselines import TrainData
from recharness.cli import app
from recharness.core.errors import BuildMismatch, ConfigError
from recharness.core.io import read_jsonl
from recharness.models.fake import FakeBackend
from recharness.runner import pipeline
from recharness.runner.train import train
from recharness.tasks.llmrec.direct import DirectTask
from recharness.tasks.llmrec.sequential import SequentialTask


@pytest.fixture(scope="module")
def built(ml1m, tmp_path_factory):
    out = tmp_path_factory.mktemp("train") / "run"
    info = pipeline.build("llmrec", "ml-1m", out, tasks=["sequential", "direct"], seed=0, limit=50)
    pipeline.run(out, FakeBackend("fake"), "fake", use_cache=False)
    return out, info


def _rows(out, seed=0, **kw):
    return [dataclasses.asdict(r) for r in pipeline.score(out, seed=seed, **kw)]


#: what only a trained reference row has: the `train` stage's timings (RecBench's latency)
TIMING = {"latency_s", "train_s", "throughput_per_s"}


#: where a reference row's answers came from (computed on the fly, or `train`'s file and its sha256): the source
#: differs between the rows compared, their numbers must not
SOURCE = ("computed", "predictions_sha256")


def _untimed(rows: list[dict]) -> list[dict]:
    return [{**r, "metrics": {k: v for k, v in r["metrics"].items() if r["kind"] == "model" or k not in TIMING},
             "extra": {k: v for k, v in (r.get("extra") or {}).items() if r["kind"] == "model" or k not in SOURCE}}
            for r in rows]


def test_trained_rows_equal_the_on_the_fly_rows(built, monkeypatch):
    out, info = built
    before = _rows(out, seed=5)
    assert {(r["method"], r["kind"]) for r in before} >= {("popularity", "reference"), ("random", "reference")}
    paths = train(out, suite="llmrec", seed=5)
    assert [p.relative_to(out).as_posix() for p in paths] == [f"predictions/reference/{n}.jsonl" for n in (
        "popularity", "random", "itemknn", "ease", "als", "markov")]  # the heavy ones only `train` fits
    for p in paths:
        recs = list(read_jsonl(p))
        assert sorted(r["id"] for r in recs) == sorted(r["id"] for r in read_jsonl(out / "samples.jsonl"))
        assert all(r["build"] == info["fingerprint"] and r["kind"] == "reference" and r["train_s"] >= 0
                   and r["model"]["baseline"] == p.stem for r in recs)
    assert next(read_jsonl(paths[1]))["model"]["settings"] == {"seed": 5}

    def refit(*a, **k):
        raise AssertionError("score refitted a reference model that `train` wrote")

    monkeypatch.setattr(SequentialTask, "references", refit)
    monkeypatch.setattr(DirectTask, "references", refit)
    after = _rows(out, seed=5)
    for r in after:
        if r["kind"] == "reference":
            assert TIMING <= set(r["metrics"]) and r["metrics"]["latency_s"] > 0 and r["metrics"]["throughput_per_s"] > 0
    on_the_fly = {r["method"] for r in before}
    # same rows in the same order with the same values (their marks against the best and the strongest
    # reference may move: the trained references are more rows to compare with)
    core = lambda rows: [{k: r[k] for k in ("method", "kind", "n", "metrics")} for r in rows]  # noqa: E731
    assert core(_untimed([r for r in after if r["method"] in on_the_fly])) == core(before)
    assert {r["method"] for r in after} - on_the_fly == {"itemknn", "ease", "als", "markov"}
    assert [r for r in _rows(out, references=False) if r["kind"] == "reference"] == []


def test_a_partly_trained_run_computes_the_rest_on_the_fly(built):
    out, _ = built
    for p in (out / "predictions" / "reference").glob("*.jsonl"):
        p.unlink()
    before = _rows(out, seed=1)
    train(out, baselines=["random"], seed=1)
    assert [p.name for p in (out / "predictions" / "reference").iterdir()] == ["random.jsonl"]
    assert _untimed(_rows(out, seed=1)) == _untimed(before)


def test_training_data_never_holds_a_test_target(built, ml1m, monkeypatch):
    out, _ = built
    seen: list[TrainData] = []
    fit = TrainData.leave_last_out.__func__

    def spy(cls, dataset):
        seen.append(fit(cls, dataset))
        return seen[-1]

    monkeypatch.setattr(TrainData, "leave_last_out", classmethod(spy))
    train(out, suite="llmrec", baselines=["popularity"])  # every baseline is fitted on this one TrainData
    (data,) = seen
    samples = list(read_jsonl(out / "samples.jsonl"))
    held_out = {(s["user_id"], s["target"]) for s in samples}
    rows = set(data.interactions.select("user_id", "item_id").iter_rows())
    assert held_out and not held_out & rows
    assert data.interactions.height == ml1m.interactions.height - ml1m.interactions["user_id"].n_unique()
    history = {}
    for u, i in data.interactions.select("user_id", "item_id").iter_rows():
        history.setdefault(u, []).append(i)
    for s in samples:
        if s["task"] == "sequential":
            assert history[s["user_id"]] == s["seen"]  # exactly what the model was shown as history


def test_a_rebuild_makes_old_reference_files_an_error(ml1m, tmp_path):
    out = tmp_path / "run"
    pipeline.build("llmrec", "ml-1m", out, tasks=["direct"], seed=0, limit=5)
    train(out, baselines=["popularity"])
    pipeline.build("llmrec", "ml-1m", out, tasks=["direct"], seed=1, limit=5)
    with pytest.raises(BuildMismatch, match="recharness train"):
        pipeline.score(out)


def test_names_are_checked(built, ml1m, tmp_path):
    out, _ = built
    with pytest.raises(ConfigError, match="did you mean 'popularity'"):
        train(out, baselines=["populrity"])
    with pytest.raises(ConfigError, match="perrecbench"):
        train(out, suite="perrecbench")
    rating = tmp_path / "rating"
    pipeline.build("llmrec", "ml-1m", rating, tasks=["rating"], seed=0, limit=5)
    with pytest.raises(ConfigError, match="no reference model serves"):
        train(rating)
    with pytest.raises(ConfigError, match="serves none of this build's tasks"):
        train(rating, baselines=["random"])


def test_cli_train_then_score(built, tmp_path):
    out, _ = built
    res = CliRunner().invoke(app, ["train", "llmrec", "-d", "ml-1m", "-o", str(out), "--baseline", "popularity"],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    shown = " ".join(res.output.split())
    assert "predictions/reference/popularity.jsonl" in shown.replace(" ", "")
    # the model spec it produced, and the command that runs it as an ordinary model row
    assert f"trained: -m baseline:popularity (recharness run llmrec -o {out} -m baseline:popularity;" in shown
    res = CliRunner().invoke(app, ["score", "llmrec", "-d", "ml-1m", "-o", str(out)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    rows = json.loads((out / "scores.json").read_text())
    assert {"popularity", "random", "fake"} <= {r["method"] for r in (rows if isinstance(rows, list) else rows["rows"])}


def test_every_fitted_reference_keeps_its_train_json(ml1m, tmp_path):
    """A closed-form or one-pass model (no epochs) gets train.json too: every setting, the seed, the build, the
    fit's seconds; it has no epochs to log."""
    from recharness.baselines import BASELINES
    from recharness.core.rundir import RunDir
    from recharness.runner import train_log

    out = tmp_path / "run"
    info = pipeline.build("llmrec", "ml-1m", out, tasks=["direct"], seed=0, limit=5)
    lines = []
    train(out, baselines=["popularity", "ease", "random"], seed=3, progress=lines.append)
    rd = RunDir(out)
    for name in ("popularity", "ease", "random"):
        got = json.loads(rd.train_json(name).read_text())
        stamp = next(read_jsonl(rd.reference(name)))
        assert got["settings"] == stamp["model"]["settings"] == BASELINES.get(name).create(seed=3).settings()
        assert got["seed"] == 3 and got["data"]["build"] == info["fingerprint"]
        assert got["data"]["train_interactions"] > 0
        assert got["epochs"] == 0 and got["stopped"] == "fitted (no epochs)"
        assert got["train_s"] == pytest.approx(stamp["train_s"], abs=1e-3) and got["train_s"] >= 0
        assert not rd.train_log(name).exists()
        assert train_log.summary_line(name, got) in lines
    assert json.loads(rd.train_json("ease").read_text())["settings"]["l2"] > 0  # its hyperparameter, by name
    assert json.loads(rd.train_json("random").read_text())["settings"] == {"seed": 3}


SLOW_TRAIN = textwrap.dedent("""
    import sys, time
    from recharness.baselines.ease import EASE
    predict = EASE.predict
    def slow(self, samples, task=None):
        if len(samples) > 1:  # each task's batch (not the single-sample timing): a kill lands between two tasks
            time.sleep(2)
        return predict(self, samples, task)
    EASE.predict = slow
    from recharness.cli import main
    sys.argv = ["recharness", *sys.argv[1:]]
    main()
""")


@pytest.mark.slow
def test_a_train_killed_mid_prediction_resumes_with_its_saved_model_exactly_once(ml1m, tmp_path):
    """kill -9 while a trained model predicts: the reference file is not there (never half of one), its
    partial log holds whole tasks; the next `train` loads the saved model (no refit), answers the rest,
    and the file holds every sample once with the model's own answers."""
    from recharness.baselines.ease import EASE
    from recharness.core.rundir import RunDir
    from recharness.tasks.registry import get_task

    d = tmp_path / "run"
    pipeline.build("llmrec", "ml-1m", d, tasks=["sequential", "direct"], seed=0, limit=20)
    rd = RunDir(d)
    script = tmp_path / "slow_train.py"
    script.write_text(SLOW_TRAIN)
    args = ["train", "llmrec", "-o", str(d), "-b", "ease", "--latency-runs", "3"]
    partial = rd.reference_partial("ease")
    p = subprocess.Popen([sys.executable, str(script), *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         text=True)
    deadline = time.monotonic() + 300
    while not (partial.exists() and partial.read_text().count("\n") >= 20):  # the first task committed
        assert p.poll() is None, p.stderr.read()
        assert time.monotonic() < deadline
        time.sleep(0.01)
    p.send_signal(signal.SIGKILL)
    p.wait()
    _, samples = pipeline.load_build(d)
    first = Counter(r["id"] for r in read_jsonl(partial, tolerate_torn_tail=True))
    assert first == Counter({s["id"]: 1 for s in samples if s["task"] == "sequential"})  # killed mid-prediction
    assert not rd.reference("ease").exists()
    fitted = rd.train_json("ease").stat().st_mtime_ns
    done = subprocess.run([sys.executable, "-m", "recharness", *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "resumed with the model saved in models/ease" in " ".join(done.stderr.split())
    assert rd.train_json("ease").stat().st_mtime_ns == fitted  # loaded, not fitted again
    recs = list(read_jsonl(rd.reference("ease")))
    assert Counter(r["id"] for r in recs) == Counter({s["id"]: 1 for s in samples})  # 0 lost, 0 duplicated
    assert not partial.exists()
    model = EASE.load(rd.model_dir("ease"))
    want = {}
    for t in ("sequential", "direct"):
        want.update(model.predict([s for s in samples if s["task"] == t], get_task("llmrec", t)))
    assert {r["id"]: r["parsed"] for r in recs} == {i: r["parsed"] for i, r in want.items()}
    stamp = {k: recs[0][k] for k in ("build", "kind", "model", "train_s", "train_seed", "tune_trials")}
    assert all({k: r[k] for k in stamp} == stamp for r in recs)  # one training's stamp on every record
    assert all(r["latency_runs"] == 3 and r["throughput_per_s"] > 0 and "prompt_version" not in r for r in recs)


def test_a_train_writing_the_same_model_is_refused_at_once(ml1m, tmp_path):
    """Another `train` writing a model's predictions holds its log: this one stops before removing it."""
    from recharness.core.io import FileLocked, GroupCommitLog
    from recharness.core.rundir import RunDir

    d = tmp_path / "run"
    pipeline.build("llmrec", "ml-1m", d, tasks=["direct"], seed=0, limit=5)
    rd = RunDir(d)
    with GroupCommitLog(rd.reference_partial("popularity")):
        with pytest.raises(FileLocked, match="being written by another"):
            train(d, baselines=["popularity"])
        assert rd.reference_partial("popularity").exists() and not rd.reference("popularity").exists()
    train(d, baselines=["popularity"])
    assert not rd.reference_partial("popularity").exists() and rd.reference("popularity").exists()
