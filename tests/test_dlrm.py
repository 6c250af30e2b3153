"""RecBench's DLRMs (recharness.baselines.dlrm): the composed models against their papers'
equations on hand-set weights, and every model learning a small synthetic CTR problem.

The synthetic problem: items of two kinds, users who like one kind (their history is drawn from
it), a click more likely when the candidate is of the liked kind. A model that represents the user
by the mean of the history's item embeddings (RecBench Eq. 2) can learn it; item popularity alone
cannot (both kinds are equally clicked overall).
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import numpy as np
import polars as pl
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_rechub")

from recharness.baselines.base import TrainData
from recharness.baselines.dlrm import DLRMS, register_dlrms
from recharness.baselines.dlrm.baseline import VARIANTS, DlrmBaseline
from recharness.baselines.dlrm.features import (
    OOV,
    PAD,
    FeatureSpace,
    Vocab,
    build_space,
    tokenize,
)
from recharness.baselines.dlrm.models import (
    MODELS,
    BilinearFusion,
    FeatureGate,
    FinalMLP,
    GatedCrossNetwork,
    InnerProduct,
    MaskBlock,
    MaskNet,
    make_model,
)
from recharness.core.registry import Registry
from recharness.metrics.classification import auc
from recharness.tasks.recbench.ctr import CtrTask
from recharness.tasks.recbench.seqrec import SeqrecTask

N_ITEMS, N_USERS, HIST = 40, 300, 8
#: fast settings for the tiny problem (the paper's batch of 5,000 would be one step per epoch)
FAST = {"batch_size": 256, "lr": 5e-3, "max_epochs": 40, "patience": 4, "embed_dim": 8, "mlp_dims": [32, 16],
        "dropout": 0.0, "threads": 1}


def _kind(item: int) -> int:
    return item % 2


def _pairs(n: int, seed: int, users=range(N_USERS)) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    users = np.asarray(list(users))
    rows = []
    for _ in range(n):
        u = int(rng.choice(users))
        liked = [i for i in range(N_ITEMS) if _kind(i) == u % 2]
        hist = [str(i) for i in rng.choice(liked, size=HIST)]
        item = int(rng.integers(N_ITEMS))
        p = 0.9 if _kind(item) == u % 2 else 0.1
        rows.append({"user_id": str(u), "item_id": str(item), "label": int(rng.random() < p),
                     "timestamp": 0, "history": hist})
    return pl.DataFrame(rows, schema={"user_id": pl.Utf8, "item_id": pl.Utf8, "label": pl.Int8,
                                      "timestamp": pl.Int64, "history": pl.List(pl.Utf8)})


ITEMS = pl.DataFrame({"item_id": [str(i) for i in range(N_ITEMS)],
                      "title": [f"{'comedy' if _kind(i) else 'horror'} film number{i} ({1990 + i})" for i in range(N_ITEMS)]})


def _vectors(dim: int = 12, seed: int = 0):
    rng = np.random.default_rng(seed)
    direction = rng.normal(size=dim)
    vecs = np.stack([(1 if _kind(i) else -1) * direction + 0.3 * rng.normal(size=dim) for i in range(N_ITEMS)])
    return [str(i) for i in range(N_ITEMS)], vecs.astype(np.float32)


@pytest.fixture(scope="module")
def data():
    train, valid, test = _pairs(3000, 1), _pairs(600, 2), _pairs(800, 3)
    samples = [{"id": f"ctr-{k}", "task": "ctr", **r} for k, r in enumerate(test.iter_rows(named=True))]
    td = TrainData(train.filter(pl.col("label") == 1), ITEMS["item_id"].to_list(), train, valid=valid,
               item_table=ITEMS, dataset_name="synthetic")
    return td, samples


def _auc(model: DlrmBaseline, samples: list[dict]) -> float:
    preds = model.predict(samples, CtrTask())
    return auc([s["label"] for s in samples], [preds[s["id"]]["parsed"]["p_yes"] for s in samples])


def _make(name: str, **kw) -> DlrmBaseline:
    extra = {"vectors": _vectors(), "encoder": "synthetic"} if VARIANTS[name].representation == "semantic" else {}
    return VARIANTS[name](seed=0, progress=False, **{**FAST, **extra, **kw})


# ---------------------------------------------------------------- equations, hand-set weights

def _space(n_items=5, d=2, use_user=False) -> FeatureSpace:
    return FeatureSpace("id", d, 3, use_user, items=Vocab([str(i) for i in range(n_items)]),
                        users=Vocab(["u"]) if use_user else Vocab())


def _set(module: torch.nn.Linear, w, b=None):
    with torch.no_grad():
        module.weight.copy_(torch.tensor(w, dtype=torch.float32))
        if b is not None:
            module.bias.copy_(torch.tensor(b, dtype=torch.float32))


def _set_items(model, table):
    with torch.no_grad():
        model.embedding.embed_dict["item_id"].weight.copy_(torch.tensor(table, dtype=torch.float32))


def test_pnn_inner_products_are_the_pairwise_dot_products():
    e = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]])
    assert InnerProduct()(e).tolist() == [[11.0, 17.0, 39.0]]  # <e1,e2>, <e1,e3>, <e2,e3>
    # the whole IPNN with no hidden layer: logit = w . [z; p] + b, z = [mean(history), item]
    model = make_model("pnn", _space(), mlp_dims=()).eval()
    table = np.array([[0, 0], [0, 0], [1, 2], [3, 1], [-1, 1], [2, 2], [0.5, -1]])
    _set_items(model, table)
    w, b = [0.1, -0.2, 0.3, 0.4, 0.5], [0.05]
    _set(model.mlp.mlp[0], [w], b)
    x = {"history": torch.tensor([[2, 3, 0]]), "item_id": torch.tensor([4])}
    user, item = (table[2] + table[3]) / 2, table[4]
    logit = np.dot(w, np.r_[user, item, user @ item]) + b[0]
    assert model(x).item() == pytest.approx(1 / (1 + np.exp(-logit)), rel=1e-6)


def _layer_norm(v, eps=1e-5):
    return (v - v.mean()) / np.sqrt(v.var() + eps)


def test_masknet_block_is_the_instance_guided_mask_equation():
    block = MaskBlock(emb_dim=4, in_dim=4, out_dim=3, reduction_ratio=0.5).eval()  # aggregation width 2
    w1, b1 = [[1, 0, -1, 0.5], [0.2, 0.3, 0, -1]], [0.1, -0.2]
    w2, b2 = [[1, 0], [0, 1], [1, 1], [-1, 0.5]], [0.0, 0.1, 0.2, 0.3]
    wh = [[1, 0, 0, 1], [0, 2, -1, 0], [0.5, 0.5, 0.5, -0.5]]
    _set(block.mask.aggregate, w1, b1)
    _set(block.mask.project, w2, b2)
    _set(block.hidden, wh)
    v_emb, v_in = np.array([1.0, -2.0, 0.5, 3.0]), np.array([0.3, 0.1, -0.4, 1.0])
    v_mask = np.array(w2) @ np.maximum(np.array(w1) @ v_emb + b1, 0) + b2  # W2 ReLU(W1 V_emb + b1) + b2
    expected = np.maximum(_layer_norm(np.array(wh) @ (v_mask * v_in)), 0)  # ReLU(LN(W_h (V_mask * V_in)))
    got = block(torch.tensor(v_emb[None], dtype=torch.float32), torch.tensor(v_in[None], dtype=torch.float32))
    np.testing.assert_allclose(got.detach().numpy()[0], expected, rtol=1e-5, atol=1e-6)


def test_masknet_normalises_each_field_and_chains_serial_blocks():
    space = _space(d=2)
    model = make_model("masknet", space, mode="serial", num_blocks=2, block_dim=3).eval()
    table = np.array([[0, 0], [0, 0], [1, 2], [3, 1], [-1, 1], [2, 5], [0.5, -1]])
    _set_items(model, table)
    x = {"history": torch.tensor([[2, 3, 0]]), "item_id": torch.tensor([5])}
    user, item = (table[2] + table[3]) / 2, table[5]
    v_emb = np.r_[user, item]
    ln_emb = np.r_[_layer_norm(user), _layer_norm(item)]  # LN_EMB: field by field, not over all 4 values
    emb = model.embedding(x, model.features)
    np.testing.assert_allclose(model.layer_norm_emb(emb).detach().numpy()[0], ln_emb, rtol=1e-5, atol=1e-6)

    def block(b, v_in):
        mask = (b.mask.project.weight.detach().numpy() @ np.maximum(
            b.mask.aggregate.weight.detach().numpy() @ v_emb + b.mask.aggregate.bias.detach().numpy(), 0)
            + b.mask.project.bias.detach().numpy())
        return np.maximum(_layer_norm(b.hidden.weight.detach().numpy() @ (mask * v_in)), 0)

    h = block(model.blocks[1], block(model.blocks[0], ln_emb))  # serial: block 2 masks block 1's output
    lr = model.head.fc
    logit = lr.weight.detach().numpy()[0] @ h + lr.bias.item()
    assert model(x).item() == pytest.approx(1 / (1 + np.exp(-logit)), rel=1e-5)


def test_finalmlp_bilinear_fusion_and_gated_streams():
    fusion = BilinearFusion(4, 2, num_heads=2)
    w3 = np.array([[[1.0], [2.0]], [[-1.0], [0.5]]])  # per head: [2 x 1]
    with torch.no_grad():
        fusion.w12.copy_(torch.tensor(w3, dtype=torch.float32))
    _set(fusion.w1, [[0.1, 0.2, 0.3, 0.4]], [0.7])
    _set(fusion.w2, [[-0.5, 0.25]])
    o1, o2 = np.array([1.0, -1.0, 2.0, 0.5]), np.array([3.0, -2.0])
    heads = sum(o1[2 * h:2 * h + 2] @ w3[h] @ o2[h:h + 1] for h in range(2))  # sum_h o1_h^T W3_h o2_h
    expected = 0.7 + np.dot([0.1, 0.2, 0.3, 0.4], o1) + np.dot([-0.5, 0.25], o2) + heads
    got = fusion(torch.tensor(o1[None], dtype=torch.float32), torch.tensor(o2[None], dtype=torch.float32))
    assert got.item() == pytest.approx(float(expected), rel=1e-6)

    gate = FeatureGate(2, 4, hidden=3)
    ctx = torch.tensor([[0.5, -1.0]])
    assert torch.allclose(gate(ctx, 1), 2 * torch.sigmoid(gate.mlp(ctx)))
    assert FeatureGate(None, 4)(None, 3).shape == (3, 4)  # no context: a learned bias

    model = make_model("finalmlp", _space(), mlp_dims=[4], mlp2_dims=[2], num_heads=2).eval()
    assert isinstance(model, FinalMLP)
    x = {"history": torch.tensor([[2, 3, 0]]), "item_id": torch.tensor([4])}
    emb = model.embedding(x, model.features)
    flat = emb.flatten(start_dim=1)
    g1, g2 = model.gate1(emb[:, 0], 1), model.gate2(emb[:, 1], 1)  # stream 1: the user side, 2: the item
    expected = torch.sigmoid(model.fusion(model.mlp1(flat * g1), model.mlp2(flat * g2))).squeeze(1)
    assert torch.allclose(model(x), expected)


def test_gdcn_gated_cross_and_dcnv2_cross_equations():
    net = GatedCrossNetwork(2, 2)
    w = [[[1, 0.5], [-1, 2]], [[0.3, 0], [0.2, -0.4]]]
    b = [[0.1, -0.1], [0.0, 0.2]]
    wg = [[[0.5, 1], [1, -0.5]], [[-1, 0], [0, 1]]]
    bg = [[0.0, 0.3], [-0.2, 0.1]]
    for k in range(2):
        _set(net.w[k], w[k], b[k])
        _set(net.gate[k], wg[k], bg[k])
    c0 = np.array([1.5, -0.5])
    sig = lambda v: 1 / (1 + np.exp(-v))
    c = c0
    for k in range(2):  # c_{l+1} = c0 * (W c_l + b) * sigmoid(W_g c_l + b_g) + c_l
        c = c0 * (np.array(w[k]) @ c + b[k]) * sig(np.array(wg[k]) @ c + bg[k]) + c
    np.testing.assert_allclose(net(torch.tensor(c0[None], dtype=torch.float32)).detach().numpy()[0], c, rtol=1e-5)

    cross = GatedCrossNetwork(2, 2, gated=False)  # DCNv2: x_{l+1} = x0 * (W x_l + b) + x_l
    for k in range(2):
        _set(cross.w[k], w[k], b[k])
    x = c0
    for k in range(2):
        x = c0 * (np.array(w[k]) @ x + b[k]) + x
    np.testing.assert_allclose(cross(torch.tensor(c0[None], dtype=torch.float32)).detach().numpy()[0], x, rtol=1e-5)
    assert isinstance(make_model("dcnv2", _space()).crossnet, GatedCrossNetwork)


def test_history_is_the_masked_mean_of_item_embeddings_shared_with_the_item():
    model = make_model("dnn", _space(d=2)).eval()
    table = np.array([[0, 0], [9, 9], [1, 2], [3, 1], [-1, 1], [2, 5], [0.5, -1]])
    _set_items(model, table)
    emb = model.embedding({"history": torch.tensor([[2, 3, 0]]), "item_id": torch.tensor([6])}, model.features)
    np.testing.assert_allclose(emb.detach().numpy()[0], [[2.0, 1.5], [0.5, -1.0]])  # padding (0) is left out


# ---------------------------------------------------------------- features

def test_vocabulary_rows_and_history_padding():
    pairs = pl.DataFrame({"user_id": ["a", "b"], "item_id": ["x", "y"], "label": [1, 0], "timestamp": [0, 0],
                          "history": [["x", "z"], []]})
    space = build_space(pairs, use_user=True, history_len=3)
    assert space.items.ids == ["x", "y", "z"] and len(space.items) == 5
    enc = space.encode(["a", "nobody"], ["y", "new"], [["z", "x", "x", "new"], None])
    assert enc["item_id"].tolist() == [3, OOV]
    assert enc["user_id"].tolist() == [2, OOV]
    assert enc["history"].tolist() == [[2, 2, OOV], [PAD, PAD, PAD]]  # the newest 3, then padding
    rare = build_space(pairs, use_user=True, user_min_count=2, min_count=2)
    assert rare.users.ids == [] and rare.items.ids == ["x"]  # seen once: the unknown row
    assert tokenize("Toy Story (1995)") == ["toy", "story", "1995"]
    text = build_space(pairs, representation="text", item_table=pl.DataFrame({"item_id": ["x", "w"],
                                                                              "title": ["Up (2009)", "Up Up"]}))
    assert text.items.ids == ["x", "w", "y", "z"]  # the catalog first: content is known without a pair
    assert text.item_tokens[text.items.get("w")].tolist() == [2, 2]  # "up" "up"
    assert text.item_tokens[text.items.get("y")].tolist() == [0, 0]  # no title: no tokens


# ---------------------------------------------------------------- training

@pytest.mark.parametrize("name", list(VARIANTS))
def test_every_model_learns_the_synthetic_problem(data, name):
    td, samples = data
    model = _make(name).fit(td)
    assert _auc(model, samples) > 0.8, model.log.epochs
    assert model.log.best_epoch >= 1 and model.settings()["model"] == VARIANTS[name].model_name


def test_item_popularity_alone_cannot_solve_it(data):
    from recharness.baselines.item_mean import ItemMeanCtr

    td, samples = data
    assert _auc(ItemMeanCtr().fit(td), samples) < 0.65


def test_same_seed_same_predictions_and_one_sample_equals_the_batch(data):
    td, samples = data
    a, b = _make("deepfm", max_epochs=3).fit(td), _make("deepfm", max_epochs=3).fit(td)
    pa, pb = a.predict_proba(samples), b.predict_proba(samples)
    assert np.array_equal(pa, pb)
    c = VARIANTS["deepfm"](seed=1, progress=False, **{**FAST, "max_epochs": 3}).fit(td)
    assert not np.array_equal(pa, c.predict_proba(samples))
    one = [a.predict([s], CtrTask())[s["id"]]["parsed"]["p_yes"] for s in samples[:20]]
    np.testing.assert_allclose(one, pa[:20], rtol=1e-5)


@pytest.mark.parametrize("name", ["gdcn", "dnn_text", "dnn_semantic"])
def test_save_load_round_trip(data, tmp_path, monkeypatch, name):
    td, samples = data
    model = _make(name, max_epochs=2).fit(td)
    path = model.save(tmp_path / name)
    assert sorted(p.name for p in path.iterdir()) == ["config.json", "model.pt"]
    calls = []
    real_load = torch.load

    def checked_load(*args, **kwargs):
        calls.append(kwargs.get("weights_only"))
        return real_load(*args, **kwargs)

    monkeypatch.setattr(torch, "load", checked_load)
    loaded = DlrmBaseline.load(path)
    assert calls == [True] and type(loaded) is VARIANTS[name]
    assert loaded.settings() == model.settings()
    assert np.array_equal(loaded.predict_proba(samples), model.predict_proba(samples))
    assert json.loads((path / "config.json").read_text())["space"]["items"]


def test_unknown_users_items_and_empty_histories_do_not_crash(data):
    td, _ = data
    odd = [{"id": "a", "task": "ctr", "user_id": "nobody", "item_id": "never-seen", "history": ["also-new"]},
           {"id": "b", "task": "ctr", "user_id": "0", "item_id": "3", "history": []},
           {"id": "c", "task": "ctr", "user_id": "0", "item_id": "3"}]
    for name in ("dnn", "autoint", "dnn_text", "dnn_semantic"):
        model = _make(name, max_epochs=1, use_user=True).fit(td)
        preds = model.predict(odd, CtrTask())
        assert all(0.0 <= preds[k]["parsed"]["p_yes"] <= 1.0 for k in "abc"), name
    with pytest.raises(ValueError, match="does not answer target-rank requests"):
        model.predict([{"id": "x", "task": "seqrec", "target": "1", "history": []}], SeqrecTask())


def test_text_model_scores_an_item_it_never_saw_by_its_title(data):
    """A catalog item in no training pair: its title words (shared with seen items) carry its kind."""
    td, _ = data
    seen = td.pairs.filter(pl.col("item_id") != "7")
    seen = seen.with_columns(pl.col("history").list.eval(pl.element().filter(pl.element() != "7")))
    model = _make("dnn_text").fit(dataclasses.replace(td, pairs=seen))
    hist = {k: [str(i) for i in range(k, N_ITEMS, 2)][:HIST] for k in (0, 1)}
    p = model.predict_proba([{"id": f"u{k}", "item_id": "7", "history": hist[k]} for k in (0, 1)])
    assert p[1] > p[0]  # item 7 is a comedy (odd): the comedy fan is likelier to click


def test_without_a_validation_slice_a_seeded_tenth_is_held_out(data):
    td, samples = data
    model = _make("dnn", max_epochs=5).fit(dataclasses.replace(td, valid=None))
    assert model.log.epochs and _auc(model, samples) > 0.7


def test_all_nine_models_and_parameters():
    assert set(MODELS) == {"dnn", "pnn", "deepfm", "dcn", "dcnv2", "masknet", "finalmlp", "autoint", "gdcn"}
    with pytest.raises(TypeError, match="no parameters"):
        VARIANTS["dnn"](n_cross_layers=2)
    assert isinstance(make_model("masknet", _space()), MaskNet)


# ---------------------------------------------------------------- registration

def test_registered_lazily_without_importing_torch():
    registry = Registry("baseline")
    register_dlrms(registry)
    assert registry.names() == list(DLRMS) == list(VARIANTS)
    assert all(registry.meta(n)["answers"] == ("click",) and registry.meta(n)["trainable"]
               and registry.meta(n)["heavy"] for n in registry)
    assert registry.get("dnn_text") is VARIANTS["dnn_text"]
    code = ("import sys; from recharness.core.registry import Registry; from recharness.baselines.dlrm import register_dlrms; "
            "register_dlrms(Registry('b')); assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_killed_dlrm_fit_goes_on_from_its_last_epoch_to_the_uninterrupted_weights(data, tmp_path, monkeypatch):
    """Killed (KeyboardInterrupt) while validating epoch 4, a DeepFM fit under a checkpoint goes on from
    epoch 3's: the same epochs' log, best epoch and weights bit for bit as one uninterrupted fit; another
    seed, other training pairs or other frozen item vectors start afresh. Dropout on, so the RNG states
    must be carried too. Under `epoch_lines` the resumed epochs keep their numbers."""
    from recharness.baselines import fit as fit_named
    from recharness.baselines import resumed_from
    from recharness.baselines.dlrm import trainer as trainer_mod
    from recharness.baselines.training import epoch_lines

    td, samples = data
    settings = {**FAST, "max_epochs": 7, "patience": 10, "dropout": 0.3}
    whole, _ = fit_named("deepfm", td, 0, settings)
    assert resumed_from(whole) == (None, 0.0) and len(whole.log.epochs) == 7

    real = trainer_mod.auc
    _die_at(monkeypatch, trainer_mod, real, 4)
    with pytest.raises(KeyboardInterrupt):
        fit_named("deepfm", td, 0, settings, checkpoint=(tmp_path / "ck", {"build": "b"}))
    assert sorted(p.name for p in (tmp_path / "ck").iterdir()) == ["epoch-3.pt", "state.json"]
    monkeypatch.undo()

    resumed, seconds = fit_named("deepfm", td, 0, settings, checkpoint=(tmp_path / "ck", {"build": "b"}))
    after, earlier = resumed_from(resumed)
    assert after == 3 and 0 < earlier < seconds and resumed.log.seconds >= earlier
    strip = lambda log: [{k: v for k, v in e.items() if not k.endswith("_s")} for e in log.epochs]  # noqa: E731
    assert strip(resumed.log) == strip(whole.log) and resumed.log.best_epoch == whole.log.best_epoch
    sa, sb = resumed.model.state_dict(), whole.model.state_dict()
    assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)
    assert np.array_equal(resumed.predict_proba(samples), whole.predict_proba(samples))

    other, _ = fit_named("deepfm", td, 1, settings, checkpoint=(tmp_path / "ck", {"build": "b"}))
    assert resumed_from(other) == (None, 0.0)
    # other training pairs, or other frozen item vectors (the same encoder name): not this fit's checkpoint
    _die_at(monkeypatch, trainer_mod, real, 2)
    with pytest.raises(KeyboardInterrupt):
        fit_named("dnn_semantic", td, 0, {**settings, **_semantic()}, checkpoint=(tmp_path / "ck2", {"build": "b"}))
    monkeypatch.undo()
    moved = {**settings, **_semantic(seed=1)}
    assert resumed_from(fit_named("dnn_semantic", td, 0, moved, checkpoint=(tmp_path / "ck2", {"build": "b"}))[0]) \
        == (None, 0.0)
    fewer = TrainData(td.interactions, td.items, td.pairs.head(2000), valid=td.valid, item_table=ITEMS,
                      dataset_name="synthetic")
    assert resumed_from(fit_named("deepfm", fewer, 0, settings, checkpoint=(tmp_path / "ck", {"build": "b"}))[0]) \
        == (None, 0.0)
    lines: list[str] = []
    _die_at(monkeypatch, trainer_mod, real, 3)
    with pytest.raises(KeyboardInterrupt):
        fit_named("deepfm", td, 0, settings, checkpoint=(tmp_path / "ck3", {"build": "b"}))
    monkeypatch.undo()
    with epoch_lines(lines.append):  # as `recharness train` shows a fit: the resumed epochs keep their numbers
        fit_named("deepfm", td, 0, settings, checkpoint=(tmp_path / "ck3", {"build": "b"}))
    assert [line.split(":")[0] for line in lines] == [f"deepfm epoch {e}" for e in range(3, 8)]


def _semantic(seed: int = 0) -> dict:
    return {"vectors": _vectors(seed=seed), "encoder": "synthetic", "progress": False}


def _die_at(monkeypatch, trainer_mod, real, call: int) -> None:
    """The fit dies (KeyboardInterrupt) at its `call`-th validation."""
    calls = []

    def dies(*args):
        calls.append(1)
        if len(calls) == call:
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(trainer_mod, "auc", dies)
