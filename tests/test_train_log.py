"""`recharness train` keeps each model's training: train_log.jsonl (one line per epoch), train.json (the
whole configuration, why it stopped), a summary line per model, and learning curves in the report."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from recharness.cli import app
from recharness.core.io import read_jsonl
from recharness.runner import pipeline, train_log

pytest.importorskip("torch")
pytest.importorskip("torch_rechub")


def test_train_logs_every_epoch_and_the_report_draws_the_curves(ml1m, tmp_path):
    d = tmp_path / "run"
    pipeline.build("recbench", "ml-1m", d, tasks=["ctr"], seed=0, limit=20, options={"train_pairs": 2000})
    res = CliRunner().invoke(app, ["train", "recbench", "-o", str(d), "-b", "dnn", "--latency-runs", "2"],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    log = list(read_jsonl(d / "models" / "dnn" / "train_log.jsonl"))
    info = json.loads((d / "models" / "dnn" / "train.json").read_text())
    assert [e["epoch"] for e in log] == list(range(1, len(log) + 1)) and log[0]["metric"] == "auc"
    assert all(e["best"] == max(x["valid"] for x in log[: k + 1]) for k, e in enumerate(log))  # best so far
    assert info["epochs"] == len(log) and info["best"] == max(e["valid"] for e in log)
    assert log[info["best_epoch"] - 1]["valid"] == info["best"]
    patience, cap = info["settings"]["patience"], info["settings"]["max_epochs"]
    if len(log) < cap:  # stopped by the patience rule: the last `patience` epochs were no better
        assert info["stopped"].startswith(f"no better validation score in {patience}")
        assert all(e["valid"] <= info["best"] for e in log[-patience:])
    assert info["seed"] == 0 and info["data"]["build"] == json.loads((d / "build.json").read_text())["fingerprint"]
    assert info["data"]["train_pairs"] > 0 and "lr" in info["settings"]
    assert train_log.summary_line("dnn", info) in " ".join(res.output.split())
    pipeline.score(d, resamples=0)
    from recharness.report.html import write_report
    from recharness.report.tables import load_scores, write_scores

    write_scores(pipeline.score(d, resamples=0), d)
    html = write_report(load_scores(d), d).read_text()
    assert "Training of the reference models" in html and "alt='learning curves auc'" in html


def test_a_killed_train_resumes_with_the_models_it_had_not_finished(ml1m, tmp_path, monkeypatch):
    from recharness.runner import train as train_mod

    d = tmp_path / "run"
    pipeline.build("recbench", "ml-1m", d, tasks=["ctr"], seed=0, limit=12, options={"train_pairs": 2000})
    fitted = []
    real_fit = train_mod.fit

    def fit(name, data, seed=0, params=None, **kw):
        fitted.append(name)
        if name == "pnn":  # the process dies while training the second model
            raise KeyboardInterrupt
        return real_fit(name, data, seed, params, **kw)

    monkeypatch.setattr(train_mod, "fit", fit)
    with pytest.raises(KeyboardInterrupt):
        train_mod.train(d, baselines=["dnn", "pnn"], latency_runs=2)
    assert (d / "predictions" / "reference" / "dnn.jsonl").exists()
    fitted.clear()
    monkeypatch.setattr(train_mod, "fit", real_fit)
    calls = []
    monkeypatch.setattr(train_mod, "fit", lambda *a, **k: (calls.append(a[0]), real_fit(*a, **k))[1])
    paths = train_mod.train(d, baselines=["dnn", "pnn"], latency_runs=2)
    assert calls == ["pnn"] and {p.stem for p in paths} == {"dnn", "pnn"}  # dnn kept, pnn trained
    calls.clear()
    train_mod.train(d, baselines=["dnn"], latency_runs=2, seed=1)  # another seed: trained again
    assert calls == ["dnn"]
