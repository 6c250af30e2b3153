"""Matrix factorisation for implicit feedback: ALS (Hu, Koren & Volinsky 2008), from `implicit`.

Item factors are learned on the training users; a user's factors are solved again from the
history a task shows (`recalculate_user`), so a history the model never saw in training is scored
the same way as a training user's. The classic collaborative-filtering reference.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from recharness.baselines.history_scorer import HistoryScorer


class ALS(HistoryScorer):
    name = "als"
    #: `alpha` is `implicit`'s: an observed item's confidence is alpha itself (its solver weighs items by
    #: confidence - 1), so Hu et al.'s c = 1 + a·r is alpha = 1 + a, and alpha < 1 would trust an observed item
    #: less than an unobserved one: the search starts at 1 (plain least squares on the 0/1 matrix)
    space = {"factors": ("logint", 8, 256), "regularization": ("log", 1e-3, 10.0), "alpha": ("log", 1.0, 50.0),
             "iterations": ("int", 5, 30)}

    @classmethod
    def defaults(cls) -> dict:
        return {"factors": 64, "regularization": 0.05, "alpha": 2.0, "iterations": 15}

    def _fit_matrix(self, x: sp.csr_matrix, sequences: list[list[str]]) -> None:
        from threadpoolctl import threadpool_limits

        with threadpool_limits(1):
            self._model().fit(x, show_progress=False)

    def _model(self):
        from implicit.cpu.als import AlternatingLeastSquares

        p = self.params
        self.model = AlternatingLeastSquares(factors=int(p["factors"]), regularization=float(p["regularization"]),
                                             alpha=float(p["alpha"]), iterations=int(p["iterations"]),
                                             random_state=self.seed, num_threads=1)
        return self.model

    def _scores(self, history: np.ndarray) -> np.ndarray:
        if not len(history):
            return np.zeros(len(self.items))
        cols = np.unique(history)
        row = sp.csr_matrix((np.ones(len(cols), dtype=np.float32), (np.zeros(len(cols), dtype=np.int64), cols)),
                            shape=(1, len(self.items)))
        from threadpoolctl import threadpool_limits

        with threadpool_limits(1):  # one thread, the product too: a single answer as the other references give it
            user = np.asarray(self.model.recalculate_user(0, row)).ravel()
            return self.model.item_factors @ user

    def state(self) -> dict:
        return {**super().state(), "item_factors": self.model.item_factors}

    def restore(self, arrays: dict) -> None:
        super().restore(arrays)
        m = self._model()
        m.item_factors = np.ascontiguousarray(arrays["item_factors"], dtype=np.float32)
        m.user_factors = np.zeros((1, m.item_factors.shape[1]), dtype=np.float32)
