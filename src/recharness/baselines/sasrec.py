"""SASRec (Kang & McAuley, ICDM 2018): RecBench's Group G list-wise model, trained here on CPU.

The network (`SASRecNet`): item and learned position embeddings (position 0 = the oldest item
shown), `layers` pre-LayerNorm transformer blocks (causal self-attention over `heads` heads through
`scaled_dot_product_attention`, a GELU feed-forward of `inner` units, dropout on both outputs), a
final LayerNorm. An item's score after a history is ``h · v_item`` with the item embedding table
itself (Eq. 8). `block="post"` (with `attn_dropout`) is RecBole 1.2.1's SASRec network instead:
a LayerNorm of the input embeddings, post-LayerNorm blocks (eps 1e-12), dropout on the attention weights
(training then writes the attention out: `Block._dropped_attention`), no final LayerNorm — the same
model as RecBole's, for comparisons of one model with itself (its softmax leaves out the padding row,
which RecBole's includes). Training minimises cross-entropy over
ALL items (Eq. 7), no sampled negatives, through `linear_cross_entropy` (the (positions × items)
logits made a chunk at a time in cache, the gradients in the same pass). Dropout draws four 16-bit uniforms per 64-bit random number
(`Dropout`), Adam is torch's fused one: together 1.8× the steps per second of the plain formulation
on 2 cores. `precision="bf16"` is mixed-precision training: the loss's matmuls and softmax and the
blocks' linear layers in bfloat16 (AMX / AVX512-BF16), float32 weights, attention, LayerNorm and
residual stream; evaluation and prediction in float32. 2.45× the plain formulation
(benchmarks/results/sasrec_speed.md).

Training data: `TrainData.sequences`, the build's rows (history, target) of
`<run>/recbench/seqrec_train.parquet` and `seqrec_valid.parquet`. A training row is one sequence
(history + target, right-padded) and every position of it predicts its next item under the causal
mask, so a window of L + 1 items gives its L (prefix → next item) samples in one forward pass:
the samples RecBole builds one by one. With `stride` = s the windows overlap instead (`strided_windows`):
one every s items, each training only its last s positions, so each prediction sees at least
max_len - s + 1 items where the user has them, as the test rows do (about max_len / s times the
positions per epoch, the same predictions). "samples" below (batch size, samples/s) counts those
next-item predictions; a step's windows go through the network in parts of at most `MICRO_POSITIONS`
positions (`train_step`: the same step, in the CPU's caches), which small strides need (stride 1,
RecBole's samples: 2,048 windows a step) and builds of very short windows. Adam (lr 1e-3, the paper's rate for non-LLM models), batches of
`batch_size` samples (RecBole's 2,048), rows shuffled by a seeded generator; after each epoch the
model ranks the full catalog for the validation rows (history excluded) and training stops after
`patience` epochs without a better NDCG@10, the best epoch's weights put back. Initial weights,
shuffling and dropout come from `seed` inside a forked RNG (the caller's torch state is untouched);
with the same thread count the same seed gives the same weights and predictions.

Hook (benchmarks): `callback(net, info)`, when given, is called every `callback_steps` training
steps (0: never mid-epoch) and after each epoch, before validation; `info` holds "epoch", "step"
(steps so far), "samples" (next-item predictions trained so far), "positions" (sequence positions
run through the network so far, padding included: the unit to compare with a framework that makes
one padded pass per prediction), "train_s" (training seconds so far) and "end_of_epoch". Seconds
spent inside it are not counted as training time, and a true return value stops training there
(the epoch in progress is validated and logged as usual).

Tuning (`train --tune N`, `baselines.tuning`): `space` (hidden, dropout, lr) searched with trial 0 =
`DEFAULTS`, each trial capped at `tune_epochs` epochs and scored by NDCG@10 on validation rows of the
build (never a test target); the chosen configuration refitted with early stopping as above.

Prediction: the target's rank over the whole catalog with the history's items removed
(`metrics.full_ranking.target_ranks`), `{"rank": r}` as `recbench.seqrec` scores it; an unknown
target is not ranked (None). `target_ranks_and_tops` adds the top-k list from the same scores
(`{"rank": r, "top": [...]}`: seqrec's beyond-accuracy metrics read it).

Under `recharness train` each whole epoch is checkpointed (`checkpoint`: weights, Adam's moments, the
shuffling and dropout RNG states, the early-stopping state and the log), so a killed fit goes on from its
last whole epoch and ends with the weights an uninterrupted fit would (resumed only for the same data,
settings, thread count and torch version).

Saved as a directory: `model.pt` (state dict, read back with `weights_only=True`) and `config.json`
(settings, the item vocabulary, the fit log with samples/s), never a pickled object. Memory: a
training step holds 512 × items logits at a time (`linear_cross_entropy.CHUNK`: 7.6 MB on ML-1M).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Self

import numpy as np
import polars as pl
import torch
import torch.nn.functional as F
from torch import nn

from recharness.baselines.base import SEQUENCE_PARTS, Baseline, RankQuery, TrainData
from recharness.baselines.checkpoint import read_model, save_model
from recharness.core.fit_checkpoint import EpochCheckpoint
from recharness.baselines.linear_cross_entropy import linear_cross_entropy, release_scratch
from recharness.baselines.torch_threads import threads
from recharness.baselines.training import EarlyStopping, data_hash, progress_bar, resume_fit, save_fit
from recharness.core.errors import ConfigError
from recharness.metrics.full_ranking import rank_metrics, target_ranks

#: every variant's settings but the layer count (RecBole's SASRec defaults where the paper says nothing)
DEFAULTS: dict[str, Any] = {
    "hidden": 64, "heads": 2, "inner": 256, "dropout": 0.2,
    "max_len": None,  # None: the longest history in the training data (the build's history_len)
    "batch_size": 2048, "lr": 1e-3, "weight_decay": 0.0, "max_epochs": 50, "patience": 3,
    "precision": "fp32",  # "bf16": training's loss and linear layers in bfloat16 (module docstring)
    "stride": None,  # None: the build's windows; s: overlapping windows every s items (`strided_windows`)
    "block": "pre",  # "post": RecBole's network (`Block`), for a comparison of one model with itself
    "attn_dropout": 0.0,  # dropout on the attention weights (RecBole's attn_dropout_prob)
}
BLOCKS = ("pre", "post")
PRECISIONS = ("fp32", "bf16")
_NET = ("hidden", "heads", "inner", "dropout", "block", "attn_dropout")
#: RecBole's LayerNorm epsilon (`layer_norm_eps`), used by the "post" network
POST_EPS = 1e-12
#: below this many samples a prediction runs on one thread (a few small matmuls; OpenMP spin-waits cost more)
SMALL_BATCH = 64
#: a training step runs its windows through the network at most this many positions (padding included) at a
#: time, the parts' gradients summed into the step's (the same loss and update; dropout masks drawn part by part):
#: RecBole's samples (`stride=1`) make 2,048 windows a step, whose activations at once spill from the CPU's caches
#: (in parts a step of RecBole's network is faster, benchmarks/results/sasrec_speed_recbole_samples.md). A step
#: of the build's windows is split only where they average under 4 predictions a window (ML-1M's: about 47)
MICRO_POSITIONS = 512 * 50


class Dropout(nn.Module):
    """`nn.Dropout` with cheaper random numbers: torch's CPU generator makes a Mersenne-Twister draw per
    `bernoulli_` or `uniform_` value (1 ms and 0.4 ms per 150k values), where one 64-bit number (two
    draws) here gives four 16-bit uniforms: half the draws of `uniform_`, and a SASRec step 2.4% faster
    (benchmarks/results/sasrec_speed.md). The drop probability is `p` rounded to a multiple of
    1/65,536 (0.2 → 0.199997), and kept values are scaled by the inverse of the rounded keep
    probability, so the expectation is kept exactly. Drawn from torch's generator: `torch.manual_seed`
    makes it repeatable."""

    def __init__(self, p: float):
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {p}")
        dropped = round(p * 65536)
        if p > 0 and not 0 < dropped < 65536:
            raise ValueError(f"dropout {p} rounds to {dropped / 65536:g} in steps of 1/65,536: give one in "
                             f"[{1 / 65536:.2g}, {1 - 1 / 65536:.6f}] (or 0)")
        self._p = p
        #: an int16 uniform below this is dropped: P(drop) = `dropped` / 65,536
        self.threshold = dropped - 32768
        self.scale = 65536 / (65536 - dropped)

    @property
    def p(self) -> float:
        return self._p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self._p == 0.0:
            return x
        n = x.numel()
        words = torch.empty((n + 3) // 4, dtype=torch.int64, device=x.device).random_(-(2 ** 63), None)
        keep = words.view(torch.int16)[:n].view(x.shape) >= self.threshold
        return x * (keep.to(x.dtype) * self.scale)

    def extra_repr(self) -> str:
        return f"p={self._p}"


class Block(nn.Module):
    """Pre-LN transformer block: x + Attn(LN(x)) (causal), then x + FFN(LN(x)). With `post`, RecBole's
    SASRec block instead (its `TransformerLayer`): LN(x + Attn(x)), then LN(x + FFN(x)), LayerNorm eps
    1e-12; `attn_dropout` drops attention weights (RecBole's `attn_dropout_prob`) in either.

    `bf16`: while training, the four linear layers run in bfloat16 (input, weight and bias cast each
    call, the float32 weights are what Adam updates; the GELU between the two feed-forward layers too),
    and attention, LayerNorm, dropout and the residual stream stay float32 (CPU's bf16 flash-attention
    backward is ~10× slower than its float32 one). In eval mode it computes in float32 as without it."""

    def __init__(self, hidden: int, heads: int, inner: int, dropout: float, bf16: bool = False, post: bool = False,
                 attn_dropout: float = 0.0):
        super().__init__()
        if hidden % heads:
            raise ValueError(f"hidden ({hidden}) must be a multiple of heads ({heads})")
        self.heads, self.bf16, self.post, self.attn_dropout = heads, bf16, post, attn_dropout
        eps = POST_EPS if post else 1e-5
        self.norm1, self.norm2 = nn.LayerNorm(hidden, eps=eps), nn.LayerNorm(hidden, eps=eps)
        self.qkv, self.out = nn.Linear(hidden, 3 * hidden), nn.Linear(hidden, hidden)
        self.ff1, self.ff2 = nn.Linear(hidden, inner), nn.Linear(inner, hidden)
        self.drop, self.attn_drop = Dropout(dropout), Dropout(attn_dropout)

    def _linear(self, layer: nn.Linear, x: torch.Tensor) -> torch.Tensor:
        if self.bf16 and self.training:
            bf = torch.bfloat16
            return F.linear(x.to(bf), layer.weight.to(bf), layer.bias.to(bf))
        return layer(x)

    def _attend(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        qkv = self._linear(self.qkv, x).float()  # `float()` of float32 is the tensor itself
        q, k, v = qkv.view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        if self.training and self.attn_dropout > 0:
            a = self._dropped_attention(q, k, v)
        else:
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.drop(self._linear(self.out, a.transpose(1, 2).reshape(b, t, d)).float())

    def _dropped_attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Causal attention of (batch, heads, T, head size) q, k, v with `attn_drop` on its weights, written
        out: torch's CPU `scaled_dot_product_attention` takes dropout only on its unfused path, whose
        `bernoulli_` draws made a step of RecBole's network on its samples 1.23× slower in float32
        (benchmarks/results/sasrec_speed_recbole_samples.md)."""
        b, h, t, dh = q.shape
        causal = torch.full((t, t), float("-inf"), dtype=q.dtype).triu(1).expand(b * h, t, t)
        scores = torch.baddbmm(causal, q.reshape(b * h, t, dh), k.reshape(b * h, t, dh).transpose(1, 2),
                               alpha=dh ** -0.5)
        weights = self.attn_drop(torch.softmax(scores, dim=-1))
        return torch.bmm(weights, v.reshape(b * h, t, dh)).view(b, h, t, dh)

    def _feed_forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self._linear(self.ff2, F.gelu(self._linear(self.ff1, x))).float())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.post:
            x = self.norm1(x + self._attend(x))
            return self.norm2(x + self._feed_forward(x))
        x = x + self._attend(self.norm1(x))
        return x + self._feed_forward(self.norm2(x))


