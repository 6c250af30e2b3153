"""report.html draws the learning curves of everything the run trained: the reference models
(models/<name>/train_log.jsonl), its fine-tunes (finetuned/<name>/train_log.jsonl) and the RQ-VAE behind
the semantic IDs they used (sid-rqvae-*.train_log.jsonl in the dataset's embeddings folder, named in their
train.json / finetune.json); a chart with no non-zero value is a line saying so, never a silent gap."""

from __future__ import annotations

import json
import re

import pytest

pytest.importorskip("matplotlib")

from recharness.core.io import write_jsonl_atomic  # noqa: E402
from recharness.core.rundir import RunDir  # noqa: E402
from recharness.core.types import ScoreRow  # noqa: E402
from recharness.report import html  # noqa: E402


def _figures(parts: list[str]) -> dict[str, dict]:
    """{alt: {"nonzero": n, "colours": {...}}} of the charts in `parts`."""
    out = {}
    for m in re.finditer(r"<figure data-nonzero='(\d+)' data-colours='([^']*)'><img alt='([^']*)'", "".join(parts)):
        out[m.group(3)] = {"nonzero": int(m.group(1)), "colours": json.loads(html.html.unescape(m.group(2)))}
    return out


@pytest.fixture()
def run(tmp_path, monkeypatch):
    monkeypatch.setenv("RECHARNESS_HOME", str(tmp_path / "home"))
    from recharness.data.item_embeddings import embeddings_dir

    rd = RunDir(tmp_path / "run")
    rd.path.mkdir()
    rd.build_json.write_text(json.dumps({"suite": "recbench", "dataset": "toy", "tasks": ["seqrec"]}))
    # a reference trained in epochs, and SID-SASRec over RQ-VAE codes
    rd.model_dir("dnn").mkdir(parents=True)
    write_jsonl_atomic(rd.train_log("dnn"), [{"epoch": k, "loss": 0.7 - 0.1 * k, "metric": "auc", "valid": v}
                                             for k, v in enumerate([0.6, 0.7, 0.68], 1)])
    rd.train_json("dnn").write_text(json.dumps({"epochs": 3, "best_epoch": 2, "best": 0.7, "stopped": "patience"}))
    rd.model_dir("sid-sasrec").mkdir(parents=True)
    rd.train_json("sid-sasrec").write_text(json.dumps({"epochs": 0, "semantic_ids": {
        "method": "rqvae", "train_log": "sid-rqvae-abc.train_log.jsonl"}}))
    emb = embeddings_dir("toy")
    emb.mkdir(parents=True)
    write_jsonl_atomic(emb / "sid-rqvae-abc.train_log.jsonl",
                       [{"epoch": k, "step": k, "loss": 1.0 / k, "seconds": 0.1} for k in range(1, 5)])
    # a fine-tune with its step log (and its checkpoint beside it, which is no model)
    ft = rd.finetuned("smollm2-135m-ctr-text")
    ft.mkdir(parents=True)
    write_jsonl_atomic(ft / "train_log.jsonl", [{"epoch": round(k / 3, 3), "step": k, "loss": 0.9 - 0.05 * k,
                                                 "metric": None, "valid": None, "seconds": k * 1.5}
                                                for k in range(1, 7)])
    (ft / "finetune.json").write_text(json.dumps({"steps": 6, "epochs_seen": 2.0, "final_loss": 0.6,
                                                  "stopped": "reached epochs=2 (6 steps)", "train_s": 9.0}))
    ckpt = rd.finetuned("smollm2-135m-ctr-text.checkpoint")
    ckpt.mkdir()
    write_jsonl_atomic(ckpt / "train_log.jsonl", [{"step": 1, "loss": 5.0}])
    return rd


def test_curves_of_references_finetunes_and_the_rqvae(run):
    assert run.finetuned_dirs() == [run.finetuned("smollm2-135m-ctr-text")]
    rows = [ScoreRow("smollm2-135m-ctr-text", "ctr", {"AUC": 0.6}, 4),
            ScoreRow("dnn", "ctr", {"AUC": 0.7}, 4, kind="reference"),
            ScoreRow("sid-sasrec", "seqrec", {"NDCG@10": 0.1}, 4, kind="reference")]
    palette = html.Palette(rows)
    parts = html.training_section(run.path, palette)
    text = "".join(parts)
    figs = _figures(parts)
    assert figs["learning curves auc"] == {"nonzero": 3, "colours": {"dnn": palette.colours["dnn"]}}
    assert figs["learning curves rqvae"] == {"nonzero": 4,
                                             "colours": {"rqvae (sid-sasrec)": "#505050"}}
    # the fine-tune: its 6 steps (not the checkpoint's row), in its colour as a run row of the page
    assert figs["learning curves finetune"] == {"nonzero": 6, "colours": {
        "smollm2-135m-ctr-text": palette.colours["smollm2-135m-ctr-text"]}}
    assert "<h2>Training of the reference models</h2>" in text and "<h2>Fine-tuning</h2>" in text
    assert "<td>smollm2-135m-ctr-text</td><td>6</td><td>2.000</td><td>0.600</td>" in text
    assert "reached epochs=2 (6 steps)" in text and "nochart" not in text


def test_a_curve_of_zeros_is_a_line_not_a_chart(run):
    write_jsonl_atomic(run.finetuned("smollm2-135m-ctr-text") / "train_log.jsonl",
                       [{"epoch": 1.0, "step": 1, "loss": 0.0, "valid": None}])
    write_jsonl_atomic(run.train_log("dnn"), [{"epoch": 1, "loss": 0.5, "metric": "auc", "valid": 0.0}])
    parts = html.training_section(run.path, html.Palette([]))
    text = "".join(parts)
    figs = _figures(parts)
    assert "learning curves finetune" not in figs and "learning curves auc" not in figs
    assert "learning curves rqvae" in figs
    assert "<p class='nochart'>No learning curve of validation auc: it is 0 (or missing) in every epoch of dnn.</p>" \
        in text
    assert "<p class='nochart'>No learning curve of smollm2-135m-ctr-text: the training loss is 0 (or missing) at " \
           "every step.</p>" in text


def test_no_training_no_section(tmp_path):
    (tmp_path / "build.json").write_text(json.dumps({"suite": "recbench", "dataset": "toy", "tasks": ["ctr"]}))
    assert html.training_section(tmp_path, html.Palette([])) == []
