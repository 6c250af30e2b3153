"""`recharness train --tune N` for the trained references: SASRec (NDCG@10 on the build's validation
rows, each trial capped at the stated epochs) and a DLRM (AUC on the validation slice of the training
pairs), on a tiny synthetic dataset built into real run directories.

What must hold: N trials, trial 0 the defaults, the chosen parameters the argmax of the trial values,
the model trained afterwards carrying them (its saved settings), and nothing a trial fits on or is
scored on being a test sample (checked on the samples' users and items)."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

pytest.importorskip("optuna")
pytest.importorskip("torch")
pytest.importorskip("torch_rechub")

from recharness.baselines import tuning  # noqa: E402
from recharness.baselines.dlrm import baseline as dlrm_mod  # noqa: E402
from recharness.baselines.dlrm.features import FeatureSpace  # noqa: E402
from recharness.baselines import sasrec as sasrec_mod  # noqa: E402
from recharness.core.io import read_jsonl  # noqa: E402
from recharness.data.store import Dataset, save_dataset  # noqa: E402
from recharness.runner import pipeline  # noqa: E402
from recharness.runner.train import train  # noqa: E402

N_USERS, N_ITEMS, N_POS, N_NEG = 60, 40, 12, 6


@pytest.fixture(scope="module")
def dataset_dir(tmp_path_factory):
    return synthetic_dataset(tmp_path_factory.mktemp("data"), "synthetic-tune")


def synthetic_dataset(directory, name: str):
    """Each user: 12 positives (rating 5) and 6 negatives (rating 1) of distinct items, one per second; saved
    as `name` under `directory`."""
    rng = np.random.default_rng(0)
    rows = []
    for u in range(N_USERS):
        items = rng.permutation(N_ITEMS)[: N_POS + N_NEG]
        ratings = [5.0] * N_POS + [1.0] * N_NEG
        order = rng.permutation(N_POS + N_NEG)
        for t, k in enumerate(order):
            rows.append((f"u{u}", f"i{items[k]}", ratings[k], 1_000_000 + 100 * u + t))
    inter = pl.DataFrame(rows, schema={"user_id": pl.Utf8, "item_id": pl.Utf8, "rating": pl.Float64,
                                       "timestamp": pl.Int64}, orient="row")
    items = pl.DataFrame({"item_id": [f"i{k}" for k in range(N_ITEMS)],
                          "title": [f"Film number {k} ({1980 + k})" for k in range(N_ITEMS)]})
    users = pl.DataFrame({"user_id": [f"u{u}" for u in range(N_USERS)]})
    return save_dataset(Dataset(name, inter, items, users, meta={"domain": "movie"}), directory / name)


def _spy(monkeypatch):
    """Record the objectives the tuner builds and every Objective.score call."""
    seen: list[tuning.Objective] = []
    real = tuning.objective_for

    def spy(cls, train, seed):
        obj = real(cls, train, seed)
        seen.append(obj)
        return obj

    monkeypatch.setattr(tuning, "objective_for", spy)
    return seen


def _check_search(search: dict, cls, trials: int) -> dict:
    """N trials, trial 0 = the defaults, the chosen parameters the argmax of the trial values."""
    assert search["budget"]["trials"] == trials and len(search["trials"]) == trials
    assert [t["trial"] for t in search["trials"]] == list(range(trials))
    defaults = cls.defaults()
    assert search["default"] == json.loads(json.dumps(defaults))
    assert search["trials"][0]["params"] == {k: defaults[k] for k in cls.space}
    assert all(set(t["params"]) == set(cls.space) and t["seconds"] >= 0 for t in search["trials"])
    values = [t["valid"] for t in search["trials"]]
    assert all(np.isfinite(values))
    k = int(np.argmax(values))  # the first of equal values
    assert search["best"] == {"trial": k, "params": search["trials"][k]["params"], "valid": values[k]}
    assert [t["best"] for t in search["trials"]] == list(np.maximum.accumulate(values))
    assert len({json.dumps(t["params"], sort_keys=True) for t in search["trials"]}) == trials  # a search, not one point
    return search["best"]["params"]


def test_sasrec_tune_on_validation_rows_with_an_epoch_cap(dataset_dir, tmp_path, monkeypatch):
    out = tmp_path / "seqrec"
    pipeline.build("recbench", str(dataset_dir), out, tasks=["seqrec"], seed=0, limit=20,
                   options={"history_len": 5})
    samples = list(read_jsonl(out / "samples.jsonl"))
    valid_rows = pl.read_parquet(out / "recbench" / "seqrec_valid.parquet")
    # the refit's own limit (3) differs from the per-trial cap (2), so the saved settings tell them apart
    monkeypatch.setitem(sasrec_mod.DEFAULTS, "max_epochs", 3)
    monkeypatch.setitem(sasrec_mod.DEFAULTS, "hidden", 32)
    monkeypatch.setitem(sasrec_mod.DEFAULTS, "batch_size", 64)
    objectives = _spy(monkeypatch)
    fits: list[tuple[dict, int]] = []
    ranked: list[tuple[tuple[str, ...], str]] = []  # every (history, target) SASRec validated or was scored on
    real_fit, real_ranks = sasrec_mod.SASRec.fit, sasrec_mod.SASRec._ranks

    def fit(self, train_data):
        done = real_fit(self, train_data)
        fits.append((dict(self.params), len(self.log["epochs"])))
        return done

    def ranks(self, hist, target):
        ranked.extend((tuple(self.items[c - 1] for c in h), self.items[t - 1]) for h, t in zip(hist, target) if t)
        return real_ranks(self, hist, target)

    monkeypatch.setattr(sasrec_mod.SASRec, "fit", fit)
    monkeypatch.setattr(sasrec_mod.SASRec, "_ranks", ranks)
    train(out, suite="recbench", baselines=["sasrec"], latency_runs=1, tune=3, tune_epochs=2)

    model_dir = out / "models" / "sasrec"
    search = json.loads((model_dir / "tuning.json").read_text())
    chosen = _check_search(search, sasrec_mod.SASRec, 3)
    assert search["budget"]["epochs_per_trial"] == 2
    # every trial trained exactly the cap (max_epochs = patience = 2), the refit with the model's own limit
    assert [(p["max_epochs"], p["patience"], n) for p, n in fits[:3]] == [(2, 2, 2)] * 3
    assert len(fits) == 4 and fits[3][0]["max_epochs"] == 3 and fits[3][0]["patience"] == 3
    assert fits[3][0] == {**sasrec_mod.DEFAULTS, **chosen, "max_len": 5}
    # the trained model is the chosen configuration: its saved settings and the prediction records
    saved = json.loads((model_dir / "config.json").read_text())["settings"]
    assert {k: saved[k] for k in chosen} == chosen and saved["max_epochs"] == 3
    recs = list(read_jsonl(out / "predictions" / "reference" / "sasrec.jsonl"))
    assert {json.dumps({k: r["model"]["settings"][k] for k in chosen}, sort_keys=True) for r in recs} == {
        json.dumps(chosen, sort_keys=True)}
    assert all(r["tune_trials"] == 3 and r["tune_epochs"] == 2 for r in recs)
    logged = json.loads((model_dir / "train.json").read_text())
    assert logged["tuning"]["best"] == search["best"] and logged["epochs"] >= 1
    # validation: the build's validation rows (second-to-last positives), never a test sample
    (obj,) = objectives
    keys = obj.keys()
    test_keys = {(s["user_id"], s["target"]) for s in samples}
    assert len(keys) == obj.size == valid_rows.height == len(samples) and f"on {obj.size} validation" in search["objective"]
    assert set(keys) == set(zip(valid_rows["user_id"], valid_rows["target"]))
    assert not set(keys) & test_keys
    # everything SASRec ranked before predicting (early stopping and the trials' scores) is a validation row
    test_rows = {(tuple(s["history"]), s["target"]) for s in samples}
    valid_set = {(tuple(h), t) for h, t in zip(valid_rows["history"].to_list(), valid_rows["target"])}
    assert ranked and set(ranked) <= valid_set and not set(ranked) & test_rows
    # the trial value is the objective's NDCG@10 on exactly those rows: refitting trial 0 gives it again
    first = sasrec_mod.SASRec.create(seed=0, **search["trials"][0]["params"], max_epochs=2, patience=2)
    assert obj.score(real_fit(first, obj.fit_on)) == pytest.approx(search["trials"][0]["valid"])
    # the report shows the search: budget, the default's and the chosen validation value, the chosen settings
    from recharness.core.rundir import RunDir
    from recharness.report.html import Palette, fmt, tuning_section

    html = "".join(tuning_section(RunDir(out), RunDir(out).model_dirs(), Palette([])))
    default = next(t["valid"] for t in search["trials"] if t["trial"] == 0)
    assert (f"<td>sasrec</td><td>3 of 3 × 2 epochs</td><td>{fmt(search['seconds'])}</td>" in html
            and f"<td>{fmt(default)}</td><td>{fmt(search['best']['valid'])} (trial {search['best']['trial']})</td>"
            in html)
    for k, v in chosen.items():
        assert f"{k}={fmt(v) if isinstance(v, float) else v}" in html
    if any(t["valid"] for t in search["trials"]):  # a chart when some value is not 0, else a line saying so
        assert "alt='tuning curves'" in html or 'alt="tuning curves"' in html, html[:300]
    else:
        assert "No tuning curve" in html


def test_tuning_section_escapes_what_it_shows(tmp_path):
    """A search's texts (objective, settings) come from files: shown escaped, never as markup."""
    from recharness.core.rundir import RunDir
    from recharness.report.html import Palette, tuning_section

    d = tmp_path / "models" / "evil<b>"
    d.mkdir(parents=True)
    (d / "tuning.json").write_text(json.dumps({
        "budget": {"trials": 2}, "seconds": 1.5, "objective": "<script>alert(1)</script>",
        "best": {"trial": 1, "valid": 0.2, "params": {"k": "<img src=x>"}},
        "trials": [{"trial": 0, "valid": 0.1, "params": {}}, {"trial": 1, "valid": 0.2, "params": {}}]}))
    html = "".join(tuning_section(RunDir(tmp_path), RunDir(tmp_path).model_dirs(), Palette([])))
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<img src=x>" not in html and "k=&lt;img src=x&gt;" in html and "evil&lt;b&gt;" in html


