"""Cross-entropy over a whole catalog of output vectors, without the (positions × items) logits tensor.

Why: a SASRec step on ML-1M scores ~2,400 positions against 3,706 items. Written as
``F.cross_entropy(h @ V.T, t)`` it allocates four 36 MB tensors per step (logits, log-softmax,
their gradients); on a 2-core CPU each fresh allocation is page faults plus a pass through main
memory. Here the logits are made `chunk` rows at a time into one buffer that stays in cache, and
the gradients with respect to `h` and `V` are computed in the same pass (the loss is a scalar, so
backward only scales them): the same three matmuls as the plain formulation, but no large
temporary and far less memory traffic: a SASRec step 1.4-1.9× as fast, by batch
(benchmarks/results/sasrec_speed.md).

`bf16=True` runs the three matmuls and the softmax in bfloat16, which AMX/AVX512-BF16 CPUs do
several times faster; each chunk's gradient contribution is summed in float32. Rounding: the logits
and probabilities are bf16 (8 significant bits); the target's ``p - 1`` and the loss come from the
sum of the other probabilities (accumulated in float32, rounded once to bf16: a relative error of at
most 2^-9, so a confident row keeps its small gradient), the loss of an
unconfident row from ``-log`` of its bf16 probability (about ±0.002 nats, clamped at float32's
smallest normal: at most 87.3 per row, where float32's exact loss goes on growing). Every matmul
has one of a few shapes: the last chunk is padded with zero rows up to a multiple of `ROW_STEP`,
because oneDNN compiles a kernel per bf16 matmul shape, and a new row count every step (as SASRec's
batches have) made the loss several times slower and kept growing memory with the kernels it kept.
Gradients differ from float32's by under 2% of their norm (`tests/test_linear_cross_entropy.py`);
measured speed: benchmarks/results/sasrec_speed.md. An option, never the default, so a default fit
is the same on every CPU.

The gradients are computed in the forward pass, so: only for the inputs that require them (none
under `torch.no_grad`), once-differentiable (no second derivatives), and an in-place change to an
input between forward and backward is not seen by them.
"""

from __future__ import annotations

import threading

import torch
from torch.autograd.function import once_differentiable

#: rows of logits made at once: 512 × 3,706 floats (7.6 MB) was the fastest of 128/256/512 on ML-1M
CHUNK = 512
#: the same for bf16: 1,024 × 3,706 (two 7.6 MB buffers) was the fastest of 256-2,048 (fewer, larger
#: matmuls; benchmarks/results/sasrec_speed.md)
CHUNK_BF16 = 1024
#: bf16: row counts are padded up to a multiple of this (oneDNN compiles a kernel per matmul shape)
ROW_STEP = 64


_scratch = threading.local()


def scratch(count: int, rows: int, items: int, dtype: torch.dtype, device: torch.device) -> list[torch.Tensor]:
    """`count` (rows, items) buffers, kept per thread and reused while the request is the same: a fresh
    7-15 MB buffer per call is an mmap and a page fault per 4 kB every step (glibc hands large blocks back
    to the OS on free), 1-3 ms a step in a run. One set per thread: bounded, and never shared by two
    calls at once."""
    key = (count, rows, items, dtype, device)
    if getattr(_scratch, "key", None) != key:
        _scratch.key, _scratch.buffers = None, None  # the old set freed before the new one is made
        _scratch.buffers = [torch.empty(rows, items, dtype=dtype, device=device) for _ in range(count)]
        _scratch.key = key
    return _scratch.buffers


def release_scratch() -> None:
    """Free this thread's buffers (a trainer calls it when its fit ends: they are sized by the catalog)."""
    _scratch.key, _scratch.buffers = None, None


class _LinearCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h: torch.Tensor, vectors: torch.Tensor, target: torch.Tensor, chunk: int, bf16: bool,
                want_h: bool, want_v: bool):
        n = h.shape[0]
        f32 = {"dtype": torch.float32, "device": h.device}
        hf, vf = h.detach().to(**f32), vectors.detach().to(**f32)
        run = _bf16_chunks if bf16 else _f32_chunks
        total, grad_h, grad_v = run(hf, vf, target, chunk, want_h, want_v)
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
                         chunk: int | None = None, bf16: bool = False) -> torch.Tensor:
    """Mean cross-entropy of ``softmax(h @ vectors.T)`` at `target`: (n, d) hidden states, (items, d)
    output vectors, (n,) item indices → a scalar in `h`'s dtype (computed in float32), differentiable in
    `h` and `vectors`; equal to ``F.cross_entropy(h @ vectors.T, target)`` up to float rounding (bf16:
    see the module docstring). `chunk`: rows of logits made at a time (default `CHUNK`, `CHUNK_BF16`)."""
    if h.ndim != 2 or vectors.ndim != 2 or h.shape[1] != vectors.shape[1]:
        raise ValueError(f"h (n, d) and vectors (items, d) expected, got {tuple(h.shape)} and {tuple(vectors.shape)}")
    if target.shape != (h.shape[0],):
        raise ValueError(f"one target per row of h expected: {tuple(target.shape)} for {h.shape[0]} rows")
    if h.shape[0] == 0:
        raise ValueError("linear_cross_entropy of no rows (the mean of nothing)")
    if chunk is None:
        chunk = CHUNK_BF16 if bf16 else CHUNK
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    grad = torch.is_grad_enabled()
    return _LinearCrossEntropy.apply(h, vectors, target.long(), chunk, bf16,
                                     grad and h.requires_grad, grad and vectors.requires_grad)