class SASRecNet(nn.Module):
    """Item codes 1..n_items (0 pads, on the right) → one hidden vector per position."""

    def __init__(self, n_items: int, max_len: int, hidden: int = 64, layers: int = 2, heads: int = 2,
                 inner: int = 256, dropout: float = 0.2, bf16: bool = False, block: str = "pre",
                 attn_dropout: float = 0.0):
        super().__init__()
        if block not in BLOCKS:
            raise ValueError(f"block must be one of {', '.join(BLOCKS)}, got {block!r}")
        post = block == "post"
        self.item = nn.Embedding(n_items + 1, hidden, padding_idx=0)
        self.position = nn.Embedding(max_len, hidden)
        self.drop = Dropout(dropout)
        self.blocks = nn.ModuleList(Block(hidden, heads, inner, dropout, bf16, post, attn_dropout)
                                    for _ in range(layers))
        # pre: a final LayerNorm of the output; post (RecBole): one of the input embeddings, none at the end
        self.input_norm = nn.LayerNorm(hidden, eps=POST_EPS) if post else nn.Identity()
        self.norm = nn.Identity() if post else nn.LayerNorm(hidden)
        for m in self.modules():  # RecBole's initialisation: N(0, 0.02), zero biases
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
            if isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)
        with torch.no_grad():
            self.item.weight[0].zero_()

    def forward(self, seqs: torch.Tensor) -> torch.Tensor:
        """(batch, T) right-padded codes → (batch, T, hidden); position j sees positions ≤ j only."""
        h = self.drop(self.input_norm(self.item(seqs) + self.position.weight[: seqs.shape[1]]))
        for block in self.blocks:
            h = block(h)
        return self.norm(h)

    def item_vectors(self) -> torch.Tensor:
        """(n_items, hidden): the output vectors, i.e. the item table without the padding row."""
        return self.item.weight[1:]


