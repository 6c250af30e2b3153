"""Semantic item IDs (TIGER / RecBench §3.2): item embedding -> residual quantisation -> code tuple.

    sid = semantic_ids("ml-1m", load_dataset("ml-1m").items)           # RQ-VAE, 4 x 256
    sid.codes          # int32 [N, levels + 1]: one code per level, then the disambiguation code
    sid.tokens()       # the same with per-level offsets, one vocabulary for a sequence model / trie
    sid.collision_rate, sid.usage

Methods:

- ``rqvae`` (default): TIGER's RQ-VAE. MLP encoder (384 -> 512 -> 256 -> 128 -> 32) ->
  `vector_quantize_pytorch.ResidualVQ` (``levels`` codebooks of ``codebook_size``, k-means
  initialised, EMA updates, dead codes re-seeded from the batch) -> MLP decoder back to 384;
  loss = MSE reconstruction + 0.25 x commitment, Adam. Full item set in mini-batches of 1024.
- ``rqkmeans``: residual k-means (scikit-learn `KMeans` per level on the residual of the previous
  levels). No training loop; a fast and strong baseline.

Collisions (two items with the same code tuple) are resolved as TIGER does: an extra last level
numbers the items that share a tuple 0, 1, 2, ... (in item-table order); items with a unique
tuple get 0. `collision_rate` is measured before that: ``1 - distinct tuples / items``.

The vectors are `item_embeddings(dataset_name, items, encoder)`. Results are cached under
``<datasets dir>/<name>/embeddings/sid-<method>-<key>.npz`` (item ids and codes, loaded with
``allow_pickle=False``) beside a JSON with the settings, collision rate, codebook usage and
seconds, and for ``rqvae`` its training, one line per epoch (epoch, step, loss and its two parts,
seconds), in ``sid-rqvae-<key>.train_log.jsonl``. An RQ-VAE fit is checkpointed every 10 epochs in
``sid-rqvae-<key>.fit-checkpoint/`` (removed once the codes are cached): a killed fit goes on from
there and ends with the codes of an uninterrupted one (same CPU kind, threads, torch and
vector-quantize-pytorch). The key hashes the item ids and the exact embedding bytes (so another encoder, model
version or item text gives a new key, as the embedding cache does) and every setting.

torch, vector_quantize_pytorch and sklearn are imported only when codes are computed.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import sys
import time
import zipfile
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from recharness.core.errors import ConfigError
from recharness.data.item_embeddings import (
    DEFAULT_ENCODER,
    INSTALL_HINT,
    embeddings_dir,
    item_embeddings,
)

METHODS = ("rqvae", "rqkmeans")
#: Bump when the cached layout or the training recipe changes: old files are then ignored.
_CACHE_FORMAT = 1
DEFAULT_EPOCHS = {"rqvae": 200, "rqkmeans": 0}


@dataclass
class SemanticIds:
    item_ids: list[str]
    codes: np.ndarray  # int32 [N, levels + 1]; last column is the disambiguation level
    method: str
    levels: int
    codebook_size: int
    seed: int
    epochs: int
    encoder: str
    collision_rate: float  # before disambiguation: 1 - distinct tuples / items
    usage: list[float]  # per quantised level: distinct codes used / codebook_size
    seconds: float
    info: dict = field(default_factory=dict)
    #: rqvae: one row per training epoch (epoch, step, loss, reconstruction_mse, commitment, seconds); empty when
    #: loaded from the cache (the rows are in its train_log.jsonl) or for rqkmeans
    log: list[dict] = field(default_factory=list)
    #: rqvae: the name of its train_log.jsonl in the dataset's embeddings folder (`read_train_log`), None without one
    log_file: str | None = None

    @property
    def max_duplicates(self) -> int:
        """Size of the largest group of items that shared a tuple (= width of the last level)."""
        return int(self.codes[:, -1].max()) + 1 if len(self.codes) else 0

    @property
    def vocab_size(self) -> int:
        """Number of distinct token ids `tokens()` can produce."""
        return self.levels * self.codebook_size + max(self.max_duplicates, 1)

    def tokens(self) -> np.ndarray:
        """Codes with per-level offsets (level l code c -> l * codebook_size + c): one vocabulary."""
        offsets = np.arange(self.codes.shape[1], dtype=np.int64) * self.codebook_size
        return self.codes.astype(np.int64) + offsets

    def by_item(self) -> dict[str, tuple[int, ...]]:
        return {i: tuple(int(c) for c in row) for i, row in zip(self.item_ids, self.codes)}


# --- pure helpers --------------------------------------------------------------------------------


def collision_rate(codes: np.ndarray) -> float:
    """``1 - distinct code tuples / items`` (0 when every item has its own tuple)."""
    codes = np.asarray(codes)
    if len(codes) == 0:
        return 0.0
    distinct = len(np.unique(codes, axis=0))
    return 1.0 - distinct / len(codes)


def disambiguate(codes: np.ndarray) -> np.ndarray:
    """Append the TIGER disambiguation level: 0, 1, 2, ... over items sharing a tuple, in row order."""
    codes = np.asarray(codes, dtype=np.int32)
    seen: dict[tuple, int] = {}
    extra = np.zeros(len(codes), dtype=np.int32)
    for i, row in enumerate(map(tuple, codes.tolist())):
        extra[i] = seen.get(row, 0)
        seen[row] = extra[i] + 1
    return np.concatenate([codes, extra[:, None]], axis=1)


def codebook_usage(codes: np.ndarray, codebook_size: int) -> list[float]:
    codes = np.asarray(codes)
    return [len(np.unique(codes[:, level])) / codebook_size for level in range(codes.shape[1])]


# --- quantisers ----------------------------------------------------------------------------------


def _rqkmeans(vectors: np.ndarray, levels: int, codebook_size: int, seed: int) -> np.ndarray:
    try:
        from sklearn.cluster import KMeans
    except ImportError:
        raise ConfigError(f"method 'rqkmeans' needs scikit-learn: {INSTALL_HINT}") from None
    residual = np.asarray(vectors, dtype=np.float64).copy()
    codes = np.zeros((len(residual), levels), dtype=np.int32)
    for level in range(levels):
        k = min(codebook_size, len(np.unique(residual, axis=0)))
        km = KMeans(n_clusters=k, n_init=1, random_state=seed + level, max_iter=100)
        labels = km.fit_predict(residual)
        codes[:, level] = labels
        residual -= km.cluster_centers_[labels]
    return codes


#: epochs between two checkpoints of an RQ-VAE fit (a save is ~7 MB; an epoch on ML-1M about a second)
CHECKPOINT_EVERY = 10


def _rqvae(vectors: np.ndarray, levels: int, codebook_size: int, seed: int, epochs: int,
           progress: bool, batch_size: int = 1024, latent_dim: int = 32,
           lr: float = 1e-3, checkpoint=None) -> tuple[np.ndarray, dict, list[dict]]:
    """`checkpoint`: an `EpochCheckpoint` the fit saves every `CHECKPOINT_EVERY` epochs and goes on from (the
    weights, the codebooks' k-means and EMA state, Adam's moments, both RNGs, the log), so a killed fit ends
    with the codes an uninterrupted one gives; None: no checkpoints."""
    try:
        import torch
        from torch import nn
        from vector_quantize_pytorch import ResidualVQ
    except ImportError as e:
        raise ConfigError(f"method 'rqvae' needs torch and vector-quantize-pytorch ({e}): {INSTALL_HINT}") from None

    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x = torch.from_numpy(np.ascontiguousarray(vectors, dtype=np.float32))
    dim = x.shape[1]

    def mlp(sizes):
        layers = []
        for a, b in itertools.pairwise(sizes):
            layers += [nn.Linear(a, b), nn.SiLU()]
        return nn.Sequential(*layers[:-1])

    encoder = mlp([dim, 512, 256, 128, latent_dim])
    decoder = mlp([latent_dim, 128, 256, 512, dim])
    rvq = ResidualVQ(dim=latent_dim, num_quantizers=levels, codebook_size=codebook_size,
                     kmeans_init=True, kmeans_iters=10, decay=0.99, commitment_weight=0.25,
                     threshold_ema_dead_code=2)
    params = list(encoder.parameters()) + list(decoder.parameters()) + list(rvq.parameters())
    opt = torch.optim.Adam(params, lr=lr)
    bs = min(batch_size, len(x))
    last, log, steps, first_epoch, earlier_s = {}, [], 0, 0, 0.0
    parts = {"encoder": encoder, "decoder": decoder, "rvq": rvq, "opt": opt}
    t_fit = time.perf_counter()
    if checkpoint is not None:  # a checkpoint of other vectors, settings, threads, torch or quantiser is not resumed
        from recharness.core.fit_checkpoint import same_shapes

        checkpoint.extend(threads=torch.get_num_threads(), **_runtime_versions("rqvae"))
        saved = checkpoint.load()
        fits = saved is not None and all(same_shapes(saved[0].get(k, {}), m) for k, m in parts.items() if k != "opt")
        if fits:  # else start afresh, nothing half-loaded
            tensors, state = saved
            for name, part in parts.items():
                part.load_state_dict(tensors[name])
            gen.set_state(tensors["gen"])
            torch.set_rng_state(tensors["rng"])
            last, log, steps, first_epoch = state["last"], state["log"], state["steps"], state["epoch"]
            earlier_s = state["fit_s"]
    for epoch in range(first_epoch, epochs):
        t_epoch = time.perf_counter()
        encoder.train(), decoder.train(), rvq.train()
        perm = torch.randperm(len(x), generator=gen)
        tot_rec = tot_commit = 0.0
        for a in range(0, len(x), bs):
            batch = x[perm[a : a + bs]]
            z = encoder(batch)
            zq, _, commit = rvq(z)
            rec = torch.nn.functional.mse_loss(decoder(zq), batch)
            loss = rec + commit.sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            tot_rec += rec.item() * len(batch)
            tot_commit += commit.sum().item() * len(batch)
            steps += 1
        last = {"reconstruction_mse": tot_rec / len(x), "commitment": tot_commit / len(x)}
        log.append({"epoch": epoch + 1, "step": steps, "loss": round(last["reconstruction_mse"] + last["commitment"], 6),
                    "reconstruction_mse": round(last["reconstruction_mse"], 6),
                    "commitment": round(last["commitment"], 6), "seconds": round(time.perf_counter() - t_epoch, 4)})
        if progress and (epoch + 1) % max(1, epochs // 10) == 0:
            print(f"recharness: rqvae epoch {epoch + 1}/{epochs} rec {last['reconstruction_mse']:.5f} "
                  f"commit {last['commitment']:.5f}", file=sys.stderr)
        if checkpoint is not None and (epoch + 1) % CHECKPOINT_EVERY == 0 and epoch + 1 < epochs:
            try:
                checkpoint.save(epoch + 1, {**{k: v.state_dict() for k, v in parts.items()}, "gen": gen.get_state(),
                                            "rng": torch.get_rng_state()},
                                {"epoch": epoch + 1, "last": last, "log": log, "steps": steps,
                                 "fit_s": earlier_s + time.perf_counter() - t_fit})
            except OSError as e:  # a full or read-only data home: the fit goes on without checkpoints
                print(f"recharness: could not checkpoint the RQ-VAE fit in {checkpoint.path} ({e}); going on "
                      "without", file=sys.stderr)
                checkpoint = None
    encoder.eval(), rvq.eval()
    with torch.no_grad():
        _, indices, _ = rvq(encoder(x))
    info = {k: round(v, 6) for k, v in last.items()}
    if first_epoch:  # the killed sittings' epochs are in the log; their seconds are added to the fit's
        info.update(resumed_after_epoch=first_epoch, earlier_sittings_s=round(earlier_s, 3))
    return indices.cpu().numpy().astype(np.int32), info, log


def fit_semantic_ids(item_ids: list[str], vectors: np.ndarray, *, method: str = "rqvae", levels: int = 4,
                     codebook_size: int = 256, seed: int = 0, epochs: int | None = None,
                     encoder: str = DEFAULT_ENCODER, progress: bool = False, checkpoint=None) -> SemanticIds:
    """Quantise `vectors` (one row per item id) into disambiguated semantic IDs. No cache. `checkpoint`: an
    `EpochCheckpoint` for the RQ-VAE's fit (`_rqvae`)."""
    if method not in METHODS:
        raise ConfigError(f"unknown semantic-id method {method!r}; known: {', '.join(METHODS)}")
    if int(levels) < 1 or int(codebook_size) < 2:
        raise ConfigError(f"levels must be >= 1 and codebook_size >= 2, got {levels} and {codebook_size}")
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim != 2 or len(vectors) != len(item_ids):
        raise ConfigError(f"vectors of shape {vectors.shape} do not match {len(item_ids)} item ids")
    epochs = DEFAULT_EPOCHS[method] if epochs is None else int(epochs)
    t0 = time.perf_counter()
    info: dict = {}
    log: list[dict] = []
    if len(vectors) == 0:
        raw = np.zeros((0, levels), dtype=np.int32)
    elif method == "rqkmeans":
        raw = _rqkmeans(vectors, int(levels), int(codebook_size), int(seed))
    else:
        raw, info, log = _rqvae(vectors, int(levels), int(codebook_size), int(seed), max(1, epochs), progress,
                                checkpoint=checkpoint)
    seconds = time.perf_counter() - t0 + info.get("earlier_sittings_s", 0.0)
    return SemanticIds(
        item_ids=[str(i) for i in item_ids], codes=disambiguate(raw), method=method, levels=int(levels),
        codebook_size=int(codebook_size), seed=int(seed), epochs=epochs if method == "rqvae" else 0,
        encoder=encoder, collision_rate=collision_rate(raw), usage=codebook_usage(raw, int(codebook_size)),
        seconds=round(seconds, 3), info=info, log=log,
    )


