"""A first-order Markov model: what followed the user's last items in the training sequences.

score(j) = Σ_l decay^l · count(h[−1−l] → j) over the last `order` items of the history, from
the transitions of every training sequence (consecutive items of a user, in time order). With
order 1 it is the last-item transition model (Rendle et al. 2010's Markov part), a strong and
cheap next-item reference; ties (items that never followed) go by popularity.

Search space (`baselines.tuning`): `order` 1–20 (the RecBench seqrec builds keep histories of ≤ 20 items,
so 20 is the whole history there; an order beyond a history's length uses every item of it) and `decay`
0.05–1. The default (order 1, decay 0.5) is trial 0 of a search.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from recharness.baselines.history_scorer import HistoryScorer


class Markov(HistoryScorer):
    name = "markov"
    space = {"order": ("int", 1, 20), "decay": ("float", 0.05, 1.0)}

    @classmethod
    def defaults(cls) -> dict:
        return {"order": 1, "decay": 0.5}

    def _fit_matrix(self, x: sp.csr_matrix, sequences: list[list[str]]) -> None:
        src, dst = [], []
        for seq in sequences:
            codes = [self.code[i] for i in seq if i in self.code]
            src += codes[:-1]
            dst += codes[1:]
        n = len(self.items)
        t = sp.csr_matrix((np.ones(len(src), dtype=np.float32), (src, dst)), shape=(n, n))
        t.sum_duplicates()
        self.transitions = t

    def _scores(self, history: np.ndarray) -> np.ndarray:
        out = np.zeros(len(self.items))
        decay = float(self.params["decay"])
        for lag, item in enumerate(history[::-1][: int(self.params["order"])]):
            row = self.transitions.getrow(int(item))
            out[row.indices] += (decay ** lag) * row.data
        return out

    def state(self) -> dict:
        return {**super().state(), "transitions": self.transitions}

    def restore(self, arrays: dict) -> None:
        super().restore(arrays)
        self.transitions = arrays["transitions"].tocsr()
