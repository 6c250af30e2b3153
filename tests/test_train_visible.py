"""Training you can watch and keep: `recharness train` prints one line per epoch (loss, validation metric,
best so far) and why it stopped; DLRM train_log.jsonl rows carry real seconds and the optimiser step; the
RQ-VAE behind semantic IDs keeps its own train_log.jsonl beside its codes."""

from __future__ import annotations

import json
import re

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from recharness.cli import app
from recharness.core.io import read_jsonl
from recharness.runner import pipeline, train_log


def test_train_prints_every_epoch_and_logs_steps_and_seconds(ml1m, tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("torch_rechub")
    d = tmp_path / "run"
    pipeline.build("recbench", "ml-1m", d, tasks=["ctr"], seed=0, limit=20, options={"train_pairs": 2000})
    res = CliRunner().invoke(app, ["train", "recbench", "-o", str(d), "-b", "dnn", "--latency-runs", "2"],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    log = list(read_jsonl(d / "models" / "dnn" / "train_log.jsonl"))
    info = json.loads((d / "models" / "dnn" / "train.json").read_text())
    lines = re.findall(r"dnn epoch (\d+): loss ([0-9.]+) valid AUC ([0-9.]+) \(best ([0-9.]+)\)", res.output)
    assert [int(e) for e, *_ in lines] == [e["epoch"] for e in log] == list(range(1, info["epochs"] + 1))
    for (_, loss, valid, best), row in zip(lines, log, strict=True):  # the printed line is the logged epoch
        assert float(loss) == pytest.approx(row["loss"], abs=6e-5)
        assert float(valid) == pytest.approx(row["valid"], abs=6e-5)
        assert float(best) == pytest.approx(row["best"], abs=6e-5)
    assert f"stopped: {info['stopped']}" in " ".join(res.output.split())
    assert " ".join(res.output.split()).count(train_log.summary_line("dnn", info)) == 1  # once, not twice
    # steps: optimiser steps so far, the same number each epoch (same batches); seconds measured, not null
    per_epoch = log[0]["step"]
    assert per_epoch >= 1 and [e["step"] for e in log] == [per_epoch * k for k in range(1, len(log) + 1)]
    assert all(isinstance(e["seconds"], float) and e["seconds"] > 0 for e in log)
    assert all(e["valid_seconds"] >= 0 for e in log)
    assert sum(e["seconds"] for e in log) <= info["train_s"]
    # train.json is the full configuration (the checkpoint's config.json is what loading needs)
    for key in ("batch_size", "lr", "max_epochs", "patience", "weight_decay", "embedding_l2", "embed_dim",
                "mlp_dims", "dropout"):
        assert key in info["settings"], key
    assert info["seed"] == 0 and info["data"]["build"] == json.loads((d / "build.json").read_text())["fingerprint"]
    cmds = [json.loads(x)["command"] for x in (d / "commands.jsonl").read_text().splitlines()]
    assert cmds[-1].startswith("recharness train recbench") and "--baseline dnn" in cmds[-1] \
        and "--latency-runs 2" in cmds[-1]


def test_rqvae_keeps_its_train_log_beside_its_codes(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    pytest.importorskip("vector_quantize_pytorch")
    from recharness.data import semantic_ids as si

    monkeypatch.setenv("RECHARNESS_HOME", str(tmp_path / "home"))
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    v = np.concatenate([c + rng.normal(scale=0.1, size=(10, 16)) for c in rng.normal(size=(4, 16)) * 5])
    ids = [f"i{k}" for k in range(len(v))]
    monkeypatch.setattr(si, "item_embeddings", lambda name, df, enc, **k: (ids, v.astype(np.float32)))
    sid = si.semantic_ids("toy", pl.DataFrame({"item_id": ids}), method="rqvae", levels=2, codebook_size=4,
                          epochs=4, progress=False)
    folder = tmp_path / "home" / "datasets" / "toy" / "embeddings"
    logs = list(folder.glob("sid-rqvae-*.train_log.jsonl"))
    assert len(logs) == 1
    rows = list(read_jsonl(logs[0]))
    assert rows == sid.log and [r["epoch"] for r in rows] == [1, 2, 3, 4]
    assert [r["step"] for r in rows] == [1, 2, 3, 4]  # 40 items, batches of 1024: one step an epoch
    for r in rows:
        assert r["loss"] == pytest.approx(r["reconstruction_mse"] + r["commitment"], abs=2e-6)
        assert r["seconds"] > 0
    assert rows[-1]["reconstruction_mse"] == sid.info["reconstruction_mse"]
    info = json.loads(next(folder.glob("sid-rqvae-*[0-9a-f].json")).read_text())
    assert info["train_log"] == logs[0].name
    again = si.semantic_ids("toy", pl.DataFrame({"item_id": ids}), method="rqvae", levels=2, codebook_size=4,
                            epochs=4, progress=False)  # from the cache: the log file is kept, not rewritten
    assert again.log == [] and list(read_jsonl(logs[0])) == rows
    # both name the log (what a model's train.json records, so the report finds the curve from a run)
    assert sid.log_file == again.log_file == logs[0].name
    assert si.read_train_log("toy", sid.log_file) == rows and si.read_train_log("toy", "../x.jsonl") == []
