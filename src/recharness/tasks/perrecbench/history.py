"""What the model sees of each user: top-k relevant earlier ratings (BM25) plus rating statistics.

The paper retrieves, for each user, the k = 4 items of the user's history
before the query item that BM25 scores highest against the query item's
text (Sec. 3).  By default one bm25s index is built over the whole catalog
and each user's earlier items are ranked by their score for the query: the
same BM25 formula, with term statistics from the catalog rather than from
one user's (often short) history, and the index is built once instead of
once per user.  `corpus="user"` indexes each user's earlier items on their
own, as the original code does (slower).  Ties go to the more recent item.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import polars as pl

_WORD = re.compile(r"[a-z0-9]+")
_TITLE_MAX = 200

# attribute column -> label shown under the item, in this order
CARD_FIELDS = (("author", "Item Author"), ("directors", "Item Director"), ("store", "Item Store"),
               ("genres", "Item Genres"))


def _stopwords() -> frozenset[str]:
    try:
        from bm25s.stopwords import STOPWORDS_EN

        return frozenset(STOPWORDS_EN)
    except ImportError:  # pragma: no cover - older bm25s
        return frozenset()


STOPWORDS = _stopwords()


def tokenize(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in STOPWORDS]


def item_card(row: dict) -> list[tuple[str, str]]:
    """(label, value) lines describing an item, title first; dataset text is kept as plain text."""
    title = str(row.get("title") or row.get("item_id"))
    if len(title) > _TITLE_MAX:
        title = title[: _TITLE_MAX - 1] + "…"
    card = [("Item Title", title)]
    for col, label in CARD_FIELDS:
        v = row.get(col)
        if isinstance(v, (list, tuple)):
            v = ", ".join(str(x) for x in v[:3] if x)
        if v:
            card.append((label, str(v)))
    return card


@dataclass
class UserHistory:
    items: np.ndarray  # item ids, oldest first
    ratings: np.ndarray
    timestamps: np.ndarray
    pos: np.ndarray  # catalog position of each item (-1: not in the catalog)


class HistoryIndex:
    """Per-user chronological histories and a BM25 index over item texts, built once per dataset."""

    def __init__(self, dataset, corpus: str = "catalog"):
        if corpus not in ("catalog", "user"):
            raise ValueError(f"bm25 corpus must be 'catalog' or 'user', not {corpus!r}")
        self.corpus = corpus
        items = dataset.items
        self.cards: dict[str, list[tuple[str, str]]] = {r["item_id"]: item_card(r) for r in items.iter_rows(named=True)}
        self.item_ids = items["item_id"].to_list()
        self.item_pos = {iid: i for i, iid in enumerate(self.item_ids)}
        self.tokens = [tokenize(" ".join(v for _, v in self.cards[i])) for i in self.item_ids]
        self._bm25 = None
        self._score_cache: dict[str, np.ndarray] = {}
        catalog = pl.DataFrame({"item_id": self.item_ids, "_pos": np.arange(len(self.item_ids), dtype=np.int64)},
                               schema={"item_id": pl.Utf8, "_pos": pl.Int64})
        df = (
            dataset.interactions.select("user_id", "item_id", "rating", "timestamp")
            .filter(pl.col("rating").is_not_null() & pl.col("timestamp").is_not_null())
            .sort(["user_id", "timestamp"], maintain_order=True)
            .join(catalog, on="item_id", how="left", maintain_order="left")
            .with_columns(pl.col("_pos").fill_null(-1))
            .group_by("user_id", maintain_order=True)
            .agg("item_id", "rating", "timestamp", "_pos")
        )
        self.users: dict[str, UserHistory] = {
            u: UserHistory(np.array(i, dtype=object), np.array(r, dtype=np.float64), np.array(t, dtype=np.int64),
                           np.array(p, dtype=np.int64))
            for u, i, r, t, p in df.iter_rows()
        }

    def _catalog_bm25(self):
        if self._bm25 is None:
            import bm25s

            self._bm25 = bm25s.BM25()
            self._bm25.index([t or [""] for t in self.tokens], show_progress=False)
        return self._bm25

    def query_tokens(self, item_id: str) -> list[str]:
        return self.tokens[self.item_pos[item_id]] if item_id in self.item_pos else []

    def catalog_scores(self, item_id: str) -> np.ndarray:
        """BM25 score of every catalog item for the query item's text (cached per query)."""
        if item_id not in self._score_cache:
            query = self.query_tokens(item_id)  # none: a card with no ASCII word (Cyrillic, CJK) matches nothing
            self._score_cache[item_id] = (np.asarray(self._catalog_bm25().get_scores(query)) if query
                                          else np.zeros(len(self.tokens)))
        return self._score_cache[item_id]

    def earlier(self, user_id: str, history_len: int) -> UserHistory:
        h = self.users[user_id]
        n = history_len
        return UserHistory(h.items[:n], h.ratings[:n], h.timestamps[:n], h.pos[:n])

    def top_k(self, user_id: str, history_len: int, query_item: str, k: int) -> list[int]:
        """Positions (into the user's earlier history) of the k best BM25 matches, best first. The query item
        itself, rated before (a second review of it), is never one: it would show the rating being predicted."""
        h = self.earlier(user_id, history_len)
        if h.items.size == 0 or k <= 0:
            return []
        if self.corpus == "catalog":
            all_scores = self.catalog_scores(query_item)
            scores = np.where(h.pos >= 0, all_scores[np.maximum(h.pos, 0)], 0.0)
        else:
            import bm25s

            docs = [self.tokens[self.item_pos[i]] if i in self.item_pos else [] for i in h.items]
            query = self.query_tokens(query_item)
            if query:
                r = bm25s.BM25()
                r.index([d or [""] for d in docs], show_progress=False)
                scores = np.asarray(r.get_scores(query))
            else:  # nothing to match on: recency alone orders the history
                scores = np.zeros(h.items.size)
        # best score first; among equal scores the more recent item
        order = np.lexsort((-np.arange(scores.size), -scores))
        same = h.items == query_item
        return [int(x) for x in order if not same[x]][:k]


def rating_stats(ratings) -> tuple[float, float]:
    """(most common rating, mean rating); a tie for most common goes to the higher rating."""
    r = np.asarray(ratings, dtype=np.float64)
    if r.size == 0:
        return float("nan"), float("nan")
    values, counts = np.unique(r, return_counts=True)  # values ascending
    best = values[counts == counts.max()].max()
    return float(best), float(r.mean())
