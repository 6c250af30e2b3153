"""Semantic IDs (`recharness.data.semantic_ids`): collisions, disambiguation, determinism, cache.

The models here are tiny (tens of items, a few epochs); ML-1M numbers are in
benchmarks/results/semantic_ids.md (benchmarks/bench_semantic_ids.py).
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from recharness.core.errors import ConfigError
from recharness.data import semantic_ids as si


@pytest.fixture(autouse=True)
def one_thread():
    torch = pytest.importorskip("torch")
    prev = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(prev)


def clustered(n_clusters=8, per=10, dim=16, seed=0):
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(n_clusters, dim)) * 5
    v = np.concatenate([c + rng.normal(scale=0.1, size=(per, dim)) for c in centers]).astype(np.float32)
    labels = np.repeat(np.arange(n_clusters), per)
    return [f"i{k}" for k in range(len(v))], v, labels


def test_collision_rate_and_disambiguation_by_hand():
    codes = np.array([[0, 0], [0, 0], [0, 1], [1, 1], [0, 0], [0, 1]])
    # tuples: (0,0) x3, (0,1) x2, (1,1) x1 -> 3 distinct of 6
    assert si.collision_rate(codes) == pytest.approx(0.5)
    assert si.collision_rate(np.array([[1, 2], [2, 1]])) == 0.0
    assert si.collision_rate(np.zeros((0, 2))) == 0.0
    d = si.disambiguate(codes)
    assert d[:, -1].tolist() == [0, 1, 0, 0, 2, 1]
    assert len(np.unique(d, axis=0)) == len(d)
    assert si.codebook_usage(codes, 4) == [0.5, 0.5]


def test_rqkmeans_recovers_clusters_and_unique_codes():
    pytest.importorskip("sklearn")
    ids, v, labels = clustered()
    sid = si.fit_semantic_ids(ids, v, method="rqkmeans", levels=2, codebook_size=8, seed=0)
    assert sid.codes.shape == (80, 3)
    assert len(np.unique(sid.codes, axis=0)) == 80
    # level 0 is the cluster: a bijection between true clusters and first codes
    pairs = set(zip(labels.tolist(), sid.codes[:, 0].tolist()))
    assert len(pairs) == 8 and len({p[1] for p in pairs}) == 8
    assert sid.usage[0] == 1.0
    assert sid.collision_rate == pytest.approx(si.collision_rate(sid.codes[:, :-1]))
    tok = sid.tokens()
    assert tok[:, 1].min() >= 8 and tok.max() < sid.vocab_size
    again = si.fit_semantic_ids(ids, v, method="rqkmeans", levels=2, codebook_size=8, seed=0)
    assert np.array_equal(again.codes, sid.codes)


def test_rqvae_tiny_is_deterministic_and_unique():
    pytest.importorskip("vector_quantize_pytorch")
    ids, v, _ = clustered(n_clusters=4, per=8, dim=16)
    a = si.fit_semantic_ids(ids, v, method="rqvae", levels=2, codebook_size=8, seed=1, epochs=3)
    b = si.fit_semantic_ids(ids, v, method="rqvae", levels=2, codebook_size=8, seed=1, epochs=3)
    assert a.codes.shape == (32, 3) and a.codes.dtype == np.int32
    assert np.array_equal(a.codes, b.codes)
    assert len(np.unique(a.codes, axis=0)) == 32
    assert 0 <= a.collision_rate < 1 and len(a.usage) == 2
    assert a.codes[:, :2].max() < 8 and "reconstruction_mse" in a.info


def test_bad_settings():
    with pytest.raises(ConfigError, match="unknown semantic-id method"):
        si.fit_semantic_ids(["a"], np.zeros((1, 4)), method="pq")
    with pytest.raises(ConfigError, match="do not match"):
        si.fit_semantic_ids(["a", "b"], np.zeros((1, 4)), method="rqkmeans")


def test_cache_hit_does_not_recompute(tmp_path, monkeypatch):
    pytest.importorskip("sklearn")
    monkeypatch.setenv("RECHARNESS_HOME", str(tmp_path / "home"))
    ids, v, _ = clustered(n_clusters=4, per=5)
    items = pl.DataFrame({"item_id": ids, "title": ids})
    monkeypatch.setattr(si, "item_embeddings", lambda name, df, enc, **k: (list(ids), v))
    calls = []
    real_fit = si.fit_semantic_ids

    def counting_fit(*a, **k):
        calls.append(k)
        return real_fit(*a, **k)

    monkeypatch.setattr(si, "fit_semantic_ids", counting_fit)
    first = si.semantic_ids("toy", items, method="rqkmeans", levels=2, codebook_size=4, progress=False)
    second = si.semantic_ids("toy", items, method="rqkmeans", levels=2, codebook_size=4, progress=False)
    assert len(calls) == 1
    assert np.array_equal(first.codes, second.codes) and second.item_ids == ids
    assert second.collision_rate == first.collision_rate and second.usage == first.usage
    files = sorted(p.name for p in (tmp_path / "home" / "datasets" / "toy" / "embeddings").iterdir())
    assert len(files) == 2 and files[0].endswith(".json") and files[1].endswith(".npz")
    # other settings or other vectors: a new key, computed again
    si.semantic_ids("toy", items, method="rqkmeans", levels=2, codebook_size=4, seed=1, progress=False)
    assert len(calls) == 2
    monkeypatch.setattr(si, "item_embeddings", lambda name, df, enc, **k: (list(ids), v + 1))
    si.semantic_ids("toy", items, method="rqkmeans", levels=2, codebook_size=4, progress=False)
    assert len(calls) == 3
    # a damaged file is recomputed, not trusted
    monkeypatch.setattr(si, "item_embeddings", lambda name, df, enc, **k: (list(ids), v))
    for p in (tmp_path / "home" / "datasets" / "toy" / "embeddings").glob("*.npz"):
        p.write_bytes(b"garbage")
    again = si.semantic_ids("toy", items, method="rqkmeans", levels=2, codebook_size=4, progress=False)
    assert np.array_equal(again.codes, first.codes) and len(calls) == 4


def test_import_is_light():
    import subprocess
    import sys

    code = ("import sys, recharness.data.semantic_ids, recharness.models.cbs; "
            "print(any(m in sys.modules for m in ('torch', 'sklearn', 'vector_quantize_pytorch')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_killed_rqvae_fit_goes_on_from_its_checkpoint_to_the_uninterrupted_codes(tmp_path, monkeypatch):
    """Killed just after its epoch-20 checkpoint (of 25; one every 10 epochs), `semantic_ids` goes on from epoch
    20 on the next call: the same codes, epochs' log and training info as one uninterrupted fit, and the
    checkpoint folder is gone once the codes are cached. The codebooks' k-means init and EMA state, Adam and
    both RNGs must come back for that."""
    pytest.importorskip("vector_quantize_pytorch")
    from recharness.core.fit_checkpoint import EpochCheckpoint

    ids, v, _ = clustered(n_clusters=4, per=8, dim=16)
    items = pl.DataFrame({"item_id": ids, "title": ids})
    monkeypatch.setattr(si, "item_embeddings", lambda name, df, enc, **k: (list(ids), v))
    settings = {"method": "rqvae", "levels": 2, "codebook_size": 8, "seed": 1, "epochs": 25, "progress": False}
    whole = si.fit_semantic_ids(ids, v, **{k: x for k, x in settings.items() if k != "progress"})

    monkeypatch.setenv("RECHARNESS_HOME", str(tmp_path / "home"))
    real_save, saves = EpochCheckpoint.save, []

    def dies_after_second_save(self, epoch, tensors, state):
        real_save(self, epoch, tensors, state)
        saves.append(epoch)
        if len(saves) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(EpochCheckpoint, "save", dies_after_second_save)
    with pytest.raises(KeyboardInterrupt):
        si.semantic_ids("toy", items, **settings)
    assert saves == [10, 20]
    folder = tmp_path / "home" / "datasets" / "toy" / "embeddings"
    (ck,) = folder.glob("*.fit-checkpoint")
    assert sorted(p.name for p in ck.iterdir()) == ["epoch-20.pt", "state.json"]
    monkeypatch.undo()
    monkeypatch.setenv("RECHARNESS_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(si, "item_embeddings", lambda name, df, enc, **k: (list(ids), v))

    resumed = si.semantic_ids("toy", items, **settings)
    assert np.array_equal(resumed.codes, whole.codes)
    strip = lambda log: [{k: x for k, x in e.items() if k != "seconds"} for e in log]  # noqa: E731
    assert strip(resumed.log) == strip(whole.log) and len(resumed.log) == 25
    earlier = resumed.info.pop("earlier_sittings_s")
    assert resumed.info == {**whole.info, "resumed_after_epoch": 20} and 0 < earlier < resumed.seconds
    assert not list(folder.glob("*.fit-checkpoint"))


def test_an_rqvae_checkpoint_that_cannot_be_written_or_read_does_not_stop_the_fit(tmp_path, monkeypatch, capsys):
    """A data home where the checkpoint cannot be written: one note, the fit goes on to the same codes. A
    checkpoint whose tensors do not fit the network (another library version under the same stamp): started
    afresh, nothing half-loaded."""
    pytest.importorskip("vector_quantize_pytorch")
    import torch

    from recharness.core.fit_checkpoint import EpochCheckpoint

    ids, v, _ = clustered(n_clusters=4, per=8, dim=16)
    args = dict(levels=2, codebook_size=8, seed=1, epochs=12, progress=False)
    whole = si._rqvae(v, **args)

    def full(self, *a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(EpochCheckpoint, "save", full)
    codes, info, _ = si._rqvae(v, **args, checkpoint=EpochCheckpoint(tmp_path / "ck", {"k": 1}))
    assert np.array_equal(codes, whole[0]) and "could not checkpoint the RQ-VAE fit" in capsys.readouterr().err
    monkeypatch.undo()

    ck = EpochCheckpoint(tmp_path / "ck2", {"k": 1})
    si._rqvae(v, **{**args, "epochs": 15}, checkpoint=ck)  # leaves epoch 10's checkpoint (nothing removes it here)
    state = torch.load(tmp_path / "ck2" / "epoch-10.pt", weights_only=True)
    state["rvq"] = {k + "_renamed": t for k, t in state["rvq"].items()}
    torch.save(state, tmp_path / "ck2" / "epoch-10.pt")
    codes, info, _ = si._rqvae(v, **args, checkpoint=EpochCheckpoint(tmp_path / "ck2", {"k": 1}))
    assert "resumed_after_epoch" not in info and np.array_equal(codes, whole[0])


def test_an_rqvae_of_no_epochs_is_refused_not_mislabelled():
    """It used to train 1 epoch and record 0 (another cache key for the same codes)."""
    items = pl.DataFrame({"item_id": ["1", "2"], "title": ["A", "B"]})
    with pytest.raises(ConfigError, match="at least 1 epoch"):
        si.semantic_ids("toy", items, method="rqvae", epochs=0)
