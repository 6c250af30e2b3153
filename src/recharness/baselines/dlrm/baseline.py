"""The DLRMs as `Baseline`s of RecBench CTR: fit on the build's training pairs, predict P(click).

One class, `DlrmBaseline`, parametrised by the model (`models.MODELS`) and the item representation
("id", "text", "semantic"); the registered names are its subclasses below (`VARIANTS`). Training
data: `TrainData.pairs` (train.parquet), validated on `TrainData.valid` (valid.parquet) when the
build has one, else on a seeded 10% of the training pairs held out here. Text needs
`TrainData.item_table` (item_id, title); semantic the frozen item vectors, by default from
`recharness.data.item_embeddings` for `TrainData.dataset_name` (or given to the constructor).

Saved as a directory: `model.pt` (the state dict, read back with `weights_only=True`) and
`config.json` (the settings and vocabularies), never a pickled object.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Self

import numpy as np
import polars as pl

from recharness.baselines.base import Baseline, TrainData
from recharness.baselines.dlrm.features import FeatureSpace, build_space
from recharness.core.errors import ConfigError

try:
    import torch

    from recharness.baselines.checkpoint import read_model, save_model
    from recharness.baselines.dlrm.models import MODELS, make_model
    from recharness.baselines.dlrm.trainer import (
        TrainConfig,
        fit,
        predict_proba,
        to_tensors,
    )
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ConfigError(f"the DLRM baselines need torch and torch-rechub ({e.name or e} is not installed): "
                      "pip install torch-rechub (with a CPU build of torch)") from e

Vectors = tuple[Sequence[str], np.ndarray]

#: Shared by every model. The paper's: batch 5,000, Adam at lr 1e-3, early stopping on validation
#: AUC, history of 20. Chosen on ml-1m without its test pairs (valid.parquet, and a future-like
#: slice of the training pairs: each user's two latest held out, every user weighing the same, as
#: in the test):
#:
#: - use_user: a user-id field beside the history (RecBench Eq. 2 has the history only). The
#:   user's click rate is the strongest signal the history cannot show (its items are positives
#:   only): history-only DeepFM is level with item_mean, with the user field it is clearly above.
#: - user_min_count 5: a user in fewer training pairs shares the unknown row; their own embedding
#:   learned from 1-4 pairs was noise and put those users below item_mean.
#: - embedding_l2 1e-2 (lambda * sum of squares of every learnable table, added to the mean BCE)
#:   with init_std 1e-2: shrinks rarely seen rows as item_mean's smoothing does.
#: - dropout 0.3, embed_dim 16, MLP 256-128: better than 0.1, within noise of 8/32 and 64-32.
#:
#: With `use_user=False, user_min_count=1` the inputs are exactly the paper's Group A.
COMMON: dict[str, Any] = {
    "embed_dim": 16, "mlp_dims": [256, 128], "dropout": 0.3, "init_std": 1e-2,
    "use_user": True, "min_count": 1, "user_min_count": 5, "history_len": 20,
    "batch_size": 5000, "lr": 1e-3, "max_epochs": 50, "patience": 2, "weight_decay": 0.0, "embedding_l2": 1e-2,
}
#: each model's own parameters
MODEL_PARAMS: dict[str, dict[str, Any]] = {
    "dnn": {}, "pnn": {}, "deepfm": {},
    "dcn": {"n_cross_layers": 3},
    "dcnv2": {"n_cross_layers": 3},
    "masknet": {"mode": "parallel", "num_blocks": 2, "block_dim": 64, "reduction_ratio": 1.0},
    "finalmlp": {"mlp2_dims": [256], "num_heads": 1, "feature_selection": True, "fs_hidden": 64},
    "autoint": {"num_layers": 3, "num_heads": 2, "attention_dropout": 0.0},
    "gdcn": {"n_cross_layers": 3, "structure": "parallel"},
}
_SPACE = ("embed_dim", "use_user", "min_count", "user_min_count", "history_len")
_TRAIN = ("batch_size", "lr", "max_epochs", "patience", "weight_decay", "embedding_l2")


def default_vectors(dataset_name: str | None, items: pl.DataFrame | None, encoder: str) -> Vectors:
    if dataset_name is None or items is None:
        raise ConfigError("the semantic DLRM needs the dataset's name and item table in its training data "
                          "(TrainData.dataset_name, TrainData.item_table) to embed the items")
    from recharness.data.item_embeddings import item_embeddings

    return item_embeddings(dataset_name, items, encoder=encoder)


def holdout(pairs: pl.DataFrame, fraction: float, seed: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(train, valid): a seeded `fraction` of the pairs kept apart for early stopping."""
    rng = np.random.default_rng(seed)
    is_valid = rng.random(pairs.height) < fraction
    return pairs.filter(pl.Series(~is_valid)), pairs.filter(pl.Series(is_valid))