def test_best_so_far_is_the_running_maximum_by_trial():
    from recharness.report.html import best_so_far

    trials = [{"trial": 2, "valid": 0.30}, {"trial": 0, "valid": 0.20}, {"trial": 1, "valid": 0.10},
              {"trial": 3, "valid": None}, {"trial": 4, "valid": 0.25}]
    assert best_so_far(trials) == [(0, 0.20), (1, 0.20), (2, 0.30), (3, 0.30), (4, 0.30)]
    assert best_so_far([{"trial": 0, "valid": None}]) == []


def test_dlrm_tune_on_the_validation_pairs_and_refit_the_chosen_configuration(dataset_dir, tmp_path, monkeypatch):
    out = tmp_path / "ctr"
    pipeline.build("recbench", str(dataset_dir), out, tasks=["ctr"], seed=0, limit=20,
                   options={"valid_fraction": 0.2, "history_len": 5})
    samples = list(read_jsonl(out / "samples.jsonl"))
    valid = pl.read_parquet(out / "recbench" / "valid.parquet")
    monkeypatch.setitem(dlrm_mod.COMMON, "max_epochs", 2)
    objectives = _spy(monkeypatch)
    encoded: list[tuple[str, str]] = []  # every (user, item) pair a DeepFM fitted or validated on
    real_encode = FeatureSpace.encode_frame

    def encode(self, df):
        encoded.extend(zip(df["user_id"].to_list(), df["item_id"].to_list()))
        return real_encode(self, df)

    monkeypatch.setattr(FeatureSpace, "encode_frame", encode)
    train(out, suite="recbench", baselines=["deepfm"], latency_runs=1, tune=3)

    model_dir = out / "models" / "deepfm"
    search = json.loads((model_dir / "tuning.json").read_text())
    chosen = _check_search(search, dlrm_mod.DeepFM, 3)
    assert "epochs_per_trial" not in search["budget"]  # the DLRMs run their own early stopping
    saved = json.loads((model_dir / "config.json").read_text())["settings"]
    assert {k: saved[k] for k in chosen} == chosen
    # trials and refit are seeded alike on the same pairs: the refitted model's best validation AUC is the
    # chosen trial's value, so the objective is the fit's own validation slice
    logged = json.loads((model_dir / "train.json").read_text())
    assert logged["metric"] == "auc" and logged["best"] == pytest.approx(search["best"]["valid"], abs=1e-12)
    assert logged["tuning"]["best"] == search["best"]
    (obj,) = objectives
    keys = obj.keys()
    assert obj.metric == "auc" and len(keys) == obj.size == valid.height > 0
    assert keys == list(zip(valid["user_id"], valid["item_id"]))
    test_ids = {s["id"] for s in samples}
    assert test_ids and not {f"ctr-{u}-{i}" for u, i in keys} & test_ids
    assert encoded and not {f"ctr-{u}-{i}" for u, i in encoded} & test_ids
    # a second `train` with the same budget keeps the model; another budget searches again
    before = (model_dir / "tuning.json").stat().st_mtime_ns
    train(out, suite="recbench", baselines=["deepfm"], latency_runs=1, tune=3)
    assert (model_dir / "tuning.json").stat().st_mtime_ns == before
    train(out, suite="recbench", baselines=["deepfm"], latency_runs=1, tune=2)
    assert len(json.loads((model_dir / "tuning.json").read_text())["trials"]) == 2
    # refitted without a search (the defaults): the earlier search's record goes, or the report would show it tuned
    train(out, suite="recbench", baselines=["deepfm"], latency_runs=1)
    assert not (model_dir / "tuning.json").exists() and "tuning" not in json.loads((model_dir / "train.json").read_text())


