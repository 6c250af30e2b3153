"""A fit loop's state after each epoch (or every few), so a killed fit goes on where it was.

Used by the trained references (SASRec, SID-SASRec, the DLRMs: `baselines`) and by the RQ-VAE of the
semantic IDs (`data.semantic_ids`), hence here in `core`; torch is imported only when a checkpoint is made
or read.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from recharness.core.io import atomic_write_bytes, atomic_write_text


def same_shapes(saved: dict[str, Any], module) -> bool:
    """Whether a saved state dict fits `module` (the same keys, the same tensor shapes): a checkpoint of
    another network or library version is then not loaded at all, rather than half-loaded or crashing."""
    def shapes(state: dict[str, Any]) -> dict[str, Any]:
        return {k: getattr(v, "shape", None) for k, v in state.items()}

    return shapes(saved) == shapes(module.state_dict())


class EpochCheckpoint:
    """A fit loop's whole state after each epoch, so a killed `train` goes on from its last whole epoch
    instead of epoch 1 (SASRec's fits take minutes to tens of minutes).

    `<dir>/epoch-N.pt` holds the tensors (weights, optimiser moments, RNG states, the best epoch's
    weights), read back with `weights_only=True`; `<dir>/state.json` the rest (epoch, counters, the epochs'
    log) and the `stamp` it was saved for (build, baseline, settings, seed, the CPU's instruction set;
    and, added by the fit, a hash of its training and validation data, its thread count and torch
    version): its atomic rename is the commit point, the previous epoch's tensors are removed after it. A checkpoint of another stamp is
    never resumed (the fit starts afresh), so a resumed loop trains exactly what an uninterrupted run
    would: the shuffling and dropout generators' states are part of it."""

    def __init__(self, path: Path, stamp: dict[str, Any]):
        import torch

        self.path = Path(path)
        # the CPU's vector instruction set too: another one computes other roundings, so a resumed fit would no
        # longer end with the uninterrupted fit's weights (a run directory moved to another machine starts afresh)
        stamp = {**stamp, "cpu": torch.backends.cpu.get_cpu_capability()}
        self.stamp = json.loads(json.dumps(stamp, default=str))  # as it reads back

    def extend(self, **parts: Any) -> None:
        """Add to the stamp what only the fit knows (its data's hash, the thread count it trains with)."""
        self.stamp = {**self.stamp, **json.loads(json.dumps(parts, default=str))}

    def load(self) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """(tensors, state) of the last committed epoch saved for this stamp, else None."""
        import torch

        try:
            record = json.loads((self.path / "state.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(record, dict) or record.get("stamp") != self.stamp:
            return None
        try:
            tensors = torch.load(self.path / record["file"], map_location="cpu", weights_only=True)
        except Exception:  # noqa: BLE001 - a damaged checkpoint only costs the epochs it held
            return None
        return tensors, record["state"]

    def save(self, epoch: int, tensors: dict[str, Any], state: dict[str, Any]) -> None:
        import torch

        self.path.mkdir(parents=True, exist_ok=True)
        buf = io.BytesIO()
        torch.save(tensors, buf)
        name = f"epoch-{epoch}.pt"
        atomic_write_bytes(self.path / name, buf.getvalue())
        atomic_write_text(self.path / "state.json",
                          json.dumps({"stamp": self.stamp, "epoch": epoch, "file": name, "state": state}))
        for old in self.path.glob("epoch-*.pt"):
            if old.name != name:
                old.unlink(missing_ok=True)