def validation_pairs(train: TrainData, seed: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(pairs fitted on, pairs validated on): the build's valid.parquet beside its training pairs, else a
    seeded 10% of the training pairs held out (`holdout`). Both come from the training data only."""
    pairs = train.require_pairs("the DLRMs")
    valid = getattr(train, "valid", None)
    if valid is None or valid.height == 0:
        return holdout(pairs, 0.1, seed)
    return pairs, valid


class DlrmBaseline(Baseline):
    """A deep CTR model of RecBench §4 (Groups A-C) answering ctr samples with `p_yes`."""

    name = "dlrm"
    model_name = "dnn"
    representation = "id"
    #: `train --tune N` (`baselines.tuning`): the Optuna search space shared by every DLRM; a trial is
    #: scored by its validation AUC (`tuning_objective`) and runs the fit's own early stopping (no epoch cap).
    #: Wider than first set (embed 8-32, lr from 3e-4, dropout to 0.5): on ML-1M tuned DeepFM/DCNv2 chose embed 8,
    #: dropout 0.48 and lr 3.0e-4, at the edges (benchmarks/results/recbench_ctr.md)
    space: dict[str, tuple] = {"embed_dim": ("choice", 4, 8, 16, 32), "lr": ("log", 1e-4, 3e-3),
                               "dropout": ("float", 0.0, 0.7), "embedding_l2": ("log", 1e-4, 1e-1)}
    tune_epochs: int | None = None
    #: set by `recharness train` before `fit`: each whole epoch checkpointed, a killed fit goes on from it
    #: (`core.fit_checkpoint.EpochCheckpoint`, stamped with the settings and the fit's data); None: none (tuning, tests)
    checkpoint = None

    def __init__(self, seed: int = 0, *, vectors: Vectors | Callable[[], Vectors] | None = None,
                 encoder: str = "minilm", threads: int | None = 1, progress: bool = True, **params):
        """`params` override `COMMON` and the model's `MODEL_PARAMS`; `vectors` (ids, [N, d]) or a
        function returning them replaces the semantic item vectors `encoder` would give (tests inject
        them; name them with `encoder`). `threads`: torch's intra-op threads while fitting (None:
        torch's own setting). One by default: the same seed then gives the same model on any
        machine (a sum split over threads rounds differently), and these models are too small to
        gain from more; on a busy 2-core box two threads fitted 4-5 times slower than one."""
        if self.model_name not in MODELS:
            raise ValueError(f"unknown DLRM {self.model_name!r}")
        self.seed = seed
        self.params = {**COMMON, **MODEL_PARAMS[self.model_name]}
        unknown = set(params) - set(self.params)
        if unknown:
            raise TypeError(f"{self.name} takes no parameters {sorted(unknown)}; known: {sorted(self.params)}")
        self.params.update(params)
        self.vectors, self.encoder = vectors, encoder
        self.threads, self.progress = threads, progress
        self.space: FeatureSpace | None = None
        self.model: torch.nn.Module | None = None
        self.log = None

    @classmethod
    def create(cls, seed: int = 0, **params) -> Self:
        return cls(seed=seed, **params)

    @classmethod
    def defaults(cls) -> dict:
        return {**COMMON, **MODEL_PARAMS[cls.model_name]}

    @classmethod
    def tuning_objective(cls, train: TrainData, seed: int):
        """For `train --tune`: AUC on the validation pairs the fit early-stops on (`validation_pairs`),
        scored with the best epoch's weights; never a test pair."""
        from recharness.baselines.tuning import Objective

        _, valid = validation_pairs(train, seed)
        where = ("the build's validation slice of the training pairs (valid.parquet)"
                 if getattr(train, "valid", None) is not None and train.valid.height else
                 "a seeded 10% of the training pairs held out")
        return Objective(train, lambda model: model.valid_auc(valid), "auc", valid.height,
                         f"auc on {valid.height} validation pairs: {where}, the pairs the fit early-stops on "
                         "(never a test pair)",
                         lambda: list(zip(valid["user_id"].to_list(), valid["item_id"].to_list())))

    def settings(self) -> dict:
        out = {"model": self.model_name, "representation": self.representation, "seed": self.seed,
               **{k: list(v) if isinstance(v, tuple) else v for k, v in self.params.items()}, "threads": self.threads}
        if self.representation == "semantic":
            out["encoder"] = self.encoder
        return out

    # ------------------------------------------------------------ fitting

    def _model_params(self) -> dict:
        return {k: v for k, v in self.params.items() if k not in _SPACE + _TRAIN}

    def _vectors(self, train: TrainData) -> Vectors | None:
        if self.representation != "semantic":
            return None
        v = self.vectors
        if callable(v):
            return v()
        if v is not None:
            return v
        return default_vectors(getattr(train, "dataset_name", None), getattr(train, "item_table", None), self.encoder)

    def fit(self, train: TrainData) -> Self:
        train.require_pairs(self.name)
        pairs, valid = validation_pairs(train, self.seed)
        p = self.params
        self.space = build_space(pairs, representation=self.representation, embed_dim=p["embed_dim"],
                                 history_len=p["history_len"], use_user=p["use_user"], min_count=p["min_count"],
                                 user_min_count=p["user_min_count"],
                                 item_table=getattr(train, "item_table", None), vectors=self._vectors(train))
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            self.model = make_model(self.model_name, self.space, **self._model_params())
        config = TrainConfig(**{k: p[k] for k in _TRAIN}, seed=self.seed, threads=self.threads, progress=self.progress)
        self.log = fit(self.model, to_tensors(self.space.encode_frame(pairs)),
                       torch.from_numpy(pairs["label"].to_numpy().astype(np.float32)),
                       to_tensors(self.space.encode_frame(valid)), valid["label"].to_numpy(), config, self.name,
                       checkpoint=self.checkpoint)
        return self

    # ------------------------------------------------------------ predicting

    def predict_proba(self, samples: list[dict]) -> np.ndarray:
        if self.model is None or self.space is None:
            raise ValueError(f"{self.name} predicts only once fitted (or loaded)")
        if not samples:
            return np.zeros(0)
        from recharness.baselines.torch_threads import threads

        with threads(self.threads):  # the fit's thread count: the same sums, so the same scores, on any machine
            return predict_proba(self.model, to_tensors(self.space.encode_samples(samples)))

    def p_clicks(self, samples: list[dict]) -> list[float]:
        return [float(v) for v in self.predict_proba(samples)]

    def valid_auc(self, valid: pl.DataFrame) -> float:
        """AUC of the fitted model on labelled pairs (user_id, item_id, label, history): the tuning objective."""
        if self.model is None or self.space is None:
            raise ValueError(f"{self.name} predicts only once fitted (or loaded)")
        from recharness.baselines.torch_threads import threads
        from recharness.metrics.classification import auc

        with threads(self.threads):  # the fit's thread count: the same sums as its own validation
            scores = predict_proba(self.model, to_tensors(self.space.encode_frame(valid)))
        return float(auc(valid["label"].to_numpy(), scores))

    # ------------------------------------------------------------ persistence

    def save(self, path: Path) -> Path:
        """Write `path`/model.pt (state dict) and `path`/config.json; returns `path`."""
        if self.model is None or self.space is None:
            raise ValueError(f"{self.name} saves only once fitted")
        return save_model(path, self.model.state_dict(),
                          {"baseline": self.name, "settings": self.settings(), "space": self.space.config()})

    @classmethod
    def load(cls, path: Path) -> DlrmBaseline:
        """The fitted baseline `save` wrote (of the class it was saved from)."""
        saved = read_model(path, VARIANTS, cls, drop=("model", "representation"))
        self = saved.cls(seed=saved.seed, progress=False, **saved.settings)
        self.space = FeatureSpace.from_config(saved.config["space"])
        self.model = make_model(self.model_name, self.space, **self._model_params())
        self.model.load_state_dict(saved.state_dict)
        self.model.eval()
        return self


def _variant(name: str, model: str, representation: str, doc: str) -> type[DlrmBaseline]:
    return type(name, (DlrmBaseline,), {"name": name, "model_name": model, "representation": representation,
                                        "__doc__": doc, "__module__": __name__})


DNN = _variant("dnn", "dnn", "id", "DNN over the item id and the mean of the history's item ids.")
PNN = _variant("pnn", "pnn", "id", "PNN (inner products) with the item as an id.")
DeepFM = _variant("deepfm", "deepfm", "id", "DeepFM (torch-rechub) with the item as an id.")
DCN = _variant("dcn", "dcn", "id", "DCN (torch-rechub) with the item as an id.")
DCNv2 = _variant("dcnv2", "dcnv2", "id", "DCNv2 (torch-rechub, full-rank, parallel) with the item as an id.")
MaskNet = _variant("masknet", "masknet", "id", "MaskNet (parallel MaskBlocks) with the item as an id.")
FinalMLP = _variant("finalmlp", "finalmlp", "id", "FinalMLP with the item as an id.")
AutoInt = _variant("autoint", "autoint", "id", "AutoInt+ (torch-rechub) with the item as an id.")
GDCN = _variant("gdcn", "gdcn", "id", "GDCN-P with the item as an id.")
DNNText = _variant("dnn_text", "dnn", "text", "DNN with the item as its title's tokens (learned word embeddings).")
DNNSemantic = _variant("dnn_semantic", "dnn", "semantic", "DNN with the item as a frozen pretrained text embedding.")

VARIANTS: dict[str, type[DlrmBaseline]] = {c.name: c for c in (
    DNN, PNN, DeepFM, DCN, DCNv2, MaskNet, FinalMLP, AutoInt, GDCN, DNNText, DNNSemantic)}
