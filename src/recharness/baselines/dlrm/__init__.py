"""RecBench's conventional CTR models (DLRMs, §4 Groups A-C) as trainable click-through baselines.

Nine models with the item as an id (DNN, PNN, DeepFM, DCN, DCNv2, MaskNet, FinalMLP, AutoInt,
GDCN), and DNN with the item as its title's tokens (text) or as a frozen pretrained vector
(semantic). Built on torch-rechub (see `models`); this module imports neither torch nor it, so
registering the names costs nothing: `register_dlrms(BASELINES)` adds lazy "module:Object" entries.

Defaults (batch 5,000, Adam lr 1e-3, early stopping on validation AUC) are the paper's; the rest
was chosen on ml-1m without its test pairs (see `baseline.COMMON`). One departs from the paper's
inputs: a user-id field beside the history (`use_user=False` gives the paper's Group A inputs).
"""

from __future__ import annotations

_MODULE = "recharness.baselines.dlrm.baseline"

#: registered name -> (class in `baseline`, description)
DLRMS: dict[str, tuple[str, str]] = {
    "dnn": ("DNN", "DNN (MLP) over the candidate item's id embedding and the mean of the history's"),
    "pnn": ("PNN", "PNN: MLP over the id embeddings and their pairwise inner products"),
    "deepfm": ("DeepFM", "DeepFM (torch-rechub): FM plus MLP over the id embeddings"),
    "dcn": ("DCN", "DCN (torch-rechub): cross network plus MLP over the id embeddings"),
    "dcnv2": ("DCNv2", "DCNv2 (torch-rechub): full-rank cross network plus MLP over the id embeddings"),
    "masknet": ("MaskNet", "MaskNet: parallel instance-guided MaskBlocks over the id embeddings"),
    "finalmlp": ("FinalMLP", "FinalMLP: two gated MLP streams with bilinear fusion over the id embeddings"),
    "autoint": ("AutoInt", "AutoInt+ (torch-rechub): self-attention plus MLP over the id embeddings"),
    "gdcn": ("GDCN", "GDCN: gated cross network plus MLP over the id embeddings"),
    "dnn_text": ("DNNText", "DNN with each item as the mean of learned embeddings of its title's tokens"),
    "dnn_semantic": ("DNNSemantic", "DNN with each item as its frozen pretrained text embedding"),
}


def register_dlrms(registry) -> None:
    """Add the DLRMs to a baseline registry, lazily (torch is imported on first use). They are
    `heavy`: fitted by the `train` stage (seconds to a minute each), never on the fly inside `score`;
    `tunable`: `train --tune N` searches `DlrmBaseline.space` by validation AUC (`baselines.tuning`)."""
    for name, (cls, description) in DLRMS.items():
        registry.add(name, f"{_MODULE}:{cls}", answers=("click",), trainable=True, heavy=True, tunable=True,
                     description=f"{description} (RecBench §4; needs torch and torch-rechub)")


__all__ = ["DLRMS", "register_dlrms"]
