"""`train --tune` of the HistoryScorers (ItemKNN, EASE, ALS, Markov) on a CTR build: AUC of their click
scores on the build's validation pairs, fitted without them; on any other build the ranking objective."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from sklearn.metrics import roc_auc_score

from recharness.baselines import tuning
from recharness.baselines.base import TrainData
from recharness.baselines.ease import EASE
from recharness.baselines.item_knn import ItemKNN
from recharness.data.store import load_dataset
from recharness.runner import pipeline
from tests.test_tuning_trained import synthetic_dataset

@pytest.fixture(scope="module")
def dataset_dir(tmp_path_factory):
    return synthetic_dataset(tmp_path_factory.mktemp("data"), "synthetic-ctr-tune")


def _ctr_train(dataset_dir, out, **options) -> TrainData:
    pipeline.build("recbench", str(dataset_dir), out, tasks=["ctr"], seed=0, limit=20,
                   options={"history_len": 5, **options})
    return TrainData.of_build(load_dataset(str(dataset_dir)), out, "recbench")


def _keys(df: pl.DataFrame) -> set[tuple[str, str]]:
    return set(zip(df["user_id"].to_list(), df["item_id"].to_list()))


def _by_hand(model, valid: pl.DataFrame) -> float:
    samples = [{"user_id": u, "item_id": i, "history": list(h)}
               for u, i, h in valid.select("user_id", "item_id", "history").iter_rows()]
    return float(roc_auc_score(valid["label"].to_numpy(), model.p_clicks(samples)))


@pytest.mark.parametrize("cls", [ItemKNN, EASE])
def test_history_scorer_on_a_ctr_build_tunes_on_validation_auc(dataset_dir, tmp_path, cls):
    train = _ctr_train(dataset_dir, tmp_path / "ctr", valid_fraction=0.2)
    valid = pl.read_parquet(tmp_path / "ctr" / "recbench" / "valid.parquet")
    assert train.pairs is not None and valid.height and valid["label"].n_unique() == 2
    obj = tuning.objective_for(cls, train, 0)
    assert obj.metric == "auc" and obj.size == valid.height
    assert "valid.parquet" in obj.description
    assert sorted(obj.keys()) == sorted(zip(valid["user_id"].to_list(), valid["item_id"].to_list()))
    # the trial's fit never sees a validation pair, in its clicks or its labelled pairs
    assert not _keys(valid) & _keys(obj.fit_on.interactions)
    assert not _keys(valid) & _keys(obj.fit_on.pairs)
    model = cls.create(seed=0, **cls.defaults()).fit(obj.fit_on)
    assert obj.score(model) == pytest.approx(_by_hand(model, valid), abs=1e-12)
    # the search states and optimises the AUC objective
    search = tuning.tune(cls, train, 2, seed=0)
    assert search["objective"] == obj.description
    assert all(0.0 <= r["valid"] <= 1.0 for r in search["trials"])


def test_history_scorer_without_valid_parquet_holds_out_the_dlrms_slice(dataset_dir, tmp_path):
    train = _ctr_train(dataset_dir, tmp_path / "ctr0", valid_fraction=0.0)
    assert train.valid is None or train.valid.height == 0
    obj = tuning.objective_for(ItemKNN, train, 3)
    held = train.pairs.filter(pl.Series(np.random.default_rng(3).random(train.pairs.height) < 0.1))
    assert obj.metric == "auc" and obj.size == held.height > 0
    assert obj.keys() == list(zip(held["user_id"].to_list(), held["item_id"].to_list()))
    assert not _keys(held) & _keys(obj.fit_on.interactions)
    from recharness.baselines.dlrm.baseline import validation_pairs  # torch is a dependency

    assert validation_pairs(train, 3)[1].equals(held)  # the same slice the DLRMs hold out
    assert held["label"].n_unique() == 2  # both labels: an AUC to check
    model = ItemKNN.create(seed=0).fit(obj.fit_on)
    assert obj.score(model) == pytest.approx(_by_hand(model, held), abs=1e-12)


def test_history_scorer_on_a_sequential_build_keeps_the_ranking_objective(dataset_dir, tmp_path):
    out = tmp_path / "seqrec"
    pipeline.build("recbench", str(dataset_dir), out, tasks=["seqrec"], seed=0, limit=20,
                   options={"history_len": 5})
    train = TrainData.of_build(load_dataset(str(dataset_dir)), out, "recbench")
    assert train.pairs is None
    obj = tuning.objective_for(ItemKNN, train, 0)
    ref = tuning.ranking_objective(train, 0)
    assert obj.metric == tuning.METRIC == "ndcg@10"
    assert (obj.size, obj.description, obj.keys()) == (ref.size, ref.description, ref.keys())
    assert obj.fit_on is ref.fit_on
    # a leave-last-out training set (no build) too
    lo = TrainData.leave_last_out(load_dataset(str(dataset_dir)))
    assert tuning.objective_for(EASE, lo, 0).metric == "ndcg@10"


def test_item_mean_rate_by_hand_for_a_given_smoothing():
    """P(click | item) = (clicks + m * prior) / (pairs + m), prior = the training pairs' click rate; checked
    for a non-default m on three pairs worked by hand."""
    from recharness.baselines.item_mean import ItemMeanCtr

    pairs = pl.DataFrame({"user_id": ["u1", "u2", "u3", "u4"], "item_id": ["a", "a", "a", "b"],
                          "label": [1, 1, 0, 0], "timestamp": [1, 2, 3, 4]})
    train = TrainData(pairs.filter(pl.col("label") == 1).select("user_id", "item_id", "timestamp"),
                      ["a", "b", "c"], pairs)
    model = ItemMeanCtr.create(seed=5, smoothing=2.0).fit(train)
    # prior 2/4 = 0.5; a: (2 + 2 * 0.5) / (3 + 2) = 0.6; b: (0 + 1) / (1 + 2) = 1/3; c unseen: the prior
    got = model.p_clicks([{"user_id": "x", "item_id": i} for i in "abc"])
    assert got == pytest.approx([0.6, 1 / 3, 0.5], abs=1e-12)
    assert model.settings() == {"smoothing": 2.0} and ItemMeanCtr.create().settings() == {"smoothing": 10.0}
    with pytest.raises(ValueError, match="smoothing"):
        ItemMeanCtr(smoothing=0)


def test_item_mean_tunes_its_smoothing_on_the_dlrms_validation_auc(dataset_dir, tmp_path):
    """item_mean is searched like the DLRMs it is compared with (issue 25 §1, the same budget): AUC of its
    rates on the build's validation pairs, fitted on the other training pairs; trial 0 is its default."""
    from recharness.baselines import BASELINES
    from recharness.baselines.item_mean import ItemMeanCtr
    from recharness.runner.train import _budget

    assert _budget("item_mean", 7) == 7 and _budget("popularity", 7) == 0
    train = _ctr_train(dataset_dir, tmp_path / "ctr", valid_fraction=0.2)
    valid = pl.read_parquet(tmp_path / "ctr" / "recbench" / "valid.parquet")
    obj = tuning.objective_for(BASELINES.get("item_mean"), train, 0)
    assert obj.metric == "auc" and obj.size == valid.height and "valid.parquet" in obj.description
    assert not _keys(valid) & _keys(obj.fit_on.pairs)  # the trial's fit never sees a validation pair
    model = ItemMeanCtr.create(smoothing=0.5).fit(obj.fit_on)
    assert obj.score(model) == pytest.approx(_by_hand(model, valid), abs=1e-12)
    search = tuning.tune(ItemMeanCtr, train, 4, seed=0)
    trials = search["trials"]
    assert len(trials) == 4 and trials[0]["params"] == {"smoothing": 10.0}
    assert search["best"]["valid"] == max(t["valid"] for t in trials)
    # the setting matters: the trials' validation AUCs differ, and each is the AUC of its own m by hand
    assert len({round(t["valid"], 12) for t in trials}) > 1
    for t in trials:
        fitted = ItemMeanCtr.create(**t["params"]).fit(obj.fit_on)
        assert t["valid"] == pytest.approx(_by_hand(fitted, valid), abs=1e-12)
    assert all(0.01 <= t["params"]["smoothing"] <= 10_000 for t in trials)
    best = ItemMeanCtr.create(**search["best"]["params"]).fit(obj.fit_on)
    assert obj.score(best) == pytest.approx(search["best"]["valid"], abs=1e-12)
