"""`baselines.linear_cross_entropy` (SASRec's catalog cross-entropy) and SASRec's `Dropout`: by hand,
against torch's own `F.cross_entropy` / `nn.Dropout`, chunked or not, float32 and bfloat16."""

import math

import pytest
import torch
import torch.nn.functional as F

from recharness.baselines.linear_cross_entropy import linear_cross_entropy
from recharness.baselines.sasrec import Dropout


def _grads(loss_fn, h, v):
    h, v = h.clone().requires_grad_(), v.clone().requires_grad_()
    loss = loss_fn(h, v)
    (3.0 * loss).backward()  # an upstream gradient other than 1
    return loss.item(), h.grad, v.grad


def test_hand_worked_example():
    # one row h = (1, 0) against items e1, e2: logits (1, 0), target item 0
    h, v = torch.tensor([[1.0, 0.0]]), torch.eye(2)
    loss, gh, gv = _grads(lambda h, v: linear_cross_entropy(h, v, torch.tensor([0])), h, v)
    s = 1 / (1 + math.exp(-1))  # softmax of the target logit
    assert loss == pytest.approx(math.log(1 + math.exp(-1)), abs=1e-6)  # 0.31326
    # d loss / d logits = softmax - onehot = (s - 1, 1 - s); times the upstream 3
    assert gh.flatten().tolist() == pytest.approx([3 * (s - 1), 3 * (1 - s)], abs=1e-6)
    assert gv.flatten().tolist() == pytest.approx([3 * (s - 1), 0.0, 3 * (1 - s), 0.0], abs=1e-6)


@pytest.mark.parametrize("n,items,chunk", [(7, 5, 3), (300, 500, 512), (1000, 3706, 128), (1, 9, 1)])
def test_equals_torch_cross_entropy(n, items, chunk):
    g = torch.Generator().manual_seed(n)
    h, v = torch.randn(n, 16, generator=g), torch.randn(items, 16, generator=g)
    t = torch.randint(0, items, (n,), generator=g)
    ref = _grads(lambda h, v: F.cross_entropy(h @ v.T, t), h, v)
    got = _grads(lambda h, v: linear_cross_entropy(h, v, t, chunk=chunk), h, v)
    assert got[0] == pytest.approx(ref[0], rel=1e-6, abs=1e-6)
    torch.testing.assert_close(got[1], ref[1], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got[2], ref[2], rtol=1e-5, atol=1e-6)


def test_large_logits_do_not_overflow():
    # the target's probability underflows to 0 in float32: the loss is still its exact -log p
    h, v = torch.tensor([[100.0]]), torch.tensor([[1.0], [-1.0]])
    loss = linear_cross_entropy(h, v, torch.tensor([1]))
    assert loss.item() == pytest.approx(200.0, rel=1e-6)
    assert loss.item() == pytest.approx(F.cross_entropy(h @ v.T, torch.tensor([1])).item(), rel=1e-6)


def test_gradients_only_where_asked():
    g = torch.Generator().manual_seed(3)
    h, v, t = torch.randn(40, 8, generator=g), torch.randn(30, 8, generator=g), torch.randint(0, 30, (40,), generator=g)
    hg = h.clone().requires_grad_()
    linear_cross_entropy(hg, v, t).backward()  # vectors fixed: only h's gradient
    ref = h.clone().requires_grad_()
    F.cross_entropy(ref @ v.T, t).backward()
    torch.testing.assert_close(hg.grad, ref.grad, rtol=1e-5, atol=1e-6)
    vg = v.clone().requires_grad_()
    linear_cross_entropy(h, vg, t).backward()  # h fixed: only the vectors'
    ref = v.clone().requires_grad_()
    F.cross_entropy(h @ ref.T, t).backward()
    torch.testing.assert_close(vg.grad, ref.grad, rtol=1e-5, atol=1e-6)
    with torch.no_grad():  # no gradient at all: the loss alone, not attached to a graph
        loss = linear_cross_entropy(h.requires_grad_(), vg, t)
    assert not loss.requires_grad
    assert loss.item() == pytest.approx(F.cross_entropy(h @ v.T, t).item(), rel=1e-6)


