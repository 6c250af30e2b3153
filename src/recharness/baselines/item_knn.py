"""ItemKNN: items scored by their cosine similarity to the items a user has (Sarwar et al. 2001).

The similarity comes from `implicit` (its `CosineRecommender`: each item's K nearest neighbours
over the binary user × item matrix); an item's score is the weighted sum of its similarities to the
history's items. A simple neighbourhood model that often beats deep ones on MovieLens-scale data
(Dacrema et al., RecSys 2019), so it belongs beside SASRec and the LLMs.

Parameters (the defaults are the plain model: K = 100, no shrinkage, every history item weighted 1):

- `neighbours`: K, how many nearest neighbours each item keeps (itself included, as `implicit` does),
  or "all" (every item: the full cosine matrix).
- `shrink`: s ≥ 0, the similarity shrunk towards 0 where the items' supports are small
  (Koren 2008; Dacrema et al.'s ItemKNN): sim(i, j) = |U_i ∩ U_j| / (√|U_i|·√|U_j| + s), i.e.
  cos(i, j) · √(|U_i||U_j|) / (√(|U_i||U_j|) + s) over the binary matrix. s = 0 is the cosine. The K
  neighbours are chosen after shrinking.
- `decay`: d ∈ [0, 1], the weight of the history's item at lag l (0 = the newest) is d^l, so
  score(j) = Σ_l d^l · sim(h[−1−l], j). d = 1 weights every item equally (the plain sum); d = 0 keeps the
  newest item only (0^0 = 1).
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse as sp

from recharness.baselines.history_scorer import HistoryScorer

#: the `neighbours` value that keeps every item's similarity to every other
ALL = "all"


class ItemKNN(HistoryScorer):
    name = "itemknn"
    #: `baselines.tuning`: K from a fixed ladder ("all": the full matrix), shrinkage and recency decay;
    #: the default (K 100, shrink 0, decay 1) is trial 0 of a search
    space = {"neighbours": ("choice", 2, 5, 10, 20, 50, 100, 200, 500, 1000, ALL),
             "shrink": ("int", 0, 1000),
             "decay": ("float", 0.0, 1.0)}

    @classmethod
    def defaults(cls) -> dict:
        return {"neighbours": 100, "shrink": 0, "decay": 1.0}

    def _k(self, n: int) -> int:
        k = self.params["neighbours"]
        if isinstance(k, str):
            if k != ALL:
                from recharness.core.errors import ConfigError

                raise ConfigError(f"itemknn: neighbours must be a positive integer or {ALL!r}, not {k!r}")
            return n
        return max(1, min(int(k), n))

    def _fit_matrix(self, x: sp.csr_matrix, sequences: list[list[str]]) -> None:
        from implicit.nearest_neighbours import CosineRecommender
        from threadpoolctl import threadpool_limits

        n = x.shape[1]
        k, shrink = self._k(n), float(self.params["shrink"])
        if shrink < 0:
            from recharness.core.errors import ConfigError

            raise ConfigError(f"itemknn: shrink must be ≥ 0, not {shrink}")
        # with shrinkage the neighbours are chosen after it: implicit computes every cosine, then top K here
        model = CosineRecommender(K=k if shrink == 0 else n, num_threads=1)
        with threadpool_limits(1), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # implicit warns that it converts its own normalised coo matrix
            model.fit(x, show_progress=False)
        sim = model.similarity.tocsr().astype(np.float32)
        if shrink > 0:
            sim = _shrunk_top_k(sim, np.sqrt(np.asarray(x.sum(axis=0), dtype=np.float64).ravel()), shrink, k)
        self.similarity = sim

    def _scores(self, history: np.ndarray) -> np.ndarray:
        if not len(history):
            return np.zeros(len(self.items))
        decay = float(self.params["decay"])
        # an item seen twice counts once, at its latest place (the model is fitted on a 0/1 matrix, as EASE and
        # ALS, which read a history's distinct items)
        back = np.asarray(history)[::-1]
        _, latest = np.unique(back, return_index=True)  # each item's recency: 0 = the newest
        items = back[latest]
        if decay == 1.0:  # the plain sum (the model as it was before `decay`: its numbers do not move)
            return np.asarray(self.similarity[items].sum(axis=0)).ravel()
        weights = decay ** latest.astype(np.float64)  # the newest: d^0 = 1
        return np.asarray(self.similarity[items].T @ weights).ravel()

    def state(self) -> dict:
        return {**super().state(), "similarity": self.similarity}

    def restore(self, arrays: dict) -> None:
        super().restore(arrays)
        self.similarity = arrays["similarity"].tocsr()


def _shrunk_top_k(cosine: sp.csr_matrix, norms: np.ndarray, shrink: float, k: int) -> sp.csr_matrix:
    """cos(i, j) · nᵢnⱼ / (nᵢnⱼ + shrink) (nᵢ = √|Uᵢ|: the co-count over nᵢnⱼ + shrink), then each row's
    `k` largest entries (ties: the lower item index first)."""
    cosine = cosine.tocoo()
    support = norms[cosine.row] * norms[cosine.col]
    data = (cosine.data * support / (support + shrink)).astype(np.float32)
    shrunk = sp.csr_matrix((data, (cosine.row, cosine.col)), shape=cosine.shape)
    shrunk.eliminate_zeros()
    shrunk.sort_indices()
    if k >= shrunk.shape[1]:
        return shrunk
    rows, cols, vals = [], [], []
    for i in range(shrunk.shape[0]):
        lo, hi = shrunk.indptr[i], shrunk.indptr[i + 1]
        idx, val = shrunk.indices[lo:hi], shrunk.data[lo:hi]
        if len(idx) > k:
            keep = np.lexsort((idx, -val))[:k]
            idx, val = idx[keep], val[keep]
        rows.append(np.full(len(idx), i))
        cols.append(idx)
        vals.append(val)
    out = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=shrunk.shape)
    out.sort_indices()
    return out
