"""A killed SASRec fit goes on from its last whole epoch (`core.fit_checkpoint.EpochCheckpoint`) and ends
with exactly the weights and log of an uninterrupted fit; a checkpoint of other settings is not resumed."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

torch = pytest.importorskip("torch")

from recharness.baselines import TrainData, fit  # noqa: E402
from recharness.baselines import sasrec as sasrec_mod  # noqa: E402
from recharness.baselines.base import sequence_positives  # noqa: E402
from recharness.core.rundir import RunDir  # noqa: E402

SMALL = {"hidden": 16, "inner": 32, "batch_size": 64, "max_epochs": 6, "patience": 10, "dropout": 0.3, "lr": 5e-3}


@pytest.fixture(scope="module")
def data() -> TrainData:
    rng = np.random.default_rng(0)
    items = [f"i{k}" for k in range(30)]
    rows = []
    for u in range(60):
        start, step = int(rng.integers(30)), int(rng.choice([1, 3]))
        seq = [items[(start + step * j) % 30] for j in range(9)]
        rows.append({"user_id": f"u{u}", "history": seq[:-1], "target": seq[-1], "part": "train" if u < 48 else "valid"})
    seqs = pl.DataFrame(rows)
    return TrainData(sequence_positives(seqs), items, sequences=seqs)


def _dies_at_validation(monkeypatch, call: int) -> None:
    """The process dies (KeyboardInterrupt) at the `call`-th validation, after that epoch's training."""
    real, calls = sasrec_mod.SASRec._valid_ndcg, []

    def valid(self, hist, target):
        calls.append(1)
        if len(calls) == call:
            raise KeyboardInterrupt
        return real(self, hist, target)

    monkeypatch.setattr(sasrec_mod.SASRec, "_valid_ndcg", valid)


def _same_weights(a, b) -> bool:
    sa, sb = a.net.state_dict(), b.net.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def _epochs(model) -> list[tuple]:
    return [(e["epoch"], e["loss"], e["valid_ndcg@10"], e["samples"]) for e in model.log["epochs"]]


def test_a_killed_fit_goes_on_from_its_last_epoch_to_the_uninterrupted_weights(data, tmp_path, monkeypatch):
    whole, _ = fit("sasrec-1l", data, 3, SMALL)  # as the resumed fits below: the same thread count
    assert len(whole.log["epochs"]) == SMALL["max_epochs"] and "resumed_after_epoch" not in whole.log

    stamp = {"build": "b1"}
    _dies_at_validation(monkeypatch, 4)  # epochs 1-3 checkpointed, killed while validating epoch 4
    with pytest.raises(KeyboardInterrupt):
        fit("sasrec-1l", data, 3, SMALL, checkpoint=(tmp_path / "ck", stamp))
    assert sorted(p.name for p in (tmp_path / "ck").iterdir()) == ["epoch-3.pt", "state.json"]  # older epochs removed
    killed_s = json.loads((tmp_path / "ck" / "state.json").read_text())["state"]["fit_s"]
    monkeypatch.undo()

    resumed, seconds = fit("sasrec-1l", data, 3, SMALL, checkpoint=(tmp_path / "ck", stamp))
    assert resumed.log["resumed_after_epoch"] == 3 and resumed.log["earlier_sittings_s"] == round(killed_s, 3) > 0
    assert _epochs(resumed) == _epochs(whole)  # epochs 1-3 from the checkpoint, 4-6 trained again
    assert resumed.log["best_epoch"] == whole.log["best_epoch"]
    assert resumed.log["train_samples"] == whole.log["train_samples"]
    assert _same_weights(resumed, whole)  # bit for bit: RNG states and optimiser moments went on

    # another seed (its settings), another build or other data: not this fit's checkpoint, it starts at epoch 1
    other, _ = fit("sasrec-1l", data, 4, SMALL, checkpoint=(tmp_path / "ck", stamp))
    assert "resumed_after_epoch" not in other.log
    again, _ = fit("sasrec-1l", data, 3, SMALL, checkpoint=(tmp_path / "ck", {"build": "b2"}))
    assert "resumed_after_epoch" not in again.log and _same_weights(again, whole)
    fewer = TrainData(data.interactions, data.items, sequences=data.sequences.head(40))
    assert "resumed_after_epoch" not in fit("sasrec-1l", fewer, 3, SMALL, checkpoint=(tmp_path / "ck", stamp))[0].log


