"""Cross-entropy over a whole catalog of output vectors, without the (positions × items) logits tensor.

Why: a SASRec step on ML-1M scores ~2,400 positions against 3,706 items. Written as
``F.cross_entropy(h @ V.T, t)`` it allocates four 36 MB tensors per step (logits, log-softmax,
their gradients); on a 2-core CPU each fresh allocation is page faults plus a pass through main
memory. Here the logits are made `chunk` rows at a time into one buffer that stays in cache, and
the gradients with respect to `h` and `V` are computed in the same pass (the loss is a scalar, so
backward only scales them): the same three matmuls as the plain formulation, but no large
temporary and far less memory traffic. A whole SASRec step ran 1.7-1.9× as fast for it
(benchmarks/results/sasrec_speed.md).

`bf16=True` runs the three matmuls in bfloat16, which AMX/AVX512-BF16 CPUs do several times faster;
the softmax, the loss and the sum of the chunks' gradients stay in float32, but each matmul's
result (the logits, and each chunk's gradient contribution) is rounded to bfloat16. The gradients
then differ from float32's by about 0.5% (relative norm, `tests/test_linear_cross_entropy.py`). The
step alone gains 5-8% more (the rest of it is not these matmuls), but a whole ML-1M training run
was 6% slower than float32 and peaked at 3.2 GiB instead of 0.9 (recbole_side_by_side_dropout0.2.md):
an option, never the default, so a default fit is the same on every CPU.

The gradients are computed in the forward pass, so: only for the inputs that require them (none
under `torch.no_grad`), once-differentiable (no second derivatives), and an in-place change to an
input between forward and backward is not seen by them.
"""

from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable

#: rows of logits made at once: 512 × 3,706 floats (7.6 MB) was the fastest of 128/256/512 on ML-1M
CHUNK = 512


class _LinearCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h: torch.Tensor, vectors: torch.Tensor, target: torch.Tensor, chunk: int, bf16: bool,
                want_h: bool, want_v: bool):
        n, items, d = h.shape[0], vectors.shape[0], h.shape[1]
        f32 = {"dtype": torch.float32, "device": h.device}
        hf, vf = h.detach().to(**f32), vectors.detach().to(**f32)
        grad_h = torch.empty(n, d, **f32) if want_h else None
        grad_v = torch.zeros(items, d, **f32) if want_v else None
        logits = torch.empty(min(chunk, n), items, **f32)
        rows = torch.arange(min(chunk, n), device=h.device)
        total = torch.zeros((), dtype=torch.float64, device=h.device)
        if bf16:
            vb, hb = vf.to(torch.bfloat16), hf.to(torch.bfloat16)
            logits_b = torch.empty(min(chunk, n), items, dtype=torch.bfloat16, device=h.device)
            probs_b = torch.empty(min(chunk, n), items, dtype=torch.bfloat16, device=h.device)
        for a in range(0, n, chunk):
            hc, tc = hf[a:a + chunk], target[a:a + chunk]
            k = hc.shape[0]
            z = logits[:k]
            if bf16:
                torch.mm(hb[a:a + chunk], vb.T, out=logits_b[:k])
                z.copy_(logits_b[:k])
            else:
                torch.mm(hc, vf.T, out=z)
            picked = z.gather(1, tc[:, None])[:, 0]
            top = z.amax(1, keepdim=True)
            z.sub_(top).exp_()
            norm = z.sum(1, keepdim=True)
            total += (top[:, 0] + norm[:, 0].log() - picked).sum(dtype=torch.float64)
            if not (want_h or want_v):
                continue
            z.div_(norm)  # softmax
            z[rows[:k], tc] -= 1  # d loss_i / d logits_i (before the 1/n of the mean)
            if bf16:
                pb = probs_b[:k]
                pb.copy_(z)
                if want_h:
                    grad_h[a:a + chunk] = torch.mm(pb, vb)
                if want_v:
                    grad_v += torch.mm(pb.T, hb[a:a + chunk])
            else:
                if want_h:
                    torch.mm(z, vf, out=grad_h[a:a + chunk])
                if want_v:
                    grad_v.addmm_(z.T, hc)
        ctx.save_for_backward(*(g for g in (grad_h, grad_v) if g is not None))
        ctx.have = (want_h, want_v)
        ctx.dtypes = (h.dtype, vectors.dtype)
        ctx.n = n
        return (total / n).to(h.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_loss: torch.Tensor):
        saved = iter(ctx.saved_tensors)
        scale = grad_loss.to(torch.float32) / ctx.n
        grads = [(next(saved) * scale).to(dtype) if have else None for have, dtype in zip(ctx.have, ctx.dtypes)]
        return grads[0], grads[1], None, None, None, None, None


def linear_cross_entropy(h: torch.Tensor, vectors: torch.Tensor, target: torch.Tensor, *,
                         chunk: int = CHUNK, bf16: bool = False) -> torch.Tensor:
    """Mean cross-entropy of ``softmax(h @ vectors.T)`` at `target`: (n, d) hidden states, (items, d)
    output vectors, (n,) item indices → a scalar in `h`'s dtype (computed in float32), differentiable in
    `h` and `vectors`; equal to ``F.cross_entropy(h @ vectors.T, target)`` up to float rounding (bf16:
    see the module docstring)."""
    if h.ndim != 2 or vectors.ndim != 2 or h.shape[1] != vectors.shape[1]:
        raise ValueError(f"h (n, d) and vectors (items, d) expected, got {tuple(h.shape)} and {tuple(vectors.shape)}")
    if target.shape != (h.shape[0],):
        raise ValueError(f"one target per row of h expected: {tuple(target.shape)} for {h.shape[0]} rows")
    if h.shape[0] == 0:
        raise ValueError("linear_cross_entropy of no rows (the mean of nothing)")
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    grad = torch.is_grad_enabled()
    return _LinearCrossEntropy.apply(h, vectors, target.long(), chunk, bf16,
                                     grad and h.requires_grad, grad and vectors.requires_grad)