def test_non_contiguous_and_float64_inputs():
    g = torch.Generator().manual_seed(4)
    wide = torch.randn(50, 16, dtype=torch.float64, generator=g)
    h = wide[:, ::2]  # a strided view
    v = torch.randn(20, 8, dtype=torch.float64, generator=g)
    t = torch.randint(0, 20, (50,), generator=g)
    ref = _grads(lambda h, v: F.cross_entropy(h @ v.T, t), h, v)
    got = _grads(lambda h, v: linear_cross_entropy(h, v, t, chunk=7), h, v)
    assert got[1].dtype == torch.float64 and got[2].dtype == torch.float64
    assert got[0] == pytest.approx(ref[0], rel=1e-5)  # computed in float32
    torch.testing.assert_close(got[1], ref[1], rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(got[2], ref[2], rtol=1e-4, atol=1e-6)


def test_no_second_derivatives():
    h, v = torch.randn(4, 3, requires_grad=True), torch.randn(5, 3, requires_grad=True)
    (gh,) = torch.autograd.grad(linear_cross_entropy(h, v, torch.tensor([0, 1, 2, 3])), h, create_graph=True)
    with pytest.raises(RuntimeError):
        gh.sum().backward()


def test_bf16_close_to_float32():
    g = torch.Generator().manual_seed(0)
    h, v = torch.randn(600, 64, generator=g) * 0.5, torch.randn(3706, 64, generator=g) * 0.5
    t = torch.randint(0, 3706, (600,), generator=g)
    ref = _grads(lambda h, v: F.cross_entropy(h @ v.T, t), h, v)
    got = _grads(lambda h, v: linear_cross_entropy(h, v, t, bf16=True), h, v)
    assert got[0] == pytest.approx(ref[0], rel=1e-3)
    for a, b in zip(got[1:], ref[1:]):
        rel = ((a - b).norm() / b.norm()).item()
        assert 0 < rel < 0.02  # bfloat16 rounding: not exact, but about 0.5% of the gradient's norm


def test_bad_shapes_are_named():
    with pytest.raises(ValueError, match="h \\(n, d\\) and vectors"):
        linear_cross_entropy(torch.zeros(2, 3), torch.zeros(4, 5), torch.zeros(2, dtype=torch.long))
    with pytest.raises(ValueError, match="one target per row"):
        linear_cross_entropy(torch.zeros(2, 3), torch.zeros(4, 3), torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match="no rows"):
        linear_cross_entropy(torch.zeros(0, 3), torch.zeros(4, 3), torch.zeros(0, dtype=torch.long))


def test_dropout_matches_nn_dropout_in_distribution():
    torch.manual_seed(0)
    x = torch.ones(400_000)
    d = Dropout(0.2).train()
    y = d(x)
    kept = (y != 0).float().mean().item()
    assert kept == pytest.approx(0.8, abs=0.003)
    theirs = torch.nn.Dropout(0.2).train()(x)
    assert kept == pytest.approx((theirs != 0).float().mean().item(), abs=0.004)
    assert torch.unique(theirs).tolist() == pytest.approx(torch.unique(y).tolist(), rel=1e-5)
    half = Dropout(0.2).train()(torch.ones(400_000, dtype=torch.bfloat16))
    assert (half != 0).float().mean().item() == pytest.approx(0.8, abs=0.003)  # the mask does not depend on x's dtype
    # kept values scaled by 1 / P(keep) of the rounded p: 65,536 / 52,429
    assert torch.unique(y).tolist() == pytest.approx([0.0, 65536 / 52429], rel=1e-7)
    assert y.mean().item() == pytest.approx(1.0, abs=0.005)  # expectation kept, as nn.Dropout's
    d.eval()
    assert d(x) is x
    assert Dropout(0.0).train()(x) is x
    with pytest.raises(ValueError, match="dropout must be in"):
        Dropout(1.0)


def test_dropout_of_any_shape_and_its_rounded_p():
    torch.manual_seed(2)
    x = torch.ones(3, 7, 1001)  # not a multiple of 4 elements: the last 64-bit draw is used in part
    y = Dropout(0.3).train()(x)
    assert y.shape == x.shape
    assert (y != 0).float().mean().item() == pytest.approx(0.7, abs=0.01)
    assert Dropout(0.2).threshold == -32768 + 13107  # P(drop) = 13,107 / 65,536 = 0.199997
    assert Dropout(0.5).threshold == 0  # int16 < 0: exactly half
    lanes = (Dropout(0.3).train()(torch.ones(400_000)).view(-1, 4) != 0).float().mean(0)
    assert lanes.tolist() == pytest.approx([0.7] * 4, abs=0.006)  # each of a draw's four 16-bit lanes alike
    with pytest.raises(ValueError, match="rounds to 1 in steps of 1/65,536"):
        Dropout(1 - 1e-6)  # would wrap the int16 threshold and drop nothing
    with pytest.raises(ValueError, match="rounds to 0 in steps"):
        Dropout(1e-6)
    masks = [Dropout(0.5).train()(torch.ones(1000)) for _ in range(2)]
    assert not torch.equal(masks[0], masks[1])  # a fresh draw each call
    torch.manual_seed(5)
    a = Dropout(0.5).train()(torch.ones(999))
    torch.manual_seed(5)
    assert torch.equal(a, Dropout(0.5).train()(torch.ones(999)))  # torch's seed makes it repeatable


def test_dropout_gradient_is_the_mask():
    torch.manual_seed(1)
    x = torch.randn(1000, requires_grad=True)
    y = Dropout(0.5).train()(x)
    y.sum().backward()
    assert torch.equal(x.grad, (y != 0).float() * 2.0)


@pytest.mark.parametrize("n,chunk", [(1, 512), (64, 512), (700, 512), (23, 7), (130, 64)])
def test_bf16_padding_rows_change_nothing(n, chunk):
    # the last chunk is padded with zero rows up to a multiple of 64: neither the loss nor any gradient
    # may see them (a leak would add softmax(0) = 1/items rows to the vectors' gradient)
    g = torch.Generator().manual_seed(n)
    h, v = torch.randn(n, 32, generator=g) * 0.5, torch.randn(300, 32, generator=g) * 0.5
    t = torch.randint(0, 300, (n,), generator=g)
    ref = _grads(lambda h, v: F.cross_entropy(h @ v.T, t), h, v)
    got = _grads(lambda h, v: linear_cross_entropy(h, v, t, chunk=chunk, bf16=True), h, v)
    assert got[0] == pytest.approx(ref[0], rel=2e-3)
    assert got[1].shape == ref[1].shape and got[2].shape == ref[2].shape
    for a, b in zip(got[1:], ref[1:]):
        assert ((a - b).norm() / b.norm()).item() < 0.02


def test_bf16_matmuls_have_few_shapes():
    # oneDNN compiles a kernel per bf16 matmul shape: over every row count from 1 to 1,100 the loss may
    # use only the padded ones (3 matmuls × 1,024 / 64 row counts), not a new shape per row count
    from torch.overrides import TorchFunctionMode

    shapes = set()

    class Shapes(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if func is torch.mm and args[0].dtype == torch.bfloat16:
                shapes.add((tuple(args[0].shape), tuple(args[1].shape)))
            return func(*args, **(kwargs or {}))

    v = torch.randn(50, 8, requires_grad=True)
    with Shapes():
        for n in range(1, 1101, 3):
            h = torch.randn(n, 8, requires_grad=True)
            linear_cross_entropy(h, v, torch.zeros(n, dtype=torch.long), bf16=True).backward()
    assert 3 <= len(shapes) <= 3 * 16
    assert all(a[0] % 64 == 0 or a[0] == 8 for a, _ in shapes)  # row counts padded (8: h.T @ p)


def test_bf16_keeps_a_confident_rows_gradient():
    # p_target = 0.999: bf16 rounds p itself to 1.0 (steps of 2^-8 below 1), so p - 1 from the rounded p
    # would be 0; from the other probabilities' float32 sum it stays -0.001, as the loss stays 0.001
    h = torch.tensor([[1.0]], requires_grad=True)
    v = torch.tensor([[math.log(999.0)], [0.0]], requires_grad=True)  # logits (log 999, 0): p = (0.999, 0.001)
    loss = linear_cross_entropy(h, v, torch.tensor([0]), bf16=True)
    loss.backward()
    assert loss.item() == pytest.approx(-math.log(0.999), rel=0.01)
    # d loss / d h = sum_j (p_j - onehot_j) v_j = (0.999 - 1) * log 999 (v_1 = 0)
    assert h.grad.item() == pytest.approx(-0.001 * math.log(999.0), rel=0.01)


def test_bf16_loss_of_an_underflowing_target_is_capped():
    # the bf16 loss is read from the softmax: a target probability below float32's smallest normal
    # gives -log(tiny) = 87.34, where float32's exact loss is 200
    h, v = torch.tensor([[100.0]]), torch.tensor([[1.0], [-1.0]])
    loss = linear_cross_entropy(h, v, torch.tensor([1]), bf16=True)
    assert loss.item() == pytest.approx(-math.log(torch.finfo(torch.float32).tiny), rel=1e-6)


def test_sasrec_precision_is_checked_and_bf16_trains_alike():
    import numpy as np
    import polars as pl

    from recharness.baselines import TrainData
    from recharness.baselines.base import sequence_positives
    from recharness.baselines.sasrec import SASRec
    from recharness.core.errors import ConfigError

    with pytest.raises(ConfigError, match="precision must be one of fp32, bf16, got 'half'"):
        SASRec(precision="half")
    rng = np.random.default_rng(0)
    items = [f"i{k}" for k in range(30)]
    rows = [{"user_id": f"u{u}", "history": [items[(u + j) % 30] for j in range(6)], "target": items[(u + 6) % 30],
             "part": "train" if u < 40 else "valid"} for u in range(50)]
    rng.shuffle(rows)
    seqs = pl.DataFrame(rows)
    data = TrainData(sequence_positives(seqs), items, sequences=seqs)
    fits = {p: SASRec(seed=0, threads=1, progress=False, precision=p, hidden=16, max_epochs=3, patience=3).fit(data)
            for p in ("fp32", "bf16")}
    # one step per epoch here: epoch 3's loss follows two updates, so a wrong bf16 gradient would show in it
    losses = {p: [e["loss"] for e in m.log["epochs"]] for p, m in fits.items()}
    assert losses["fp32"][2] < losses["fp32"][0]
    assert losses["bf16"] == pytest.approx(losses["fp32"], rel=1e-3)  # the same model, bf16 loss and linear layers
    assert fits["bf16"].log["train_positions"] == fits["fp32"].log["train_positions"] > 0


def test_sasrec_block_bf16_linears_train_close_and_evaluate_exactly_as_float32():
    from recharness.baselines.sasrec import Block

    torch.manual_seed(0)
    ref = Block(32, 2, 64, 0.0)
    mixed = Block(32, 2, 64, 0.0, bf16=True)
    mixed.load_state_dict(ref.state_dict())
    x = torch.randn(3, 10, 32)
    ref.eval(), mixed.eval()
    assert torch.equal(mixed(x), ref(x))  # evaluation in float32, bit for bit
    ref.train(), mixed.train()
    xr, xm = x.clone().requires_grad_(), x.clone().requires_grad_()
    yr, ym = ref(xr), mixed(xm)
    assert ym.dtype == torch.float32  # the residual stream stays float32
    assert not torch.equal(ym, yr)  # the linears did run in bf16
    assert (ym - yr).norm() / yr.norm() < 1e-2
    g = torch.randn_like(yr)
    (yr * g).sum().backward()
    (ym * g).sum().backward()
    assert (xm.grad - xr.grad).norm() / xr.grad.norm() < 2e-2
    for (name, pr), pm in zip(ref.named_parameters(), mixed.parameters()):
        assert pm.grad.dtype == torch.float32, name  # float32 weights get float32 gradients
        assert (pm.grad - pr.grad).norm() / pr.grad.norm() < 3e-2, name


def test_scratch_buffers_are_reused_and_released():
    from recharness.baselines import linear_cross_entropy as lce

    a = lce.scratch(2, 8, 5, torch.bfloat16, torch.device("cpu"))
    assert lce.scratch(2, 8, 5, torch.bfloat16, torch.device("cpu")) is a  # same request: same buffers
    b = lce.scratch(1, 8, 5, torch.float32, torch.device("cpu"))
    assert b is not a and b[0].dtype == torch.float32
    lce.release_scratch()
    assert lce.scratch(1, 8, 5, torch.float32, torch.device("cpu")) is not b
    lce.release_scratch()
