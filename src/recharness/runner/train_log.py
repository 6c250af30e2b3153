"""What a trained reference model's training looked like, kept beside it and shown to the user.

`models/<name>/train_log.jsonl`: one line per epoch (epoch, step: optimiser steps so far where the
loop counts them, loss, the validation metric and its value, the best so far, seconds of training and
of validation); `models/<name>/train.json`: the whole configuration (every setting, the seed, the
training data's fingerprint), the best epoch, how many epochs ran and why training stopped. (The
model's own `config.json` is its checkpoint's: what loading it needs, e.g. a DLRM's vocabularies;
train.json is the full training configuration.) A model fitted in one go (closed form, one pass: no
epochs) gets train.json alone. `summary_line` is what `recharness train` prints per model; the report
draws the learning curves from these files.
"""

from __future__ import annotations

import json
from pathlib import Path

from recharness.core.io import atomic_write_text, read_jsonl, write_jsonl_atomic
from recharness.core.rundir import train_json_file, train_log_file

#: the validation metric each family logs under, as its epochs name it
_VALID_KEYS = ("valid_ndcg@10", "valid_auc")


def epochs_of(log) -> list[dict]:
    """The per-epoch entries of a fitted model's log (SASRec-like dicts, or a DLRM FitLog)."""
    if log is None:
        return []
    eps = log.get("epochs") if isinstance(log, dict) else getattr(log, "epochs", None)
    return list(eps or [])


def normalise(epochs: list[dict]) -> list[dict]:
    """Epoch rows in one shape: epoch, loss, metric (its name), valid (its value), best, seconds."""
    out, best = [], float("-inf")
    for e in epochs:
        key = next((k for k in _VALID_KEYS if k in e), None)
        v = e.get(key) if key else None
        if isinstance(v, (int, float)):
            best = max(best, float(v))
        row = {"epoch": e.get("epoch"), "step": e.get("step"), "loss": e.get("loss"),
               "metric": key.removeprefix("valid_") if key else None, "valid": v,
               "best": best if best > float("-inf") else None, "seconds": e.get("train_s", e.get("seconds"))}
        if e.get("valid_s") is not None:  # the validation's own seconds, where the loop times it
            row["valid_seconds"] = e["valid_s"]
        out.append(row)
    return out


def stop_reason(epochs: list[dict], settings: dict) -> str:
    """Why the epochs ended: the patience rule, the epoch cap, or not known (a model that logs none)."""
    if not epochs:
        return "no epochs logged"
    cap, patience = settings.get("max_epochs"), settings.get("patience")
    if cap is not None and len(epochs) >= int(cap):
        return f"reached max_epochs={cap}"
    if patience is not None:
        return f"no better validation score in {patience} epoch{'s' if int(patience) != 1 else ''} (patience)"
    return "stopped early"


def write(model_dir: Path, model, *, seed: int, data: dict, seconds: float) -> dict:
    """train.json for every fitted `model` (its settings, seed, training data, seconds; the semantic IDs it
    used, with their RQ-VAE's log, where it has them) and train_log.jsonl for one that logs epochs. A
    closed-form or one-pass model (popularity, EASE, ALS, ItemKNN, Markov…) gets train.json alone: its
    record is `epochs: 0` (and its search, when tuned)."""
    log = getattr(model, "log", None)
    epochs = normalise(epochs_of(log))
    tuning = log.get("tuning") if isinstance(log, dict) else None
    settings = dict(getattr(model, "settings", dict)() or {})
    info = {"baseline": getattr(model, "name", model_dir.name), "settings": settings, "seed": seed, "data": data}
    sid = getattr(model, "sid_info", None)
    if isinstance(sid, dict) and sid:  # the item codes it learnt over (and where their RQ-VAE's epochs are)
        info["semantic_ids"] = sid
    model_dir.mkdir(parents=True, exist_ok=True)
    if not epochs:  # a closed-form / few-pass model: its record is its configuration (and the search, if tuned)
        info.update({"epochs": 0, "stopped": "fitted (no epochs)", "train_s": round(seconds, 3)})
        if tuning:
            info["tuning"] = tuning
        atomic_write_text(train_json_file(model_dir), json.dumps(info, indent=2, default=str))
        return info
    best_epoch = log.get("best_epoch") if isinstance(log, dict) else getattr(log, "best_epoch", None)
    info.update({"epochs": len(epochs), "best_epoch": best_epoch,
                 "best": max((e["valid"] for e in epochs if isinstance(e["valid"], (int, float))), default=None),
                 "metric": epochs[0]["metric"], "stopped": stop_reason(epochs, settings), "train_s": round(seconds, 3)})
    write_jsonl_atomic(train_log_file(model_dir), epochs)
    atomic_write_text(train_json_file(model_dir), json.dumps(info, indent=2, default=str))
    return info


def tuned_line(name: str, tuning: dict, then: str) -> str:
    """One line for a search (`train.json`'s "tuning"): trials, its seconds, the best trial and its
    configuration, then `then` (what became of the chosen configuration)."""
    params = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in tuning["best"]["params"].items())
    metric = str(tuning.get("objective") or "the objective").split(" ", 1)[0]  # "NDCG@10 on ...", "auc on ..."
    cap = tuning["budget"].get("epochs_per_trial")
    return (f"{name}: tuned, {tuning['budget']['trials']} trials{f' of {cap} epochs' if cap else ''} "
            f"({tuning['seconds']:.1f} s), best valid {metric} {tuning['best']['valid']:.4f} (trial "
            f"{tuning['best']['trial']}) with {params}; {then}")


def summary_line(name: str, info: dict | None) -> str:
    if not info:
        return f"{name}: fitted (no epochs: nothing to log)"
    if not info.get("epochs") and not info.get("tuning"):
        return f"{name}: fitted in {info.get('train_s', 0):.1f} s (no epochs to log; its configuration: train.json)"
    if info.get("tuning"):
        return tuned_line(name, info["tuning"], f"the chosen configuration trained again in {info['train_s']:.1f} s")
    best = info.get("best")
    return (f"{name}: {info['epochs']} epochs, best valid {info.get('metric')} "
            f"{best:.4f} at epoch {info.get('best_epoch')}; stopped: {info['stopped']}; {info['train_s']:.1f} s"
            if isinstance(best, (int, float)) else f"{name}: {info['epochs']} epochs; stopped: {info['stopped']}")


def read(model_dir: Path) -> list[dict]:
    path = train_log_file(model_dir)
    return list(read_jsonl(path)) if path.exists() else []
