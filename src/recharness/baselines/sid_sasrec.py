"""SID-SASRec (RecBench §3.2, Group H): SASRec over semantic-ID code tokens, items decoded by beam search.

Items as semantic IDs. Each item is its code tuple from `data.semantic_ids` (default: RQ-VAE over
MiniLM title embeddings, 4 levels x 256 codes, plus TIGER's disambiguation level: L = 5 codes).
Codes become tokens with per-level offsets (`SemanticIds.tokens()`, shifted by one: 0 pads), so
"code 7 at level 0" and "code 7 at level 1" are different tokens. A history of n items is the
flat sequence of its n x L tokens, oldest first.

The network is `sasrec.SASRecNet` over that token vocabulary (token and position embeddings,
`layers` causal pre-LN blocks): the same backbone as our SASRec, positions counting tokens.
Training: every training row (history + target, `TrainData.sequences`) is one token sequence;
each token of the 2nd..last item is predicted from everything before it (teacher forcing), by a
softmax over THAT level's codes only (cross-entropy per code level; logits = hidden · token
embedding, tied as in SASRec's Eq. 8). One next-item prediction = L token predictions; "samples"
below count next-item predictions, so `batch_size` means what it means for SASRec. Adam, early
stopping on the validation NDCG@10 of the decoded rankings (the first `valid_rows` validation
rows; patience `patience`), best epoch's weights restored; seeded inside a forked RNG.

Decoding (the paper's "·CBS" and its plain counterpart), per test sample:

* ``sid-sasrec`` — conditional beam search (`models.cbs.beam_search` over a `Trie` of every
  catalog item's token path, `beams` beams, L steps): only tokens that extend a valid item's
  prefix survive, so every finished beam is a real item;
* ``sid-sasrec-free`` — the same weights, plain beam search over each level's codes: a beam
  may spell a tuple no item has. Such beams are *invalid*: counted (`parsed["invalid"]` of
  `parsed["beams"]`, `parsed["top1_invalid"]`) and dropped from the ranking — the paper's reason
  for CBS.

In both, the user's history items are masked at the last code (`cbs.forbid_paths`), as every
method's ranking excludes them, so no beam is spent on them. The ranking is the valid beams'
items in beam order (best cumulative log-prob first); the record is ``{"rank": r, "items": ...}``
like SASRec's, with r the target's 1-based place among them (and ``"top"``, the first ten items,
from `target_ranks_and_tops`). A target no beam reaches is not
ranked (``rank: None``): it counts 0 for NDCG@10, HR@k, Recall@k and MRR, as an item an LLM never
names. So NDCG@10 is exact for any `beams` >= 10; MRR and Recall@20 are truncated at `beams`.

Both variants fitted in one process on the same data and settings share one training run (the
second `fit` reuses the first's weights: `_FITTED`), since they differ only in decoding.
Decoding encodes the history once and runs only the beams' new code tokens against its cached keys
and values (`encode_context`, `extend`: the same outputs as the full forward, ~9x faster), on one
torch thread (tiny per-step batches); `threads` applies to training. ~6 ms per sample on ML-1M.
Saved like SASRec: `model.pt` (state dict) and `config.json` (settings, items, their codes, the
semantic-ID description, the fit log).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Self

import numpy as np
import polars as pl
import torch
import torch.nn.functional as F

from recharness.baselines.base import Baseline, RankQuery, TrainData
from recharness.baselines.checkpoint import read_model, save_model
from recharness.core.fit_checkpoint import EpochCheckpoint
from recharness.baselines.sasrec import DEFAULTS as SASREC_DEFAULTS
from recharness.baselines.sasrec import SASRecNet, record_epoch, right_padded, training_sequences
from recharness.baselines.torch_threads import threads
from recharness.baselines.training import EarlyStopping, progress_bar, resume_fit, save_fit
from recharness.core.errors import ConfigError
from recharness.data.semantic_ids import SemanticIds, semantic_ids
from recharness.metrics.full_ranking import rank_metrics
from recharness.models.cbs import Trie, beam_search, forbid_paths

DEFAULTS: dict[str, Any] = {
    # SASRec's training settings (hidden 64, 2 heads, FFN 256, dropout 0.2, Adam 1e-3, batch 2,048 next-item
    # predictions) but its precision, windows and network variants: this network is pre-LN over code tokens,
    # with its own cached decoding (`encode_context`, `extend`)
    **{k: v for k, v in SASREC_DEFAULTS.items() if k not in ("precision", "stride", "block", "attn_dropout")},
    "beams": 20, "valid_rows": 500,
    "sid_method": "rqvae", "sid_levels": 4, "sid_codebook": 256, "sid_epochs": None, "sid_seed": 0,
}
_NET = ("hidden", "heads", "inner", "dropout")
#: the settings that decide the weights (the decoding does not: early stopping decodes with `VALID_BEAMS`
#: whatever `beams` is): the key of a shared fit
_FIT_KEYS = tuple(k for k in DEFAULTS if k != "beams")
#: beams of the CBS decode that early stopping scores validation rows with, fixed so that the weights do not
#: depend on the `beams` a variant decodes its answers with (a shared fit serves both variants)
VALID_BEAMS = 20
#: weights fitted in this process, shared between the CBS and free variants (at most a few entries)
_FITTED: dict[str, dict] = {}
_FITTED_MAX = 2


class SIDSASRec(Baseline):
    """SID-SASRec answering target-rank requests with CBS-decoded rankings (`free`: unconstrained)."""

    name = "sid-sasrec"
    layers = 2
    free = False
    #: set by `recharness train` before `fit`: each whole epoch checkpointed, a killed fit goes on from it
    #: (`core.fit_checkpoint.EpochCheckpoint`, stamped with the fit key: settings, semantic IDs and sequences)
    checkpoint: EpochCheckpoint | None = None

    def __init__(self, seed: int = 0, *, threads: int | None = None, progress: bool = True,
                 sid: SemanticIds | None = None, **params):
        """`params` override `DEFAULTS`; `sid`: semantic IDs to use instead of computing them from
        the training data's item table (tests, benchmarks); `threads`: torch threads for training."""
        unknown = set(params) - set(DEFAULTS)
        if unknown:
            raise TypeError(f"{self.name} takes no parameters {sorted(unknown)}; known: {sorted(DEFAULTS)}")
        self.seed, self.threads, self.progress = seed, threads, progress
        self.params = {**DEFAULTS, **params}
        if int(self.params["beams"]) < 1:
            raise ConfigError(f"{self.name}: beams must be at least 1, got {self.params['beams']}")
        self.sid = sid
        self.net: SASRecNet | None = None
        self.items: list[str] = []
        self.codes = np.zeros((0, 0), dtype=np.int64)
        self.log: dict[str, Any] = {}
        self.sid_info: dict[str, Any] = {}

    @classmethod
    def create(cls, seed: int = 0) -> Self:
        return cls(seed=seed)

    def settings(self) -> dict:
        return {"layers": self.layers, "decoding": "free" if self.free else "cbs", **self.params, "seed": self.seed}

    # ------------------------------------------------------------ codes and tokens

    def _set_codes(self, items: list[str], codes: np.ndarray, codebook_size: int) -> None:
        """Items, their code tuples and everything derived: tokens (1-based), per-level token ranges, trie."""
        self.items = [str(i) for i in items]
        self.codes = np.asarray(codes, dtype=np.int64)
        n_levels = self.codes.shape[1]
        self.codebook_size = int(codebook_size)
        tokens = self.codes + np.arange(n_levels, dtype=np.int64) * self.codebook_size + 1
        self.n_tokens_per_item = n_levels
        self.item_tokens = {i: tuple(int(t) for t in row) for i, row in zip(self.items, tokens)}
        self.path_item = {p: i for i, p in self.item_tokens.items()}
        if len(self.path_item) != len(self.items):
            raise ConfigError(f"{self.name}: two items share a semantic ID (codes are not disambiguated)")
        sizes = [self.codebook_size] * (n_levels - 1) + [int(self.codes[:, -1].max()) + 1 if len(self.codes) else 1]
        self.level_range = [(1 + lvl * self.codebook_size, 1 + lvl * self.codebook_size + size)
                            for lvl, size in enumerate(sizes)]
        self.vocab = self.level_range[-1][1] - 1  # token ids 1..vocab
        self.trie = Trie(self.item_tokens.values())
        mask = torch.full((n_levels, self.vocab), -torch.inf)
        for lvl, (lo, hi) in enumerate(self.level_range):
            mask[lvl, lo - 1:hi - 1] = 0.0
        self._level_mask = mask

    def _flat(self, items: list[str]) -> list[int]:
        """The tokens of the items that have codes, in order (an unknown item is dropped, as SASRec does)."""
        out: list[int] = []
        for i in items:
            out.extend(self.item_tokens.get(i, ()))
        return out

    def _semantic_ids(self, train: TrainData) -> SemanticIds:
        if self.sid is not None:
            return self.sid
        if train.item_table is None or train.dataset_name is None:
            raise ConfigError(f"{self.name} needs the dataset's item table (titles) and name for semantic IDs; "
                              "this training data has none: fit it on `TrainData.of_build(dataset, run, suite)`")
        p = self.params
        return semantic_ids(train.dataset_name, train.item_table, method=p["sid_method"], levels=p["sid_levels"],
                            codebook_size=p["sid_codebook"], seed=p["sid_seed"], epochs=p["sid_epochs"],
                            progress=self.progress)

    # ------------------------------------------------------------ fitting

    def fit(self, train: TrainData) -> Self:
        seqs, rows, valid = training_sequences(self.name, train)
        sid = self._semantic_ids(train)
        self._set_codes(sid.item_ids, sid.codes, sid.codebook_size)
        self.sid_info = {"method": sid.method, "levels": sid.levels, "codebook_size": sid.codebook_size,
                         "epochs": sid.epochs, "encoder": sid.encoder, "collision_rate": sid.collision_rate,
                         "usage": sid.usage, "max_duplicates": sid.max_duplicates, "train_log": sid.log_file}
        p = self.params
        if p["max_len"] is None:
            p["max_len"] = max(1, int(seqs["history"].list.len().max() or 1))
        key = self._fit_key(seqs, sid)
        shared = _FITTED.get(key)
        if shared is not None:  # the other decoding of the same model: same weights, no second training
            with torch.random.fork_rng(devices=[]):
                self.net = self._new_net()
            self.net.load_state_dict(shared["state"])
            self.net.eval()
            self.log = {**shared["log"], "shared_fit": True}
            return self
        t0 = time.perf_counter()
        with threads(self.threads), torch.random.fork_rng(devices=[]):
            if self.checkpoint is not None:  # a checkpoint of other semantic IDs, sequences, threads is not resumed
                self.checkpoint.extend(fit_key=key, threads=torch.get_num_threads(), torch=torch.__version__)
            torch.manual_seed(self.seed)
            self.net = self._new_net()
            self._fit(rows, valid)
        self.log["seconds"] = round(time.perf_counter() - t0 + self.log.get("earlier_sittings_s", 0.0), 3)
        _FITTED[key] = {"state": {k: v.detach().clone() for k, v in self.net.state_dict().items()}, "log": dict(self.log)}
        while len(_FITTED) > _FITTED_MAX:
            _FITTED.pop(next(iter(_FITTED)))
        return self

    def _fit_key(self, seqs: pl.DataFrame, sid: SemanticIds) -> str:
        h = hashlib.sha256()
        h.update(json.dumps({"layers": self.layers, "seed": self.seed, **{k: self.params[k] for k in _FIT_KEYS}},
                            sort_keys=True, default=str).encode())
        h.update(json.dumps(sid.item_ids).encode())
        h.update(np.ascontiguousarray(sid.codes, dtype=np.int64).tobytes())
        for col in ("user_id", "history", "target", "part"):
            h.update(json.dumps(seqs[col].to_list()).encode())
        return h.hexdigest()

    def _new_net(self) -> SASRecNet:
        p, lt = self.params, self.n_tokens_per_item
        # a training row holds max_len + 1 items; positions count tokens
        return SASRecNet(self.vocab, (p["max_len"] + 1) * lt, layers=self.layers, **{k: p[k] for k in _NET})

    def _valid_rows(self, valid: pl.DataFrame) -> list[dict]:
        rows = valid.head(int(self.params["valid_rows"]))
        return [{"history": h, "target": t} for h, t in zip(rows["history"].to_list(), rows["target"].to_list())
                if t in self.item_tokens]

    def _fit(self, rows: pl.DataFrame, valid: pl.DataFrame) -> None:
        net, p, lt = self.net, self.params, self.n_tokens_per_item
        width = (p["max_len"] + 1) * lt
        seqs = [self._flat(h + [t]) for h, t in zip(rows["history"].to_list(), rows["target"].to_list())]
        x = torch.from_numpy(right_padded(seqs, width))
        lengths = (x > 0).sum(1)
        # token j+1's level; the first item's own codes are not a next-item prediction: not trained
        levels = torch.arange(1, width) % lt
        trained_pos = torch.arange(1, width) >= lt
        n_samples = int(((lengths // lt) - 1).clamp(min=0).sum())
        per_row = max(1.0, n_samples / max(1, x.shape[0]))
        rows_per_step = max(1, round(p["batch_size"] / per_row))
        opt = torch.optim.Adam(net.parameters(), lr=p["lr"], weight_decay=p["weight_decay"], fused=True)
        gen = torch.Generator().manual_seed(self.seed)
        v_rows = self._valid_rows(valid)
        stopper = EarlyStopping(p["patience"])
        epochs: list[dict] = []
        step_s, done, start, earlier_s = 0.0, 0, 1, 0.0
        resumed = resume_fit(self.checkpoint, net, opt, gen, stopper)
        if resumed is not None:  # a killed fit's last whole epoch: its weights, optimiser, RNGs and counters
            epochs[:] = resumed["epochs"]
            step_s, done, start, earlier_s = resumed["step_s"], resumed["done"], resumed["epoch"] + 1, resumed["fit_s"]
        t_fit = time.perf_counter()
        bar = progress_bar(self.progress, rate=True)
        try:
            for epoch in range(start, p["max_epochs"] + 1):
                net.train()
                order = torch.randperm(x.shape[0], generator=gen)
                total, seen, t_epoch = 0.0, 0, time.perf_counter()
                if bar is not None:
                    bar.reset(bar.task_ids[0], total=n_samples, description=f"{self.name} epoch {epoch}/{p['max_epochs']}")
                for a in range(0, x.shape[0], rows_per_step):
                    idx = order[a:a + rows_per_step]
                    w = int(lengths[idx].max())
                    batch = x[idx, :w]
                    inputs, nxt = batch[:, :-1], batch[:, 1:]
                    mask = (nxt > 0) & trained_pos[: w - 1]
                    if not mask.any():
                        continue
                    h = net(inputs)[mask]
                    logits = h @ net.item_vectors().T + self._level_mask[levels[: w - 1].expand_as(nxt)[mask]]
                    loss = F.cross_entropy(logits, nxt[mask] - 1)
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                    opt.step()
                    k = int(mask.sum()) // lt  # next-item predictions
                    total, seen = total + loss.item() * k, seen + k
                    if bar is not None:
                        rate = (done + seen) / (step_s + time.perf_counter() - t_epoch)
                        bar.update(bar.task_ids[0], completed=seen, rate=f"{rate:,.0f} samples/s")
                epoch_s = time.perf_counter() - t_epoch
                step_s, done = step_s + epoch_s, done + seen
                t_valid = time.perf_counter()
                score = self._valid_ndcg(v_rows) if v_rows else -total / max(seen, 1)
                record_epoch(epochs, bar, stopper.best, epoch, total, seen, score, epoch_s,
                             valid_s=time.perf_counter() - t_valid)
                if stopper.update(score, epoch, net):
                    break
                if epoch < p["max_epochs"]:
                    save_fit(self.checkpoint, epoch, net, opt, gen, stopper, {
                        "epochs": epochs, "step_s": step_s, "done": done,
                        "fit_s": earlier_s + time.perf_counter() - t_fit})
        finally:
            if bar is not None:
                bar.stop()
        stopper.restore(net)
        net.eval()
        self.log = {"epochs": epochs, "best_epoch": stopper.best_epoch,
                    "best_valid_ndcg@10": round(stopper.best, 6) if v_rows else None, "valid_rows": len(v_rows),
                    "train_samples": done, "train_step_s": round(step_s, 3),
                    "samples_per_s": round(done / step_s, 1) if step_s > 0 else None,
                    "threads": torch.get_num_threads(), "rows_per_step": rows_per_step}
        if resumed is not None:  # the killed sittings' epochs are in the log; their time is added to `seconds`
            self.log["resumed_after_epoch"], self.log["earlier_sittings_s"] = start - 1, round(earlier_s, 3)

    def _valid_ndcg(self, rows: list[dict]) -> float:
        """Validation NDCG@10 of the CBS rankings (early stopping uses the constrained decoder for both variants)."""
        ranks = [self._answer(r["history"], r["target"], free=False, beams=VALID_BEAMS)["rank"] for r in rows]
        return float(rank_metrics([r or np.inf for r in ranks], ks=(10,))["ndcg@10"])

    # ------------------------------------------------------------ decoding

    def _step(self, context: list[int]):
        """`step_logprobs` for beam_search: next-code log-probs (over the prefix's level only) after
        context + prefix. The context is encoded once (`encode_context`); each step runs only the
        beams' few prefix tokens against its cached keys and values (`extend`)."""
        net = self.net
        lt, n_cols = self.n_tokens_per_item, self.vocab + 1
        last, cache = encode_context(net, context)

        def step(prefixes: list[list[int]]) -> np.ndarray:
            level = len(prefixes[0])
            if level == 0:
                h = last.expand(len(prefixes), -1)
            else:
                h = extend(net, cache, torch.tensor(prefixes, dtype=torch.long), len(context))
            lo, hi = self.level_range[level % lt]
            lp = torch.log_softmax(h @ net.item.weight[lo:hi].T, dim=-1).double().numpy()
            out = np.full((len(prefixes), n_cols), -np.inf)
            out[:, lo:hi] = lp
            return out

        return step

    @torch.inference_mode()
    def _answer(self, history: list[str], target: str | None, *, free: bool, beams: int | None = None) -> dict:
        """One sample's parsed record: the decoded ranking, the target's rank in it, invalid beams (`beams`: the
        model's own setting unless given)."""
        net, lt = self.net, self.n_tokens_per_item
        was_training = net.training
        net.eval()
        context = self._flat(history)[-(self.params["max_len"] * lt):]
        if not context:  # no history item has a semantic ID: nothing to condition on
            return {"rank": None, "items": [], "beams": 0, "invalid": 0, "top1_invalid": False}
        seen = set(history)
        step = forbid_paths(self._step(context), [self.item_tokens[i] for i in seen if i in self.item_tokens])
        found = beam_search(step, None if free else self.trie, int(beams or self.params["beams"]), lt)
        if was_training:
            net.train()
        items: list[str] = []
        invalid = 0
        for path, _ in found:
            item = self.path_item.get(tuple(path))
            if item is None:
                invalid += 1
            elif item not in seen and item not in items:
                items.append(item)
        top1_invalid = bool(found) and tuple(found[0][0]) not in self.path_item
        rank = items.index(target) + 1 if target in items else None
        return {"rank": rank, "items": items, "beams": len(found), "invalid": invalid, "top1_invalid": top1_invalid}

    def target_ranks(self, queries: Sequence[RankQuery]) -> list[dict]:
        """Per query, the target's rank among the items the beams decode, and the search's beams and
        invalid paths."""
        if self.net is None:
            raise ValueError(f"{self.name} predicts only once fitted (or loaded)")
        with threads(1):
            return [self._answer(h, t, free=self.free) for t, h, _ in queries]

    def top_ks(self, queries: Sequence[RankQuery], k: int) -> list[list[str]]:
        """Each query's first `k` decoded items (history removed; fewer when fewer beams are valid)."""
        return [a["top"] for a in self.target_ranks_and_tops(queries, k)]

    def target_ranks_and_tops(self, queries: Sequence[RankQuery], k: int) -> list[dict]:
        """`target_ranks` with the first `k` decoded items as `"top"`: one beam search per query for both."""
        return [{**a, "top": a["items"][:k]} for a in self.target_ranks(queries)]

    # ------------------------------------------------------------ persistence

    def save(self, path: Path) -> Path:
        """Write `path`/model.pt (state dict) and `path`/config.json; returns `path`."""
        if self.net is None:
            raise ValueError(f"{self.name} saves only once fitted")
        return save_model(path, self.net.state_dict(),
                          {"baseline": self.name, "settings": self.settings(), "items": self.items,
                           "codes": self.codes.tolist(), "codebook_size": self.codebook_size,
                           "semantic_ids": self.sid_info, "log": self.log})

    @classmethod
    def load(cls, path: Path) -> SIDSASRec:
        """The fitted baseline `save` wrote (of the variant it was saved from)."""
        saved = read_model(path, VARIANTS, cls, drop=("layers", "decoding"))
        config = saved.config
        self = saved.cls(seed=saved.seed, progress=False, **saved.settings)
        self._set_codes(config["items"], np.asarray(config["codes"], dtype=np.int64), config["codebook_size"])
        self.sid_info, self.log = config.get("semantic_ids", {}), config.get("log", {})
        self.net = self._new_net()
        self.net.load_state_dict(saved.state_dict)
        self.net.eval()
        return self


def _heads(block, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q, k, v of `sasrec.Block` for x (batch, T, hidden): each (batch, heads, T, hidden / heads)."""
    b, t, d = x.shape
    return block.qkv(block.norm1(x)).view(b, t, 3, block.heads, d // block.heads).permute(2, 0, 3, 1, 4)


def _rest(block, x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    """The block after attention (eval mode: no dropout): residual, then the feed-forward part."""
    b, _, t, _ = a.shape
    x = x + block.out(a.transpose(1, 2).reshape(b, t, -1))
    return x + block.ff2(F.gelu(block.ff1(block.norm2(x))))


@torch.inference_mode()
def encode_context(net: SASRecNet, context: list[int]) -> tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]]]:
    """`net` (eval) over one token sequence: the last position's output (1, hidden) and each block's
    keys and values, for `extend`. Equals ``net(context)[:, -1]``."""
    h = net.item(torch.tensor([context], dtype=torch.long)) + net.position.weight[: len(context)]
    cache = []
    for block in net.blocks:
        q, k, v = _heads(block, h)
        cache.append((k, v))
        h = _rest(block, h, F.scaled_dot_product_attention(q, k, v, is_causal=True))
    return net.norm(h)[:, -1], cache


@torch.inference_mode()
def extend(net: SASRecNet, cache: list[tuple[torch.Tensor, torch.Tensor]], prefixes: torch.Tensor,
           start: int) -> torch.Tensor:
    """The last position's output (batch, hidden) for context + each row of `prefixes` (batch, s),
    the context's keys and values taken from `cache`: equals ``net(context + prefix)[:, -1]`` at the
    cost of s tokens per row instead of len(context) + s."""
    b, s = prefixes.shape
    h = net.item(prefixes) + net.position.weight[start:start + s]
    # query i (position start + i) sees the whole context and prefix tokens 0..i
    mask = torch.ones(s, start + s, dtype=torch.bool)
    mask[:, start:] = torch.ones(s, s, dtype=torch.bool).tril()
    for block, (kc, vc) in zip(net.blocks, cache):
        q, k, v = _heads(block, h)
        k = torch.cat([kc.expand(b, -1, -1, -1), k], dim=2)
        v = torch.cat([vc.expand(b, -1, -1, -1), v], dim=2)
        h = _rest(block, h, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    return net.norm(h)[:, -1]


class SIDSASRecFree(SIDSASRec):
    """SID-SASRec decoded by plain beam search: invalid code tuples are counted and dropped."""

    name = "sid-sasrec-free"
    free = True


VARIANTS: dict[str, type[SIDSASRec]] = {c.name: c for c in (SIDSASRec, SIDSASRecFree)}
