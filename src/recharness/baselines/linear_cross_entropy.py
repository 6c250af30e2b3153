"""Cross-entropy over a whole catalog of output vectors, without the (positions × items) logits tensor.

Why: a SASRec step on ML-1M scores ~2,400 positions against 3,706 items. Written as
``F.cross_entropy(h @ V.T, t)`` it allocates four 36 MB tensors per step (logits, log-softmax,
their gradients); on a 2-core CPU each fresh allocation is page faults plus a pass through main
memory. Here the logits are made `chunk` rows at a time into one buffer that stays in cache, and
the gradients with respect to `h` and `V` are computed in the same pass (the loss is a scalar, so
backward only scales them): three matmul passes instead of four, no large temporary. A whole
SASRec step went from 78 to 41 ms (benchmarks/results/sasrec_speed.md).

`bf16=True` runs the three matmuls in bfloat16 (the softmax, the loss and the accumulation of the
gradients stay in float32), which AMX/AVX512-BF16 CPUs do several times faster; the step gains only
about 5% more, since the rest of it is not these matmuls. The gradients then differ from float32's by
about 0.5% (relative norm, `tests/test_linear_cross_entropy.py`); an option, never the default, so a
default fit is the same on every CPU.
"""

from __future__ import annotations

import torch

#: rows of logits made at once: 512 × 3,706 floats (7.6 MB) was the fastest of 128/256/512 on ML-1M
CHUNK = 512


class _LinearCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h: torch.Tensor, vectors: torch.Tensor, target: torch.Tensor, chunk: int, bf16: bool):
        n, items = h.shape[0], vectors.shape[0]
        hf, vf = h.detach().float(), vectors.detach().float()
        grad_h = torch.empty(n, hf.shape[1])
        grad_v = torch.zeros(items, hf.shape[1])
        logits = torch.empty(min(chunk, n), items)
        rows = torch.arange(min(chunk, n))
        total = torch.zeros((), dtype=torch.float64)
        if bf16:
            vb, hb = vf.bfloat16(), hf.bfloat16()
            logits_b = torch.empty(min(chunk, n), items, dtype=torch.bfloat16)
            probs_b = torch.empty(n, items, dtype=torch.bfloat16)
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
            z.div_(norm)  # softmax
            z[rows[:k], tc] -= 1  # d loss_i / d logits_i (before the 1/n of the mean)
            if bf16:
                pb = probs_b[a:a + chunk]
                pb.copy_(z)
                grad_h[a:a + chunk] = torch.mm(pb, vb)
            else:
                torch.mm(z, vf, out=grad_h[a:a + chunk])
                grad_v.addmm_(z.T, hc)
        if bf16:
            grad_v = torch.mm(probs_b.T, hb).float()
        ctx.save_for_backward(grad_h.to(h.dtype), grad_v.to(vectors.dtype))
        ctx.n = n
        return (total / n).to(torch.float32)

    @staticmethod
    def backward(ctx, grad_loss: torch.Tensor):
        grad_h, grad_v = ctx.saved_tensors
        scale = grad_loss / ctx.n
        return grad_h * scale, grad_v * scale, None, None, None


def linear_cross_entropy(h: torch.Tensor, vectors: torch.Tensor, target: torch.Tensor, *,
                         chunk: int = CHUNK, bf16: bool = False) -> torch.Tensor:
    """Mean cross-entropy of ``softmax(h @ vectors.T)`` at `target`: (n, d) hidden states, (items, d)
    output vectors, (n,) item indices → a scalar, differentiable in `h` and `vectors`; equal to
    ``F.cross_entropy(h @ vectors.T, target)`` up to float rounding (bf16: see the module docstring)."""
    if h.ndim != 2 or vectors.ndim != 2 or h.shape[1] != vectors.shape[1]:
        raise ValueError(f"h (n, d) and vectors (items, d) expected, got {tuple(h.shape)} and {tuple(vectors.shape)}")
    if target.shape != (h.shape[0],):
        raise ValueError(f"one target per row of h expected: {tuple(target.shape)} for {h.shape[0]} rows")
    if h.shape[0] == 0:
        raise ValueError("linear_cross_entropy of no rows (the mean of nothing)")
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    return _LinearCrossEntropy.apply(h, vectors, target.long(), chunk, bf16)
