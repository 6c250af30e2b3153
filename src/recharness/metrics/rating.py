"""Rating-prediction errors: RMSE and MAE.

Why the optional clipping: LLMs asked for a 1-5 rating sometimes answer 0 or
6 (or a baseline regressor overshoots); clipping predictions to the rating
scale first scores them as the nearest valid rating, the usual convention in
rating-prediction papers.  Missing predictions (NaN) raise instead of being
skipped, because the suite must decide how an unparsable answer is counted.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["rmse", "mae", "rating_errors"]


def _prep(y_true: Any, y_pred: Any, clip: tuple[float, float] | None) -> tuple[np.ndarray, np.ndarray]:
    t = np.asarray(y_true, dtype=np.float64)
    p = np.asarray(y_pred, dtype=np.float64)
    if t.shape != p.shape or t.ndim != 1:
        raise ValueError(f"y_true {t.shape} and y_pred {p.shape} must be 1-D of equal length")
    if np.isnan(t).any() or np.isnan(p).any():
        raise ValueError("ratings contain NaN; map unparsable predictions to a value first")
    if clip is not None:
        lo, hi = clip
        if lo > hi:
            raise ValueError(f"clip range {clip} is empty")
        p = np.clip(p, lo, hi)
    return t, p


def rmse(y_true: Any, y_pred: Any, clip: tuple[float, float] | None = None) -> float:
    """Root mean squared error; ``clip=(1, 5)`` clips predictions to the scale first. NaN if empty."""
    t, p = _prep(y_true, y_pred, clip)
    return float(np.sqrt(np.mean((p - t) ** 2))) if t.size else float("nan")


def mae(y_true: Any, y_pred: Any, clip: tuple[float, float] | None = None) -> float:
    """Mean absolute error; ``clip=(1, 5)`` clips predictions to the scale first. NaN if empty."""
    t, p = _prep(y_true, y_pred, clip)
    return float(np.mean(np.abs(p - t))) if t.size else float("nan")


def rating_errors(y_true: Any, y_pred: Any, clip: tuple[float, float] | None = None) -> dict[str, float]:
    """``{"rmse": ..., "mae": ...}`` in one call."""
    return {"rmse": rmse(y_true, y_pred, clip), "mae": mae(y_true, y_pred, clip)}
