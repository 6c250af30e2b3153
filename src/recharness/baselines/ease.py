"""EASE: a linear item-item model in closed form (Steck, WWW 2019).

B = I − P · diag(1/diag(P)) with P = (XᵀX + λI)⁻¹ and a zero diagonal; an item's score is the
sum of the history items' rows of B. One regularisation weight λ, no iterations, and on
MovieLens-scale data as strong as most deep models: the reference a "beats the baselines" claim
must clear. Solved over the items seen in training (an unseen item's row and column are zero).
"""

from __future__ import annotations

import numpy as np
import scipy.linalg
import scipy.sparse as sp

from recharness.baselines.history_scorer import HistoryScorer


class EASE(HistoryScorer):
    name = "ease"
    #: a whole number on a log scale (1, 2, ... 10,000): fine enough where EASE's best l2 lies (hundreds)
    space = {"l2": ("logint", 1, 10_000)}

    @classmethod
    def defaults(cls) -> dict:
        return {"l2": 500.0}

    def _fit_matrix(self, x: sp.csr_matrix, sequences: list[list[str]]) -> None:
        active = np.flatnonzero(np.asarray(x.sum(axis=0)).ravel() > 0)
        xa = x[:, active].astype(np.float64)
        gram = (xa.T @ xa).toarray()
        gram[np.diag_indices_from(gram)] += float(self.params["l2"])
        p = scipy.linalg.inv(gram, overwrite_a=True, check_finite=False)
        b = p / (-np.diag(p))
        b[np.diag_indices_from(b)] = 0.0
        self.active = active
        self.weights = b.astype(np.float32)
        self.slot = np.full(len(self.items), -1, dtype=np.int64)
        self.slot[active] = np.arange(len(active))

    def _scores(self, history: np.ndarray) -> np.ndarray:
        out = np.zeros(len(self.items))
        rows = self.slot[history] if len(history) else history
        rows = rows[rows >= 0]
        if len(rows):
            out[self.active] = self.weights[np.unique(rows)].sum(axis=0)
        return out

    def state(self) -> dict:
        return {**super().state(), "active": self.active, "weights": self.weights}

    def restore(self, arrays: dict) -> None:
        super().restore(arrays)
        self.active, self.weights = arrays["active"], arrays["weights"]
        self.slot = np.full(len(self.items), -1, dtype=np.int64)
        self.slot[self.active] = np.arange(len(self.active))