@pytest.mark.parametrize("task", ["sequential", "direct"])
def test_history_rankers_tune_on_an_llmrec_build_without_a_test_target(dataset_dir, tmp_path, task):
    """The leave-last-out search of the history rankers (ItemKNN, EASE, ALS, Markov) on an LLMRec build: what a
    trial fits on and what it is scored on hold no (user, target) of a test sample, and the validation pairs are
    each user's last training item."""
    from recharness.baselines.base import TrainData
    from recharness.data.store import load_dataset

    out = tmp_path / task
    pipeline.build("llmrec", str(dataset_dir), out, tasks=[task], seed=0, limit=30)
    samples = list(read_jsonl(out / "samples.jsonl"))
    test_keys = {(s["user_id"], s["target"]) for s in samples}
    assert len(test_keys) == len(samples) == 30
    data = TrainData.of_build(load_dataset(str(dataset_dir)), out, "llmrec")
    obj = tuning.ranking_objective(data, 0)
    keys = obj.keys()
    assert len(keys) == obj.size == N_USERS  # one validation pair per user
    assert not set(keys) & test_keys
    fitted_pairs = set(obj.fit_on.interactions.select("user_id", "item_id").iter_rows())
    assert not fitted_pairs & test_keys and not fitted_pairs & set(keys)
    # the validation pair is each user's last item the build trains on (its test target and later excluded)
    trained = data.interactions.sort("timestamp")
    last = dict(trained.group_by("user_id", maintain_order=True).agg(pl.col("item_id").last()).iter_rows())
    assert sorted(keys) == sorted(last.items())