def top_indices(scores: np.ndarray, k: int, exclude: Sequence[np.ndarray]) -> list[list[int]]:
    """Per row of (rows, items) scores, the `k` best column indices not in that row's `exclude`, best
    first, ties as `metrics.full_ranking.target_ranks` breaks them (a stable sort by descending score:
    the lower index first; NaN last), so the target's place in the list is its rank."""
    s = np.asarray(scores, dtype=np.float64)
    s = np.where(np.isnan(s), -np.inf, s)
    order = np.argsort(-s, axis=1, kind="stable")
    out = []
    for row, ex in zip(order, exclude):
        ex = np.asarray(ex, dtype=np.int64)
        head = row[: k + len(ex)]  # enough to hold k items the history does not take
        out.append(head[~np.isin(head, ex)][:k].tolist())
    return out


def right_padded(rows: list[list[int]], width: int) -> np.ndarray:
    """The last `width` codes of each row, left-aligned, padded with 0 on the right."""
    out = np.zeros((len(rows), width), dtype=np.int64)
    for r, codes in enumerate(rows):
        codes = codes[-width:]
        out[r, : len(codes)] = codes
    return out


def chained(users: Sequence[str], rows: list[list[int]]) -> list[list[int]]:
    """The build's windows (oldest first per user, consecutive ones sharing one item) joined back into
    each user's sequence; rows of one user that do not chain (a sampled build) stay apart."""
    out: list[list[int]] = []
    prev = None
    for user, row in zip(users, rows):
        if out and user == prev and row and out[-1] and out[-1][-1] == row[0]:
            out[-1].extend(row[1:])
        else:
            out.append(list(row))
        prev = user
    return out


