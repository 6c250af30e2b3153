"""What a later stage fits on is the build's own training data: a training file that an interrupted or failed
rebuild left beside the previous build's samples is refused, and so is a saved model of another build."""

from __future__ import annotations

import json

import polars as pl
import pytest

from recharness.baselines import TrainData
from recharness.core.errors import ConfigError, InputError
from recharness.core.rundir import RunDir
from recharness.runner import pipeline
from recharness.runner.reference_backend import ReferenceBackend
from recharness.runner.train import train


def test_a_training_file_the_build_did_not_record_is_refused(ml1m, tmp_path):
    out = tmp_path / "ctr"
    pipeline.build("recbench", "ml-1m", out, tasks=["ctr"], seed=0, limit=20, options={"train_pairs": 500})
    side = RunDir(out).build_info()["side_files"]
    assert set(side) == {"recbench/train.parquet", "recbench/valid.parquet"}
    assert TrainData.of_build(ml1m, out, "recbench").pairs.height > 0  # as built: read
    # a rebuild with other settings wrote its training pairs, then failed before its samples and build.json
    path = RunDir(out).pairs("recbench")
    pairs = pl.read_parquet(path)
    pairs.head(pairs.height // 2).write_parquet(path)
    with pytest.raises(InputError, match="not the training file build.json recorded .its sha256 differs."):
        TrainData.of_build(ml1m, out, "recbench")
    # an older build.json that recorded no side files takes them as they are
    info = json.loads(RunDir(out).build_json.read_text())
    info.pop("side_files")
    RunDir(out).build_json.write_text(json.dumps(info))
    assert TrainData.of_build(ml1m, out, "recbench").pairs.height == pairs.height // 2



@pytest.mark.parametrize("task, gone", [("ctr", "recbench/train.parquet"), ("seqrec", "recbench/seqrec_train.parquet")])
def test_a_training_file_the_build_recorded_and_that_is_gone_is_refused(ml1m, tmp_path, task, gone):
    """Before, a deleted training file made `of_build` (and so `train`) fall back to leave-last-out over the whole
    dataset, whose training part holds the build's test targets (647 of 800 CTR test pairs)."""
    out = tmp_path / task
    pipeline.build("recbench", "ml-1m", out, tasks=[task], seed=0, limit=20, options={"train_pairs": 500}
                   if task == "ctr" else None)
    assert gone in RunDir(out).build_info()["side_files"]
    (out / gone).unlink()
    with pytest.raises(InputError, match="is gone .build.json records them.*would see the test targets"):
        TrainData.of_build(ml1m, out, "recbench")
    with pytest.raises(InputError, match="is gone"):
        train(out, baselines=["popularity"], seed=0, latency_runs=0)

def test_a_saved_model_of_another_build_is_not_loaded(ml1m, tmp_path):
    out = tmp_path / "run"
    pipeline.build("llmrec", "ml-1m", out, tasks=["sequential"], seed=0, limit=10)
    train(out, baselines=["itemknn"], seed=0, latency_runs=0)
    ReferenceBackend("itemknn", out)  # trained on this build: loads
    pipeline.build("llmrec", "ml-1m", out, tasks=["sequential"], seed=1, limit=10)  # another build, no retrain
    with pytest.raises(ConfigError, match="trained on another build of this run directory.*--retrain"):
        ReferenceBackend("itemknn", out)


def test_eval_does_not_keep_a_build_whose_samples_changed(ml1m, tmp_path):
    """A build killed between writing its samples and its build.json left samples build.json did not record:
    `eval` rebuilds instead of keeping them (and then refusing them at every stage)."""
    from recharness.evaluate import _same_build

    out = tmp_path / "run"
    pipeline.build("llmrec", "ml-1m", out, tasks=["sequential"], seed=0, limit=5)
    rd = RunDir(out)
    assert _same_build(rd, "llmrec", ["sequential"], 0, 5, {}, "ml-1m")
    with open(rd.samples_jsonl, "a", encoding="utf-8") as f:
        f.write(json.dumps({"id": "extra", "task": "sequential"}) + "\n")
    assert not _same_build(rd, "llmrec", ["sequential"], 0, 5, {}, "ml-1m")
