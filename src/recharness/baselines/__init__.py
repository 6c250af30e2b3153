"""Conventional reference recommenders, scored by the same scorers as the LLMs.

Each is a `Baseline` (fit on `TrainData`, predict prediction records) registered in `BASELINES`
with the tasks it serves ("suite:task") and whether it learns from the training data, so the
`train` stage and the tasks' on-the-fly `references` fit and ask them the same way.
"""

from __future__ import annotations

import time

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
_RANKING = ("llmrec:sequential", "llmrec:direct")
_CTR = ("recbench:ctr",)
BASELINES.add("popularity", PopularityRanker, tasks=(*_RANKING, *_CTR, "recbench:seqrec"), trainable=True,
              description="most interacted items on the training part (each user's last item held out; "
                          "for ctr: clicks per item in the training pairs; for seqrec: users per item in the "
                          "training sequences)")
BASELINES.add("random", RandomRanker, tasks=_RANKING + _CTR, trainable=False,
              description="uniform random items (for ctr: uniform scores), seeded: the chance level")
BASELINES.add("item_mean", ItemMeanCtr, tasks=_CTR, trainable=True,
              description="the item's click-through rate in the training pairs, smoothed towards the global rate")
# ---- RecBench pair-wise (recbench:ctr): the nine DLRMs (+ DNN with text / semantic embedding), `heavy`, lazy (torch)
register_dlrms(BASELINES)

# ---- RecBench list-wise (recbench:seqrec): SASRec (§3.2 Group G) is `heavy`: fitted by `recharness train` only
_SEQREC = ("recbench:seqrec",)
# `table5`: the row's group and label in the paper's Table 5 layout (tasks.recbench.tables)
for _name, _cls, _layers in (("sasrec", "SASRec", 2), ("sasrec-1l", "SASRec1L", 1), ("sasrec-3l", "SASRec3L", 3),
                             ("sasrec-4l", "SASRec4L", 4)):
    BASELINES.add(_name, f"recharness.baselines.sasrec:{_cls}", tasks=_SEQREC, trainable=True, heavy=True,
                  table5={"group": "G", "label": f"SASRec {_layers}L", "order": _layers},
                  description=f"SASRec, {_layers} self-attention layer{'s' if _layers > 1 else ''}, hidden 64, "
                              "cross-entropy over all items, early stopping on validation NDCG@10 (needs torch)")
# §3.2 Group H: SASRec over semantic-ID tokens; one training run serves both decodings
BASELINES.add("sid-sasrec", "recharness.baselines.sid_sasrec:SIDSASRec", tasks=_SEQREC, trainable=True, heavy=True,
              table5={"group": "H", "label": "SID-SASRec 2L-CBS", "order": 2},
              description="SASRec (2 layers) over semantic-ID code tokens (RQ-VAE, 4x256 + disambiguation), "
                          "next item decoded by conditional beam search over the catalog's code trie: every "
                          "answer a real item (needs torch, vector-quantize-pytorch, the MiniLM package)")
BASELINES.add("sid-sasrec-free", "recharness.baselines.sid_sasrec:SIDSASRecFree", tasks=_SEQREC, trainable=True,
              heavy=True, table5={"group": "H", "label": "SID-SASRec 2L", "order": 1},
              description="sid-sasrec's model decoded by plain beam search: code tuples that are no item are "
                          "counted (invalid_share, invalid_top1_share) and dropped from the ranking")
# the zero-shot text row: an LLM's first list entry decoded over a trie of catalog titles (slow: a sample cap)
# opt_in: trained only when named (`train -b title-cbs`); own_latency: its records carry the measured
# per-answer seconds, which the train stage keeps (re-timing would hit its remembered answers)
BASELINES.add("title-cbs", "recharness.baselines.title_cbs:TitleCBS", tasks=_SEQREC, trainable=False, heavy=True,
              opt_in=True, own_latency=True,
              table5={"group": "Z", "label": "SmolLM2-135M titles-CBS (zero-shot)", "order": 0},
              description="zero-shot llama.cpp model (SmolLM2-135M) on the seqrec prompt, its answer decoded by "
                          "beam search over a trie of catalog titles; answers the first 100 samples (scored on "
                          "those); trained only when named: train -b title-cbs (needs llama-cpp-python)")


def serving(suite: str, task: str, *, on_the_fly: bool = False) -> list[str]:
    """The registered baselines that answer `task` of `suite`, in registration order (the row order).
    `on_the_fly`: only those cheap enough to fit inside `score` (trained models such as the DLRMs
    are registered `heavy` and come only from the `train` stage's files)."""
    return [n for n in BASELINES if f"{suite}:{task}" in BASELINES.meta(n).get("tasks", ())
            and not (on_the_fly and BASELINES.meta(n).get("heavy"))]


def fit(name: str, train: TrainData, seed: int = 0) -> tuple[Baseline, float]:
    """The named baseline fitted on `train`, and the seconds fitting took."""
    t0 = time.perf_counter()
    model = BASELINES.get(name).create(seed=seed).fit(train)
    return model, time.perf_counter() - t0


def reference_records(suite: str, task: str, dataset, samples: list[dict], seed: int = 0,
                      train: TrainData | None = None) -> dict[str, dict[str, dict]]:
    """{baseline: {sample id: record}}: the task's registered baselines fitted (on `train`, by default
    the leave-last-out part) and asked on the fly."""
    names = serving(suite, task, on_the_fly=True)
    if names and train is None:
        train = TrainData.leave_last_out(dataset)
    return {name: fit(name, train, seed)[0].predict(samples) for name in names}


__all__ = ["BASELINES", "Baseline", "ItemMeanCtr", "PopularityRanker", "RandomRanker", "Ranker", "TrainData", "fit",
           "pairs_path", "reference_records", "serving", "training_rows"]