def training_sequences(name: str, train: TrainData) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(all sequences, the "train" part, the "valid" part) of a list-wise build's training data; a
    ConfigError naming the file to build when the data has none."""
    seqs = getattr(train, "sequences", None)
    if seqs is None:
        raise ConfigError(f"{name} fits on a list-wise build's training sequences "
                          f"(<run>/<suite>/{SEQUENCE_PARTS['train']}.parquet); this training data has none: build "
                          "the run's list-wise task first (it writes them)")
    rows, valid = seqs.filter(pl.col("part") == "train"), seqs.filter(pl.col("part") == "valid")
    if rows.height == 0:
        raise ConfigError(f"{name}: the build has no training sequences")
    return seqs, rows, valid


def strided_windows(seqs: list[list[int]], length: int, stride: int) -> tuple[list[list[int]], list[int]]:
    """Windows of `length` + 1 items ending every `stride` items from each sequence's end, with the
    first position whose next item each window trains on: its last `stride` next items (the oldest
    window: all of them). Every item but a sequence's first is still predicted exactly once per
    epoch, now after at least `length` - `stride` + 1 items where the sequence is that long, as at
    test time (`stride` = 1: one window per prediction, RecBole's samples)."""
    rows, first = [], []
    for seq in seqs:
        for end in range(len(seq) - 1, 0, -stride):
            start = max(0, end - length)
            rows.append(seq[start:end + 1])
            first.append(max(0, end - stride - start))
    return rows, first


def train_step(net: SASRecNet, opt: torch.optim.Optimizer, inputs: torch.Tensor, nxt: torch.Tensor,
               mask: torch.Tensor, *, bf16: bool = False, micro_positions: int | None = None) -> float:
    """One optimiser step on (windows, T) `inputs`: the mean cross-entropy over all items of the next items
    `nxt` where `mask` holds (at least one), the windows run through the network `micro_positions` positions
    at a time (default `MICRO_POSITIONS`), each part's gradient weighed by its share of the predictions, so
    the step is the same however it is cut. Returns the loss summed over the step's predictions."""
    k = int(mask.sum())
    part = max(1, (MICRO_POSITIONS if micro_positions is None else micro_positions) // inputs.shape[1])
    opt.zero_grad(set_to_none=True)
    total = 0.0
    for m in range(0, inputs.shape[0], part):
        sub = mask[m:m + part]
        k_sub = k if part >= inputs.shape[0] else int(sub.sum())
        if k_sub == 0:
            continue
        loss = linear_cross_entropy(net(inputs[m:m + part])[sub], net.item_vectors(), nxt[m:m + part][sub] - 1,
                                    bf16=bf16)
        (loss if k_sub == k else loss * (k_sub / k)).backward()
        total += loss.item() * k_sub
    opt.step()
    return total


def record_epoch(epochs: list[dict], bar, best: float, epoch: int, total: float, seen: int, score: float,
                 epoch_s: float, valid_s: float | None = None) -> None:
    """Append the epoch's `log["epochs"]` entry and show it on the bar (`best`: before this epoch), so
    SASRec and SID-SASRec log alike; `valid_s`, the validation's seconds, only where it is timed."""
    entry = {"epoch": epoch, "loss": round(total / max(seen, 1), 6), "valid_ndcg@10": round(score, 6),
             "samples": seen, "train_s": round(epoch_s, 3)}
    if valid_s is not None:
        entry["valid_s"] = round(valid_s, 3)
    entry["samples_per_s"] = round(seen / epoch_s, 1) if epoch_s > 0 else None
    epochs.append(entry)
    if bar is not None:
        bar.update(bar.task_ids[0], status=f"loss {entry['loss']:.4f} valid NDCG@10 {score:.4f} "
                                           f"(best {max(best, score):.4f})")


class SASRec(Baseline):
    """SASRec answering target-rank requests with the target's full-catalog rank."""

    name = "sasrec"
    layers = 2
    #: `train --tune N` (`baselines.tuning`): the Optuna search space (hidden stays a multiple of `heads`)
    space: dict[str, tuple] = {"hidden": ("choice", 32, 64, 128), "dropout": ("float", 0.1, 0.5),
                               "lr": ("log", 1e-4, 3e-3)}
    #: the per-trial epoch cap of a search (part of its stated budget): every trial trains exactly this
    #: many epochs (on ML-1M, 2 cores: about a minute each), the chosen configuration is refitted with
    #: `max_epochs` and early stopping
    tune_epochs = 3
    #: set by `recharness train` before `fit`: the fit is saved after each epoch and a killed one goes on
    #: from its last whole epoch (`core.fit_checkpoint.EpochCheckpoint`); None: no checkpoints (tuning trials, tests)
    checkpoint: EpochCheckpoint | None = None

    def __init__(self, seed: int = 0, *, threads: int | None = None, progress: bool = True,
                 callback: Callable[[SASRecNet, dict], Any] | None = None, callback_steps: int = 0, **params):
        """`params` override `DEFAULTS`; `threads`: torch's intra-op threads while fitting and
        predicting (None: torch's setting); `progress`: a rich bar on stderr when it is a terminal;
        `callback`, `callback_steps`: the fitting hook (module docstring), off by default."""
        unknown = set(params) - set(DEFAULTS)
        if unknown:
            raise TypeError(f"{self.name} takes no parameters {sorted(unknown)}; known: {sorted(DEFAULTS)}")
        self.seed, self.threads, self.progress = seed, threads, progress
        self.callback, self.callback_steps = callback, callback_steps
        self.params = {**DEFAULTS, **params}
        if self.params["precision"] not in PRECISIONS:
            raise ConfigError(f"{self.name}: precision must be one of {', '.join(PRECISIONS)}, "
                              f"got {self.params['precision']!r}")
        if self.params["block"] not in BLOCKS:
            raise ConfigError(f"{self.name}: block must be one of {', '.join(BLOCKS)}, got {self.params['block']!r}")
        if not 0.0 <= float(self.params["attn_dropout"]) < 1.0:
            raise ConfigError(f"{self.name}: attn_dropout must be in [0, 1), got {self.params['attn_dropout']!r}")
        for key in ("dropout", "attn_dropout"):  # `Dropout`'s own limits (its steps of 1/65,536), told here
            try:
                Dropout(float(self.params[key]))
            except ValueError as e:
                raise ConfigError(f"{self.name}: {key}: {e}") from None
        self.net: SASRecNet | None = None
        self.items: list[str] = []
        self.code: dict[str, int] = {}
        self.log: dict[str, Any] = {}

    @classmethod
    def create(cls, seed: int = 0, **params) -> Self:
        return cls(seed=seed, **params)

    @classmethod
    def defaults(cls) -> dict:
        return dict(DEFAULTS)

    def settings(self) -> dict:
        return {"layers": self.layers, **self.params, "seed": self.seed}

    # ------------------------------------------------------------ data

    def _encode(self, items: list[str]) -> list[int]:
        """Codes of the known items (an unknown one, never in the catalog nor the training rows, is dropped)."""
        return [c for c in map(self.code.get, items) if c]

    def _rows(self, df: pl.DataFrame) -> tuple[list[list[int]], list[int]]:
        """(history codes, target code or 0) per row."""
        hist = [self._encode(h) for h in df["history"].to_list()]
        return hist, [self.code.get(t, 0) for t in df["target"].to_list()]

    # ------------------------------------------------------------ fitting

    def fit(self, train: TrainData) -> Self:
        seqs, rows, valid = training_sequences(self.name, train)
        extra = pl.concat([seqs["history"].explode(), seqs["target"]]).drop_nulls().unique(maintain_order=True)
        self.items = list(dict.fromkeys([*train.items, *extra.to_list()]))
        self.code = {i: k for k, i in enumerate(self.items, 1)}
        p = self.params
        if p["max_len"] is None:
            p["max_len"] = max(1, int(seqs["history"].list.len().max() or 1))
        hist, target = self._rows(rows)
        seqs_rows, first = [h + [t] for h, t in zip(hist, target)], None
        if p["stride"] is not None:
            if not 1 <= int(p["stride"]) <= p["max_len"]:
                raise ConfigError(f"{self.name}: stride must be between 1 and max_len ({p['max_len']}), "
                                  f"got {p['stride']!r}")
            users = rows["user_id"].to_list() if "user_id" in rows.columns else range(rows.height)
            seqs_rows, first = strided_windows(chained(users, seqs_rows), p["max_len"], int(p["stride"]))
        x = torch.from_numpy(right_padded(seqs_rows, p["max_len"] + 1))
        first = torch.zeros(x.shape[0], dtype=torch.int64) if first is None else torch.tensor(first)
        v_hist, v_target = self._rows(valid)
        t0 = time.perf_counter()
        with threads(self.threads), torch.random.fork_rng(devices=[]):
            if self.checkpoint is not None:  # a checkpoint of other data, threads or torch is not resumed
                self.checkpoint.extend(data=data_hash(self.items, x, first, v_hist, v_target),
                                       threads=torch.get_num_threads(), torch=torch.__version__)
            torch.manual_seed(self.seed)
            self.net = SASRecNet(len(self.items), p["max_len"], layers=self.layers, bf16=p["precision"] == "bf16",
                                 **{k: p[k] for k in _NET})
            self._fit(x, first, v_hist, v_target)
        self.log["seconds"] = round(time.perf_counter() - t0 + self.log.get("earlier_sittings_s", 0.0), 3)
        return self

    def _valid_ndcg(self, hist: list[list[int]], target: list[int]) -> float:
        return float(rank_metrics(self._ranks(hist, target), ks=(10,))["ndcg@10"])

    def _fit(self, x: torch.Tensor, first: torch.Tensor, v_hist: list[list[int]], v_target: list[int]) -> None:
        """`x`: training windows, right-padded; `first`: per window, the first position trained on."""
        net, p = self.net, self.params
        lengths = (x > 0).sum(1)
        n_samples = int((lengths - 1 - first).clamp(min=0).sum())
        per_row = max(1.0, n_samples / max(1, x.shape[0]))
        rows_per_step = max(1, round(p["batch_size"] / per_row))
        opt = torch.optim.Adam(net.parameters(), lr=p["lr"], weight_decay=p["weight_decay"], fused=True)
        bf16 = p["precision"] == "bf16"
        strided = bool(first.any())
        gen = torch.Generator().manual_seed(self.seed)
        can_validate = any(v_target)
        stopper = EarlyStopping(p["patience"])
        epochs: list[dict] = []
        step_s, done, steps, positions, stopped = 0.0, 0, 0, 0, False
        bar = progress_bar(self.progress, rate=True)

        def notify(epoch: int, samples: int, train_s: float, end: bool) -> float:
            """Call the hook; returns the seconds it took (and sets `stopped` when it says stop)."""
            nonlocal stopped
            t = time.perf_counter()
            info = {"epoch": epoch, "step": steps, "samples": samples, "positions": positions, "train_s": train_s,
                    "end_of_epoch": end}
            stopped = bool(self.callback(net, info)) or stopped
            net.train()
            return time.perf_counter() - t

        start, earlier_s = 1, 0.0
        resumed = resume_fit(self.checkpoint, net, opt, gen, stopper)
        if resumed is not None:  # a killed fit's last whole epoch: its weights, optimiser, RNGs and counters
            epochs[:] = resumed["epochs"]
            step_s, done, steps, positions = (resumed[k] for k in ("step_s", "done", "steps", "positions"))
            start, earlier_s = resumed["epoch"] + 1, resumed["fit_s"]
        t_fit = time.perf_counter()
        try:
            for epoch in range(start, p["max_epochs"] + 1):
                net.train()
                order = torch.randperm(x.shape[0], generator=gen)
                total, seen, t_epoch = 0.0, 0, time.perf_counter()
                if bar is not None:
                    bar.reset(bar.task_ids[0], total=n_samples, description=f"{self.name} epoch {epoch}/{p['max_epochs']}")
                for a in range(0, x.shape[0], rows_per_step):
                    idx = order[a:a + rows_per_step]
                    batch = x[idx, : int(lengths[idx].max())]
                    inputs, nxt = batch[:, :-1], batch[:, 1:]
                    mask = nxt > 0
                    if strided:
                        mask &= torch.arange(nxt.shape[1]) >= first[idx, None]
                    k = int(mask.sum())
                    if k == 0:
                        continue
                    total += train_step(net, opt, inputs, nxt, mask, bf16=bf16)
                    seen, steps = seen + k, steps + 1
                    positions += inputs.numel()
                    if bar is not None:
                        rate = (done + seen) / (step_s + time.perf_counter() - t_epoch)
                        bar.update(bar.task_ids[0], completed=seen, rate=f"{rate:,.0f} samples/s")
                    if (self.callback is not None and self.callback_steps and steps % self.callback_steps == 0
                            and a + rows_per_step < x.shape[0]):
                        # the hook's seconds moved out of the epoch's clock
                        t_epoch += notify(epoch, done + seen, step_s + time.perf_counter() - t_epoch, False)
                        if stopped:
                            break
                epoch_s = time.perf_counter() - t_epoch
                step_s, done = step_s + epoch_s, done + seen
                if self.callback is not None and not stopped:
                    notify(epoch, done, step_s, True)
                score = self._valid_ndcg(v_hist, v_target) if can_validate else -total / max(seen, 1)
                record_epoch(epochs, bar, stopper.best, epoch, total, seen, score, epoch_s)
                if stopper.update(score, epoch, net) or stopped:
                    break
                if epoch < p["max_epochs"]:
                    save_fit(self.checkpoint, epoch, net, opt, gen, stopper, {
                        "epochs": epochs, "step_s": step_s, "done": done, "steps": steps, "positions": positions,
                        "fit_s": earlier_s + time.perf_counter() - t_fit})
        finally:
            if bar is not None:
                bar.stop()
            release_scratch()
        stopper.restore(net)
        net.eval()
        self.log = {"epochs": epochs, "best_epoch": stopper.best_epoch,
                    "best_valid_ndcg@10": round(stopper.best, 6) if can_validate else None,
                    "train_samples": done, "train_positions": positions, "train_step_s": round(step_s, 3),
                    "samples_per_s": round(done / step_s, 1) if step_s > 0 else None,
                    "threads": torch.get_num_threads(), "rows_per_step": rows_per_step}
        if resumed is not None:  # the killed sittings' epochs are in the log; their time is added to `seconds`
            self.log["resumed_after_epoch"], self.log["earlier_sittings_s"] = start - 1, round(earlier_s, 3)
        if self.callback is not None:
            self.log["stopped_by_callback"] = stopped

    # ------------------------------------------------------------ predicting

    def _ranks(self, hist: list[list[int]], target: list[int]) -> np.ndarray:
        """Full-catalog rank of each target code after its history (history removed); inf for code 0."""
        return self._predict(hist, target)[0]

    @torch.inference_mode()
    def _predict(self, hist: list[list[int]], target: list[int], k: int = 0) -> tuple[np.ndarray, list[list[int]]]:
        """`_ranks`, and with `k` > 0 each row's `k` best item codes (history removed, ties as the ranks
        break them: `top_indices`) from the same scores; [] per row for k = 0."""
        net = self.net
        was_training = net.training
        net.eval()
        n_items = len(self.items)
        ranks = np.full(len(hist), np.inf)
        tops: list[list[int]] = []
        step = max(1, min(1024, 2**24 // max(1, n_items)))
        vectors = net.item_vectors()
        for a in range(0, len(hist), step):
            h_rows = [h[-net.position.num_embeddings:] for h in hist[a:a + step]]
            lens = torch.tensor([max(1, len(h)) for h in h_rows])
            out = net(torch.from_numpy(right_padded(h_rows, int(lens.max()))))
            last = out[torch.arange(len(h_rows)), lens - 1]
            scores = (last @ vectors.T).numpy()
            t = np.asarray(target[a:a + step], dtype=np.int64)
            known = t > 0
            if known.any():
                r = target_ranks(scores[known], t[known] - 1, [np.asarray(h, dtype=np.int64) - 1
                                                               for h, kn in zip(hist[a:a + step], known) if kn])
                ranks[a:a + step][known] = r
            if k > 0:
                tops += [[int(j) + 1 for j in row]
                         for row in top_indices(scores, k, [np.asarray(h, dtype=np.int64) - 1 for h in hist[a:a + step]])]
        if was_training:
            net.train()
        return ranks, tops if k > 0 else [[] for _ in hist]

    def target_ranks(self, queries: Sequence[RankQuery]) -> list[dict]:
        """The targets' full-catalog ranks, history removed, scored in batches."""
        if self.net is None:
            raise ValueError(f"{self.name} predicts only once fitted (or loaded)")
        hist = [self._encode(h) for _, h, _ in queries]
        target = [self.code.get(t, 0) for t, _, _ in queries]
        with threads(1 if len(queries) < SMALL_BATCH else self.threads):
            ranks = self._ranks(hist, target)
        return [{"rank": int(r) if np.isfinite(r) else None} for r in ranks]

    def top_ks(self, queries: Sequence[RankQuery], k: int) -> list[list[str]]:
        """Each query's `k` best items after its history (history removed), scored in batches."""
        return [a["top"] for a in self.target_ranks_and_tops(queries, k)]

    def target_ranks_and_tops(self, queries: Sequence[RankQuery], k: int) -> list[dict]:
        """`target_ranks` with each query's top-`k` list (`"top"`), from one scoring of the catalog."""
        if self.net is None:
            raise ValueError(f"{self.name} predicts only once fitted (or loaded)")
        hist = [self._encode(h) for _, h, _ in queries]
        target = [self.code.get(t, 0) for t, _, _ in queries]
        with threads(1 if len(queries) < SMALL_BATCH else self.threads):
            ranks, tops = self._predict(hist, target, k)
        return [{"rank": int(r) if np.isfinite(r) else None, "top": [self.items[c - 1] for c in top]}
                for r, top in zip(ranks, tops)]

    # ------------------------------------------------------------ persistence

    def save(self, path: Path) -> Path:
        """Write `path`/model.pt (state dict) and `path`/config.json; returns `path`."""
        if self.net is None:
            raise ValueError(f"{self.name} saves only once fitted")
        return save_model(path, self.net.state_dict(),
                          {"baseline": self.name, "settings": self.settings(), "items": self.items, "log": self.log})

    @classmethod
    def load(cls, path: Path) -> SASRec:
        """The fitted baseline `save` wrote (of the variant it was saved from)."""
        saved = read_model(path, VARIANTS, cls, drop=("layers",))
        self = saved.cls(seed=saved.seed, **saved.settings)
        self.items = list(saved.config["items"])
        self.code = {i: k for k, i in enumerate(self.items, 1)}
        self.log = saved.config.get("log", {})
        p = self.params
        self.net = SASRecNet(len(self.items), p["max_len"], layers=self.layers, **{k: p[k] for k in _NET})
        self.net.load_state_dict(saved.state_dict)
        self.net.eval()
        return self


def _variant(name: str, layers: int) -> type[SASRec]:
    return type(f"SASRec{layers}L", (SASRec,), {"name": name, "layers": layers, "__module__": __name__,
                                                "__doc__": f"SASRec with {layers} self-attention layers."})


SASRec1L = _variant("sasrec-1l", 1)
SASRec3L = _variant("sasrec-3l", 3)
SASRec4L = _variant("sasrec-4l", 4)
VARIANTS: dict[str, type[SASRec]] = {c.name: c for c in (SASRec, SASRec1L, SASRec3L, SASRec4L)}
