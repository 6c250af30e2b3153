"""ItemKNN: items scored by their cosine similarity to the items a user has (Sarwar et al. 2001).

The similarity comes from `implicit` (its `CosineRecommender`: each item's K nearest neighbours
over the binary user × item matrix); an item's score is the sum of its similarities to the
history's items. A simple neighbourhood model that often beats deep ones on MovieLens-scale data
(Dacrema et al., RecSys 2019), so it belongs beside SASRec and the LLMs.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse as sp

from recharness.baselines.history_scorer import HistoryScorer


class ItemKNN(HistoryScorer):
    name = "itemknn"
    space = {"neighbours": ("log", 2, 1000)}

    @classmethod
    def defaults(cls) -> dict:
        return {"neighbours": 100}

    def _fit_matrix(self, x: sp.csr_matrix, sequences: list[list[str]]) -> None:
        from implicit.nearest_neighbours import CosineRecommender
        from threadpoolctl import threadpool_limits

        model = CosineRecommender(K=int(self.params["neighbours"]), num_threads=1)
        with threadpool_limits(1), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # implicit warns that it converts its own normalised coo matrix
            model.fit(x, show_progress=False)
        self.similarity = model.similarity.tocsr().astype(np.float32)

    def _scores(self, history: np.ndarray) -> np.ndarray:
        if not len(history):
            return np.zeros(len(self.items))
        return np.asarray(self.similarity[history].sum(axis=0)).ravel()

    def state(self) -> dict:
        return {**super().state(), "similarity": self.similarity}

    def restore(self, arrays: dict) -> None:
        super().restore(arrays)
        self.similarity = arrays["similarity"].tocsr()
