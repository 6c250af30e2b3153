"""Building from the original label files and scoring released predictions through the pipeline.

Fixtures: tests/fixtures/perrecbench/ml1m-labels (two easy groups of real
ML-1M users, relative ratings rounded by hand) and ml1m-preds:
  571:  truth rel (-0.14, -1.19) -> user 1 first
        point [4, 3] -> predicted rel (4 - 4.14, 3 - 4.19) = (-0.14, -1.19): +1;  list [2, 1]: -1
  1662: truth rel (+0.46, -2.76) -> user 1 first
        point ["format_not_correct", 2]: unparseable;                             list [1, 2]: +1
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from recharness.core.errors import InputError
from recharness.core.io import read_jsonl
from recharness.core.types import BuildConfig
from recharness.runner.pipeline import build, score
from recharness.tasks.perrecbench.build import build_samples
from recharness.tasks.perrecbench.original import import_predictions
from recharness.tasks.perrecbench.table import table1_markdown

FIX = Path(__file__).parent / "fixtures" / "perrecbench"
LABELS = FIX / "ml1m-labels"
PREDS = FIX / "ml1m-preds"


@pytest.fixture(scope="module")
def run(ml1m, tmp_path_factory):
    out = tmp_path_factory.mktemp("orig")
    build("perrecbench", "ml-1m", out, tasks=["point", "list"],
          options={"labels": str(LABELS), "profile": False, "predictions": str(PREDS), "predictions_name": "released"})
    return out


def test_samples_come_from_the_label_file(run, ml1m):
    samples = {s["id"]: s for s in read_jsonl(run / "samples.jsonl")}
    assert sorted(samples) == ["list-easy-1662", "list-easy-571", "point-easy-1662", "point-easy-571"]
    s = samples["point-easy-1662"]
    assert s["truth"]["user_ids"] == ["4647", "4631"]
    assert s["truth"]["relative_ratings"] == [0.46, -2.76]
    assert s["truth"]["ratings"] == pytest.approx([4.0, 1.0])  # no "rating" key: relative + mean
    # history shown = best BM25 matches among the first history_len ratings (time order)
    df = ml1m.interactions.filter(pl.col("user_id") == "4631").sort("timestamp", maintain_order=True)
    titles = dict(zip(ml1m.items["item_id"].to_list(), ml1m.items["title"].to_list()))
    first59 = {titles[i] for i in df["item_id"].to_list()[:59]}
    assert {h["card"][0][1] for h in s["users"][1]["history"]} <= first59
    assert s["users"][1]["avg_rating"] == 3.76  # the label's mean is the one shown and subtracted


def test_released_predictions_scored_both_ways(run, ml1m):
    assert (run / "predictions" / "released.jsonl").exists()
    rows = {(r.method, r.task): r for r in score(run, seed=0)}
    pt = rows[("released", "point")]
    assert pt.metrics["tau"] == pytest.approx(0.5)  # (+1 + 0) / 2: the failure counts as 0
    assert pt.metrics["tau_compat"] == pytest.approx(1.0)  # the original drops it
    assert pt.metrics["invalid"] == 1 and pt.metrics["unparsed_users"] == 1
    # MAE over parsed ratings: 571 truth (4.0, 3.0) [= rel + mean] vs (4, 3); 1662 truth 1.0 vs 2
    assert pt.metrics["MAE"] == pytest.approx(1 / 3)
    ls = rows[("released", "list")]
    assert ls.metrics["tau"] == pytest.approx(0.0) and ls.metrics["tau_compat"] == pytest.approx(0.0)
    assert ls.extra["breakdown"]["easy"]["groups"] == 2

    # references: user mean -> every predicted relative rating is 0 -> ties -> tau 0
    um = rows[("user-mean", "point")]
    assert um.kind == "reference" and um.metrics["tau"] == 0.0 and um.metrics["tied"] == 2
    # item mean over the ratings made before the group's first rating of the item (neither the labels nor anything
    # later), computed here from the raw table; none earlier: the members' own means
    inter = ml1m.interactions
    errs = []
    for item, users, avgs, truth in (("571", ["2468", "2586"], [4.14, 4.19], [4.14 - 0.14, 4.19 - 1.19]),
                                     ("1662", ["4647", "4631"], [3.54, 3.76], [3.54 + 0.46, 3.76 - 2.76])):
        rated = inter.filter(pl.col("item_id") == item)
        first = rated.filter(pl.col("user_id").is_in(users))["timestamp"].min()
        earlier = rated.filter(pl.col("timestamp") < first)["rating"]
        rest = earlier.mean() if earlier.len() else float(np.mean(avgs))
        errs += [abs(min(max(rest, 1), 5) - t) for t in truth]
    im = rows[("item-mean", "point")]
    assert im.metrics["MAE"] == pytest.approx(np.mean(errs))
    # equal predicted ratings rank users by lower mean first; here that is right in both groups
    assert im.metrics["tau"] == pytest.approx(1.0)
    assert ("random", "list") in rows and rows[("random", "list")].kind == "reference"

    table = table1_markdown(list(rows.values()))
    line = next(x for x in table.splitlines() if x.startswith("| released |"))
    # the level has 2 groups: a bootstrap of 2 units would claim more than they show (fewer than 5: no
    # interval, "n too small"); the cells give the values alone: point taus (+1, 0) → 0.50, list (+1, -1) → 0.00
    assert line.split(" | ")[1:4] == ["0.50 (1 unparsed)", "–", "0.00"]
    assert rows[("released", "point")].extra["no_interval"]["tau_easy"] == "n too small: 2 units"
    assert "[lo, hi]" not in table


def test_compat_option_switches_the_headline(ml1m, tmp_path):
    build("perrecbench", "ml-1m", tmp_path, tasks=["point"],
          options={"labels": str(LABELS), "profile": False, "compat": "perrecbench"})
    out = import_predictions(tmp_path, "released", {("point", "easy"): PREDS / "point-easy.json"})
    assert out.name == "released.jsonl"
    (row,) = [r for r in score(tmp_path, references=False)]
    assert row.metrics["tau"] == pytest.approx(1.0) and row.metrics["tau_rank"] == pytest.approx(0.5)
    assert "original PerRecBench code" in table1_markdown([row])


def test_label_errors_name_file_item_and_field(ml1m, tmp_path):
    bad = tmp_path / "labels"
    bad.mkdir()
    data = json.loads((LABELS / "item2group_avg_diff_sample-easy.json").read_text())
    data["571"][0][1]["user_id"] = "999999"
    (bad / "item2group_avg_diff_sample-easy.json").write_text(json.dumps(data))
    def build_list(out, **opts):  # the suite's build on the loaded dataset (no reload per call)
        return build_samples("list", ml1m, BuildConfig(options={"profile": False, **opts}, out=out))

    with pytest.raises(InputError, match=r"item2group_avg_diff_sample-easy\.json, field '571\[0\]\[1\]\.user_id': user '999999'"):
        build_list(tmp_path / "r1", labels=str(bad))
    data = json.loads((LABELS / "item2group_avg_diff_sample-easy.json").read_text())
    data["nope"] = data.pop("571")
    (bad / "item2group_avg_diff_sample-easy.json").write_text(json.dumps(data))
    with pytest.raises(InputError, match=r"field 'nope': query item is not in the dataset"):
        build_list(tmp_path / "r2", labels=str(bad))
    preds = tmp_path / "preds"
    shutil.copytree(PREDS, preds)
    (preds / "group-easy.json").write_text(json.dumps({"571": [[[2, 1]]], "zzz": [[[1, 2]]]}))
    with pytest.raises(InputError, match=r"group-easy\.json, line 1, field 'zzz': item has no group in the label file$"):
        build_list(tmp_path / "r3", labels=str(LABELS), predictions=str(preds))


def test_build_predictions_without_labels_names_the_build(ml1m, tmp_path):
    """`build --option predictions=DIR` with no labels=: the groups are the build's own, so an unknown item is
    said to have no group in this build's samples, never in a label file that was not given."""
    preds = tmp_path / "preds"
    preds.mkdir()
    (preds / "group-easy.json").write_text(json.dumps({"no-such-item": [[[1, 2]]]}))
    config = BuildConfig(options={"profile": False, "levels": "easy", "predictions": str(preds)}, limit=2,
                         out=tmp_path / "run")
    with pytest.raises(InputError) as e:
        build_samples("list", ml1m, config)
    msg = str(e.value)
    assert "label file" not in msg.replace("the authors' label files", "")
    assert msg.endswith("group-easy.json, line 1, field 'no-such-item': item has no group in this build's "
                        "list/easy samples (2 groups; a build from the authors' label files, --option labels=DIR, "
                        "has their groups)")


def test_a_label_count_of_earlier_ratings_reaching_past_the_query_is_refused(ml1m, tmp_path):
    """The label file's history_len counts the user's ratings before the query in its authors' data; one that
    reaches past the query's time here (their data held fewer of the user's ratings) would show ratings made
    after it. The query's time is the user's rating of the item here when the file gives none."""
    labels = tmp_path / "labels"
    labels.mkdir()
    data = json.loads((LABELS / "item2group_avg_diff_sample-easy.json").read_text())
    df = ml1m.interactions.filter(pl.col("user_id") == "2468").sort("timestamp", maintain_order=True)
    before = df["item_id"].to_list().index("571")  # the ratings this user made before rating item 571
    assert data["571"][0][0]["history_len"] <= before  # the released count stays before the query
    data["571"][0][0]["history_len"] = before + 5
    (labels / "item2group_avg_diff_sample-easy.json").write_text(json.dumps(data))
    with pytest.raises(InputError, match=r"history_len .* reaches past the query") as e:
        build("perrecbench", "ml-1m", tmp_path / "run", tasks=["list"], options={"labels": str(labels), "profile": False})
    assert e.value.field == "571[0][0].history_len"
