"""MIND in its official layout: the loader on a hand-made fixture, its errors, and RecBench CTR on
MIND's real impression labels end to end (prepare → build → run with the fake model → score → report)."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from recharness.baselines import pairs_path
from recharness.cli import app
from recharness.core.errors import InputError
from recharness.core.io import read_jsonl
from recharness.data.mind import load_mind
from recharness.data.prepare import prepare_dataset
from recharness.models.fake import FakeBackend
from recharness.runner import pipeline

FIXTURE = Path(__file__).parent / "fixtures" / "data" / "mind"


def _ts(text: str) -> int:
    return int(datetime.strptime(text, "%m/%d/%Y %I:%M:%S %p").replace(tzinfo=UTC).timestamp())


def test_loader_reads_the_official_layout():
    ds = load_mind(FIXTURE)
    inter = ds.interactions
    assert (ds.items.height, ds.users.height, ds.meta["impressions"]) == (15, 12, 30)
    imp = inter.filter(pl.col("impression_id").is_not_null())
    hist = inter.filter(pl.col("impression_id").is_null())
    assert imp.height == 86 and hist.height == 18  # 86 impression entries; 18 distinct (user, history click)
    assert imp["label"].sum() == 31 and (hist["label"] == 1).all()
    assert inter["rating"].null_count() == inter.height
    # behaviors.tsv line 1: "1  U1  11/9/2019 8:05:12 AM  N1 N5  N9-1 N2-0 N3-0", checked by hand
    t = _ts("11/9/2019 8:05:12 AM")
    u1 = inter.filter(pl.col("user_id") == "U1").head(5)
    assert u1.select("item_id", "label", "timestamp", "impression_id").rows() == [
        ("N1", 1, t - 2, None), ("N5", 1, t - 1, None), ("N9", 1, t, "1"), ("N2", 0, t, "1"), ("N3", 0, t, "1")]
    n3 = ds.items.filter(pl.col("item_id") == "N3").row(0, named=True)
    assert n3 == {"item_id": "N3", "title": "Stocks rally as rates hold steady", "category": "finance",
                  "subcategory": "finance-markets", "abstract": None}


def _broken(tmp_path: Path, name: str, line: int, new: str) -> Path:
    d = tmp_path / "mind"
    shutil.copytree(FIXTURE, d)
    lines = (d / name).read_text().split("\n")
    lines[line - 1] = new
    (d / name).write_text("\n".join(lines))
    return d


@pytest.mark.parametrize("name, line, new, field, what", [
    ("behaviors.tsv", 3, "3\tU3\t11/9/2019 1:20:33 PM\tN4-1 N15-1", "Impressions", "truncated line"),
    ("behaviors.tsv", 4, "4\tU4\t2019-11-09 18:45:00\tN2\tN14-0", "Time", "is not a time"),
    ("behaviors.tsv", 5, "5\tU5\t11/10/2019 7:30:00 AM\tN10\tN12-1 N2", "Impressions", "'N2' is not a news id followed by -1"),
    ("behaviors.tsv", 6, "6\tU1\t11/10/2019 8:10:00 AM\tN1\tN6-0 N99-1", "Impressions", "'N99' is not in news.tsv"),
    ("behaviors.tsv", 7, "7\tU6\t11/10/2019 11:59:59 AM\tN8 N77\tN4-0", "History", "'N77' is not in news.tsv"),
    ("news.tsv", 2, "N2\tnews\tnewsus\tTitle", "Abstract", "truncated line"),
    ("news.tsv", 9, "N1\tsports\tx\tDup\t\turl\t[]\t[]", "NewsID", "listed twice"),
])
def test_bad_input_names_file_line_and_field(tmp_path, name, line, new, field, what):
    d = _broken(tmp_path, name, line, new)
    with pytest.raises(InputError) as e:
        load_mind(d)
    msg = str(e.value)
    assert "\n" not in msg and name in msg and f"line {line}" in msg and what in msg
    assert e.value.line == line and e.value.field.lower() == field.lower()


def test_prepare_build_run_score_report(tmp_path, monkeypatch):
    monkeypatch.setenv("RECHARNESS_HOME", str(tmp_path / "home"))
    target = prepare_dataset("mind", [FIXTURE], progress=False)
    assert target.is_relative_to(tmp_path / "home")
    out = tmp_path / "run"
    opts = {"test_pairs_per_user": 2, "train_pairs": 1000}
    info = pipeline.build("recbench", "mind", out, tasks=["ctr"], seed=0, options=opts)
    samples = list(read_jsonl(out / "samples.jsonl"))
    split = json.loads(pairs_path(out, "recbench", "split").with_suffix(".json").read_text())
    assert split["negatives"] == "labels" and info["counts"]["ctr"] == len(samples) > 0
    raw = load_mind(FIXTURE).interactions
    shown = {(u, i): (y, t) for u, i, y, t, imp in raw.select("user_id", "item_id", "label", "timestamp",
                                                             "impression_id").iter_rows() if imp is not None}
    for s in samples:  # every test pair is a real impression entry with its real label and time
        assert shown[(s["user_id"], s["item_id"])] == (s["label"], s["timestamp"])
    assert {s["label"] for s in samples} == {0, 1}
    train = pl.read_parquet(pairs_path(out, "recbench", "train"))
    assert train.height > 0 and set(train["label"].to_list()) == {0, 1}
    # U1's last impression (#18) is their test window; history = their clicks before it, oldest first
    u1 = [s for s in samples if s["user_id"] == "U1"]
    assert {s["item_id"] for s in u1} == {"N14", "N10", "N7", "N11"}
    assert all(s["history"] == ["N1", "N5", "N9", "N13"] for s in u1)
    pipeline.run(out, FakeBackend("fake"), "fake", use_cache=False)
    for stage in ("score", "report"):
        res = CliRunner().invoke(app, [stage, "recbench", "-d", "mind", "-o", str(out)], catch_exceptions=False)
        assert res.exit_code == 0, res.output
    rows = json.loads((out / "scores.json").read_text())
    rows = rows if isinstance(rows, list) else rows["rows"]
    fake = [r for r in rows if r["method"] == "fake"]
    assert len(fake) == 1 and fake[0]["n"] == len(samples)
    assert {"AUC", "GAUC", "GAUC_unweighted", "logloss", "invalid_rate"} <= set(fake[0]["metrics"])
    assert "AUC" in (out / "report.html").read_text(encoding="utf-8")


def test_only_clicks_are_histories_targets_and_training_rows(tmp_path, monkeypatch):
    """MIND's shown-but-not-clicked entries are negatives: a loaded dataset's `interactions` (what LLMRec,
    RecBench+ and the references read as chosen) holds the clicks only, `labelled` all of them, and a
    leave-last-out target is always a click (it could be an unclicked item)."""
    from recharness.baselines.base import training_rows
    from recharness.data.leave_last_out import leave_last_out
    from recharness.data.store import load_dataset

    monkeypatch.setenv("RECHARNESS_HOME", str(tmp_path / "home"))
    prepare_dataset("mind", [FIXTURE], progress=False)
    ds = load_dataset("mind")
    raw = load_mind(FIXTURE).interactions
    assert ds.labelled.height == raw.height == 104 and set(ds.labelled["label"].to_list()) == {0, 1}
    assert ds.interactions.height == raw.filter(pl.col("label") == 1).height and (ds.interactions["label"] == 1).all()
    clicked = {(u, i) for u, i in raw.filter(pl.col("label") == 1).select("user_id", "item_id").iter_rows()}
    splits = leave_last_out(ds.interactions, min_history=1)
    assert splits and all((s.user_id, s.target) in clicked for s in splits)
    # with every row (the old reading) some user's last row is an unclicked impression entry
    assert any((s.user_id, s.target) not in clicked for s in leave_last_out(raw, min_history=1))
    assert (training_rows(ds.interactions)["label"] == 1).all()