@pytest.mark.parametrize("stride", [None, 3])
def test_a_fit_resumed_just_before_early_stopping_stops_where_the_whole_one_did(data, tmp_path, monkeypatch, stride):
    """Patience 2: the whole fit stops early, two epochs after its best; killed while validating its last epoch
    (or the one before), the resumed fit takes the stale count and the best epoch's weights from the checkpoint."""
    settings = {**SMALL, "max_epochs": 40, "patience": 2, "lr": 3e-2, "stride": stride}
    whole, _ = fit("sasrec-1l", data, 1, settings)
    last = len(whole.log["epochs"])
    assert last < settings["max_epochs"] and whole.log["best_epoch"] == last - 2  # stopped by patience
    for kill in (last, last - 1):
        ck = tmp_path / f"ck{kill}"
        _dies_at_validation(monkeypatch, kill)
        with pytest.raises(KeyboardInterrupt):
            fit("sasrec-1l", data, 1, settings, checkpoint=(ck, {"build": "b"}))
        monkeypatch.undo()
        resumed, _ = fit("sasrec-1l", data, 1, settings, checkpoint=(ck, {"build": "b"}))
        assert resumed.log["resumed_after_epoch"] == kill - 1
        assert _epochs(resumed) == _epochs(whole) and resumed.log["best_epoch"] == whole.log["best_epoch"]
        assert _same_weights(resumed, whole)  # the best epoch's weights, put back from the checkpoint


def test_train_goes_on_from_the_checkpoint_and_removes_it_once_the_model_is_saved(data, tmp_path, monkeypatch):
    from recharness.runner import train as train_mod

    monkeypatch.setattr(sasrec_mod, "DEFAULTS", {**sasrec_mod.DEFAULTS, **SMALL})
    rd = RunDir(tmp_path / "run")
    data_id = {"build": "b1", "dataset": "toy", "suite": "recbench"}
    lines: list[str] = []
    whole, _ = fit("sasrec-1l", data, 0)

    _dies_at_validation(monkeypatch, 3)
    with pytest.raises(KeyboardInterrupt):
        train_mod._fit(rd, "sasrec-1l", data, data_id, 0, 0, None, lines.append)
    assert (rd.fit_checkpoint("sasrec-1l") / "state.json").exists()
    monkeypatch.undo()
    monkeypatch.setattr(sasrec_mod, "DEFAULTS", {**sasrec_mod.DEFAULTS, **SMALL})

    model, _ = train_mod._fit(rd, "sasrec-1l", data, data_id, 0, 0, None, lines.append)
    assert "sasrec-1l: went on from a killed fit's checkpoint after epoch 2" in lines
    assert _same_weights(model, whole) and _epochs(model) == _epochs(whole)
    assert not rd.fit_checkpoint("sasrec-1l").exists() and (rd.model_dir("sasrec-1l") / "model.pt").exists()


def test_a_checkpoint_from_another_cpu_kind_is_not_resumed(data, tmp_path, monkeypatch):
    """Another vector instruction set rounds differently: a run directory moved to such a machine fits afresh
    rather than end with weights no uninterrupted fit gives."""
    _dies_at_validation(monkeypatch, 3)
    with pytest.raises(KeyboardInterrupt):
        fit("sasrec-1l", data, 3, SMALL, checkpoint=(tmp_path / "ck", {"build": "b1"}))
    monkeypatch.undo()
    here = torch.backends.cpu.get_cpu_capability()
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "NO AVX" if here != "NO AVX" else "AVX2")
    elsewhere, _ = fit("sasrec-1l", data, 3, SMALL, checkpoint=(tmp_path / "ck", {"build": "b1"}))
    assert "resumed_after_epoch" not in elsewhere.log