# --- cache ---------------------------------------------------------------------------------------


def _settings(method: str, levels: int, codebook_size: int, seed: int, epochs: int, encoder: str) -> dict:
    return {"method": method, "levels": int(levels), "codebook_size": int(codebook_size), "seed": int(seed),
            "epochs": int(epochs), "encoder": encoder}


def _key(ids: list[str], vectors: np.ndarray, settings: dict) -> str:
    h = hashlib.sha256()
    h.update(json.dumps({"format": _CACHE_FORMAT, "settings": settings}, sort_keys=True).encode())
    h.update(json.dumps(ids, ensure_ascii=False).encode("utf-8", "backslashreplace"))
    h.update(np.ascontiguousarray(vectors, dtype=np.float32).tobytes())
    return h.hexdigest()[:20]


def _load(path, info_path, ids: list[str], settings: dict) -> SemanticIds | None:
    if not path.exists() or not info_path.exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            cached_ids = [str(i) for i in z["item_ids"].tolist()]
            codes = np.asarray(z["codes"], dtype=np.int32)
        info = json.loads(info_path.read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:
        print(f"recharness: cached semantic ids {path} unreadable ({type(e).__name__}); computing again", file=sys.stderr)
        return None
    if cached_ids != ids or codes.shape != (len(ids), settings["levels"] + 1):
        return None
    if not isinstance(info, dict) or not {"collision_rate", "usage", "seconds"} <= set(info):
        print(f"recharness: cached semantic ids {info_path} lacks its description; computing again", file=sys.stderr)
        return None
    log_file = info.get("train_log")
    return SemanticIds(item_ids=ids, codes=codes, **settings, collision_rate=info["collision_rate"],
                       usage=info["usage"], seconds=info["seconds"], info=info.get("training", {}),
                       log_file=log_file if isinstance(log_file, str) and path.with_name(log_file).exists() else None)


def semantic_ids(dataset_name: str, items_df: pl.DataFrame, *, method: str = "rqvae", levels: int = 4,
                 codebook_size: int = 256, seed: int = 0, epochs: int | None = None,
                 encoder: str = DEFAULT_ENCODER, progress: bool = True) -> SemanticIds:
    """Semantic IDs of a dataset's items, computed once per (embeddings, settings) and then loaded.

    ``epochs`` only matters for ``rqvae`` (default 200). Raises ConfigError for an unknown method
    or missing packages (``pip install 'recharness[train]'``).
    """
    if method not in METHODS:
        raise ConfigError(f"unknown semantic-id method {method!r}; known: {', '.join(METHODS)}")
    epochs = DEFAULT_EPOCHS[method] if epochs is None else int(epochs)
    if method == "rqvae" and epochs < 1:
        raise ConfigError(f"semantic-id epochs={epochs}: an RQ-VAE trains for at least 1 epoch")
    if method == "rqkmeans":
        epochs = 0
    ids, vectors = item_embeddings(dataset_name, items_df, encoder, progress=progress)
    settings = _settings(method, levels, codebook_size, seed, epochs, encoder)
    folder = embeddings_dir(dataset_name)
    path = folder / f"sid-{method}-{_key(ids, vectors, settings)}.npz"
    info_path = path.with_suffix(".json")
    cached = _load(path, info_path, ids, settings)
    if cached is not None:
        import shutil

        shutil.rmtree(path.with_suffix(".fit-checkpoint"), ignore_errors=True)  # left by a kill after the caching
        return cached

    checkpoint = None
    if method == "rqvae":  # a killed fit goes on from its last checkpoint, removed once the codes are cached
        from recharness.core.fit_checkpoint import EpochCheckpoint

        checkpoint = EpochCheckpoint(path.with_suffix(".fit-checkpoint"), {"settings": settings, "file": path.name})
    sid = fit_semantic_ids(ids, vectors, method=method, levels=levels, codebook_size=codebook_size, seed=seed,
                           epochs=epochs, encoder=encoder, progress=progress, checkpoint=checkpoint)
    log_path = path.with_suffix(".train_log.jsonl")
    info = {
        "dataset": str(dataset_name), **settings, "n_items": len(ids), "train_log": log_path.name if sid.log else None,
        "collision_rate": sid.collision_rate, "usage": sid.usage, "max_duplicates": sid.max_duplicates,
        "seconds": sid.seconds, "training": sid.info, "runtime": _runtime_versions(method),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "cache_format": _CACHE_FORMAT,
    }
    try:
        from recharness.core.io import atomic_write_bytes, atomic_write_text

        buf = io.BytesIO()
        np.savez(buf, item_ids=np.array(ids, dtype=str), codes=sid.codes)
        if sid.log:  # the training's epochs, beside the codes they made
            atomic_write_text(log_path, "".join(json.dumps(r) + "\n" for r in sid.log))
        atomic_write_text(info_path, json.dumps(info, indent=2, sort_keys=True) + "\n")
        atomic_write_bytes(path, buf.getvalue())
        sid.log_file = log_path.name if sid.log else None
        if checkpoint is not None:
            import shutil

            shutil.rmtree(checkpoint.path, ignore_errors=True)
    except OSError as e:
        print(f"recharness: could not cache semantic ids in {folder} ({e})", file=sys.stderr)
    return sid


def read_train_log(dataset_name: str, file_name: str) -> list[dict]:
    """The rows of an RQ-VAE's train_log.jsonl, named as `SemanticIds.log_file` names it, from the dataset's
    embeddings folder ([] when it is not there, e.g. a run moved to another data home)."""
    from recharness.core.io import read_jsonl

    if not file_name or "/" in file_name or "\\" in file_name or file_name.startswith("."):
        return []
    try:
        path = embeddings_dir(dataset_name) / file_name
    except ConfigError:  # not a dataset name
        return []
    return list(read_jsonl(path, tolerate_torn_tail=True)) if path.is_file() else []


def _runtime_versions(method: str) -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for dist in (("torch", "vector-quantize-pytorch") if method == "rqvae" else ("scikit-learn",)):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            pass
    return out