def _f32_chunks(hf, vf, target, chunk, want_h, want_v):
    """The summed loss and the gradients of the summed loss, all in float32."""
    n, items, d = hf.shape[0], vf.shape[0], hf.shape[1]
    grad_h = torch.empty(n, d, dtype=torch.float32, device=hf.device) if want_h else None
    grad_v = torch.zeros(items, d, dtype=torch.float32, device=hf.device) if want_v else None
    (logits,) = scratch(1, min(chunk, n), items, torch.float32, hf.device)
    rows = torch.arange(min(chunk, n), device=hf.device)
    total = torch.zeros((), dtype=torch.float64, device=hf.device)
    for a in range(0, n, chunk):
        hc, tc = hf[a:a + chunk], target[a:a + chunk]
        k = hc.shape[0]
        z = logits[:k]
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
        if want_h:
            torch.mm(z, vf, out=grad_h[a:a + chunk])
        if want_v:
            grad_v.addmm_(z.T, hc)
    return total, grad_h, grad_v


def _bf16_chunks(hf, vf, target, chunk, want_h, want_v):
    """As `_f32_chunks` with the matmuls and the softmax in bfloat16 (see the module docstring)."""
    n, items, d = hf.shape[0], vf.shape[0], hf.shape[1]
    width = min(chunk, -(-n // ROW_STEP) * ROW_STEP)
    on = {"dtype": torch.bfloat16, "device": hf.device}
    vb, hb = vf.to(torch.bfloat16), hf.to(torch.bfloat16)
    grad_h = torch.empty(n, d, dtype=torch.float32, device=hf.device) if want_h else None
    grad_vt = torch.zeros(d, items, dtype=torch.float32, device=hf.device) if want_v else None
    logits, probs = scratch(2, width, items, torch.bfloat16, hf.device)
    padded = torch.zeros(width, d, **on)
    rows = torch.arange(width, device=hf.device)
    total = torch.zeros((), dtype=torch.float64, device=hf.device)
    tiny = torch.finfo(torch.float32).tiny
    for a in range(0, n, chunk):
        tc = target[a:a + chunk]
        k = tc.shape[0]
        wide = min(width, -(-k // ROW_STEP) * ROW_STEP)
        if wide == k:
            hc = hb[a:a + k]
        else:
            hc = padded[:wide]
            hc[:k] = hb[a:a + k]
            hc[k:] = 0
        z, p = logits[:wide], probs[:wide]
        torch.mm(hc, vb.T, out=z)
        torch.softmax(z, 1, out=p)
        at = (rows[:k], tc)
        picked = p[at].float()
        # 1 - p_target as the sum of the other probabilities (the target's zeroed first): near p = 1 bf16
        # steps by 2^-8, which would round a confident row's gradient (p - 1) and loss to 0. torch sums
        # bf16 in float32 and rounds the sum once; summing with dtype=float32 instead would copy the chunk
        # to float32 first (a quarter of the loss's time)
        p[at] = 0
        others = p[:k].sum(1).float().clamp_(0.0, 1.0)
        confident = picked > 0.5
        nll = torch.where(confident, -torch.log1p(-others.clamp(max=0.5)), -picked.clamp_min(tiny).log())
        total += nll.sum(dtype=torch.float64)
        if not (want_h or want_v):
            continue
        p[at] = (-others).to(torch.bfloat16)  # d loss_i / d logits_i = p - 1; padding rows unused
        if want_h:
            grad_h[a:a + k] = torch.mm(p, vb)[:k]
        if want_v:
            grad_vt += torch.mm(hc.T, p)  # padding rows of hc are zero: they add nothing
    return total, grad_h, None if grad_vt is None else grad_vt.T.contiguous()
