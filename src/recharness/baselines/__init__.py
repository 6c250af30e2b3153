"""Conventional reference recommenders, scored by the same scorers as the LLMs.

Each is a `Baseline` (fit on `TrainData`, predict prediction records) registered in `BASELINES`
with the request kinds it answers and whether it learns from the training data. Tasks name the
baselines they want (`Task.baselines`), so the `train` stage and the tasks' on-the-fly
`references` fit and ask them the same way, and no baseline knows a suite.
"""

from __future__ import annotations

import time
from pathlib import Path

from recharness.baselines.base import (
    Baseline,
    Ranker,
    TrainData,
    pairs_path,
    training_rows,
)
from recharness.baselines.dlrm import register_dlrms
from recharness.baselines.item_mean import ItemMeanCtr
from recharness.baselines.popularity import PopularityRanker
from recharness.baselines.random_ranker import RandomRanker
from recharness.core.registry import Registry

BASELINES: Registry[type[Baseline]] = Registry("baseline")
# `answers`: the request kinds a baseline implements. A task names the baselines it wants
# (`Task.baselines`) and asks them through these (`Task.reference_answer`): ranking = rank given
# candidates / the top k unseen items / a target's rank; click = a click score per (user, item) pair
BASELINES.add("popularity", PopularityRanker, answers=("ranking", "click"), trainable=True,
              description="most interacted items on the training part (each user's last item held out; "
                          "for click scores: clicks per item in the training pairs; on training sequences: "
                          "users per item)")
BASELINES.add("random", RandomRanker, answers=("ranking", "click"), trainable=False,
              description="uniform random items (for click scores: uniform scores), seeded: the chance level")
BASELINES.add("item_mean", ItemMeanCtr, answers=("click",), trainable=True, tunable=True,
              description="the item's click-through rate in the training pairs, smoothed towards the global rate "
                          "(tunable: the smoothing)")
# personalised rankers over the binary user x item matrix (`HistoryScorer`): simple, strong, tunable
# (`train --tune N`). `heavy`: fitted by `recharness train` only, their predictions kept in the run dir
for _name, _path, _lib, _what in (
        ("itemknn", "item_knn:ItemKNN", "implicit (CosineRecommender)",
         "ItemKNN: item-item cosine similarity (shrinkage optional), the K nearest neighbours of each item (or all), "
         "summed over the history with a recency decay (default: equal weights)"),
        ("ease", "ease:EASE", "NumPy/SciPy (closed form)",
         "EASE (Steck 2019): linear item-item weights in closed form, one L2 weight"),
        ("als", "matrix_factorisation:ALS", "implicit (AlternatingLeastSquares)",
         "matrix factorisation for implicit feedback (ALS, Hu et al. 2008); user factors solved from the history"),
        ("markov", "markov:Markov", "SciPy (sparse counts)",
         "Markov: what followed the user's last item(s) in the training sequences (last-item transitions)")):
    BASELINES.add(_name, f"recharness.baselines.{_path}", answers=("ranking", "click"), trainable=True, heavy=True,
                  tunable=True, library=_lib, description=_what)
# the nine DLRMs (+ DNN with text / semantic embedding), `heavy`, lazy (torch), tunable (validation AUC)
register_dlrms(BASELINES)

# next-item models over training sequences: `heavy`, fitted by `recharness train` only; tunable (`train --tune N`:
# hidden, dropout, lr, each trial capped at `SASRec.tune_epochs` epochs)
#: settings left None unfitted that `fit` sets from the data (the longest training history): a kept model's
#: recorded value of one is no change of settings (`runner.train`); registered here, not on the classes
FIT_SETS_MAX_LEN = ("max_len",)
for _name, _cls, _layers in (("sasrec", "SASRec", 2), ("sasrec-1l", "SASRec1L", 1), ("sasrec-3l", "SASRec3L", 3),
                             ("sasrec-4l", "SASRec4L", 4)):
    BASELINES.add(_name, f"recharness.baselines.sasrec:{_cls}", answers=("ranking",), trainable=True, heavy=True,
                  tunable=True, decided_by_fit=FIT_SETS_MAX_LEN, description=f"SASRec, {_layers} self-attention layer{'s' if _layers > 1 else ''}, hidden 64, "
                              "cross-entropy over all items, early stopping on validation NDCG@10 (needs torch)")
# SASRec over semantic-ID tokens; one training run serves both decodings
BASELINES.add("sid-sasrec", "recharness.baselines.sid_sasrec:SIDSASRec", answers=("ranking",), trainable=True,
              heavy=True, decided_by_fit=FIT_SETS_MAX_LEN,
              description="SASRec (2 layers) over semantic-ID code tokens (RQ-VAE, 4x256 + disambiguation), "
                          "next item decoded by conditional beam search over the catalog's code trie: every "
                          "answer a real item (needs torch, vector-quantize-pytorch, the MiniLM package)")
BASELINES.add("sid-sasrec-free", "recharness.baselines.sid_sasrec:SIDSASRecFree", answers=("ranking",),
              trainable=True, heavy=True, decided_by_fit=FIT_SETS_MAX_LEN,
              description="sid-sasrec's model decoded by plain beam search: code tuples that are no item are "
                          "counted (invalid_share, invalid_top1_share) and dropped from the ranking")


def fit(name: str, train: TrainData, seed: int = 0, params: dict | None = None, *,
        checkpoint: tuple[Path, dict] | None = None) -> tuple[Baseline, float]:
    """The named baseline fitted on `train` (with tuned `params` where given), and the seconds fitting took.
    `checkpoint`: (folder, stamp) where a model trained in epochs saves each one (`EpochCheckpoint`, the
    stamp completed with its settings): a killed fit goes on from there, its earlier sittings' seconds added."""
    t0 = time.perf_counter()
    cls = BASELINES.get(name)
    model = cls.create(seed=seed, **params) if params else cls.create(seed=seed)
    if checkpoint is not None and hasattr(model, "checkpoint"):
        from recharness.core.fit_checkpoint import EpochCheckpoint

        folder, stamp = checkpoint
        model.checkpoint = EpochCheckpoint(folder, {**stamp, "baseline": name, "settings": model.settings()})
    model = model.fit(train)
    return model, time.perf_counter() - t0 + resumed_from(model)[1]


def resumed_from(model) -> tuple[int | None, float]:
    """(the epoch a fitted model's fit went on after, the seconds its killed sittings took), from its log (a
    dict, or a DLRM's `FitLog`); (None, 0.0) for a fit that ran in one go."""
    log = getattr(model, "log", None)
    if isinstance(log, dict):
        return log.get("resumed_after_epoch"), log.get("earlier_sittings_s", 0.0)
    return getattr(log, "resumed_after_epoch", None), getattr(log, "earlier_sittings_s", 0.0)


__all__ = ["BASELINES", "Baseline", "ItemMeanCtr", "PopularityRanker", "RandomRanker", "Ranker", "TrainData", "fit",
           "pairs_path", "training_rows"]
