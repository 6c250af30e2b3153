"""Pairs and samples as tensors for the DLRMs: vocabularies, padded histories, item content.

A vocabulary maps ids to rows of an embedding table: row 0 is padding (a history shorter than
`history_len` is filled with it, its embedding is zero and masked out of the mean), row 1 the
unknown id (a user or item not in the training pairs; at predict time it gets the OOV row, which
`min_count` may train on rare ids), real ids from row 2 in first-seen order. Vocabularies are built
on the training pairs only (validation and test ids are OOV unless they occur in training).

The item representation (RecBench §3.1, Groups A-C) decides what the item rows hold:

- ``id``: a learned embedding per item id seen in training (Group A);
- ``text``: the mean of learned word embeddings of the item's title tokens (Group B), no
  pretrained word vectors; the item vocabulary covers the whole catalog, since a title is content
  and no target, and the word vocabulary every title's tokens;
- ``semantic``: frozen pretrained item vectors (Group C) projected to the embedding size; vocabulary
  over the catalog as for text, an item without a vector gets zeros.

No torch here: the arrays are numpy, turned into tensors by the model and trainer modules.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import polars as pl

PAD, OOV = 0, 1
REPRESENTATIONS = ("id", "text", "semantic")
_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


def tokenize(text: str | None) -> list[str]:
    """Lower-cased word and number tokens of a title ("Toy Story (1995)" -> toy, story, 1995)."""
    return _TOKEN.findall(text.lower()) if text else []


class Vocab:
    """id -> row: 0 padding, 1 unknown, then the known ids in first-seen order."""

    def __init__(self, ids: Sequence[str] = ()):
        self.ids: list[str] = list(ids)
        self.index: dict[str, int] = {x: k + 2 for k, x in enumerate(self.ids)}

    @classmethod
    def build(cls, values: Iterable[str], min_count: int = 1) -> Vocab:
        counts = Counter(values)
        return cls([x for x, n in counts.items() if n >= min_count])

    def __len__(self) -> int:
        """Rows of the embedding table (padding and unknown included)."""
        return len(self.ids) + 2

    def get(self, x: str) -> int:
        return self.index.get(x, OOV)

    def lookup(self, values: Iterable[str]) -> np.ndarray:
        get = self.index.get
        return np.fromiter((get(x, OOV) for x in values), np.int64)


@dataclass
class FeatureSpace:
    """What the model's input layer needs: the fields, table sizes and item content, all numpy."""

    representation: str = "id"
    embed_dim: int = 16
    history_len: int = 20
    use_user: bool = False
    items: Vocab = field(default_factory=Vocab)
    users: Vocab = field(default_factory=Vocab)
    #: text: the title vocabulary and each item row's token rows, [len(items), max tokens], 0-padded
    words: Vocab | None = None
    item_tokens: np.ndarray | None = None
    #: semantic: each item row's frozen vector, [len(items), dim] (rows 0 and 1 zero)
    item_vectors: np.ndarray | None = None

    @property
    def fields(self) -> list[str]:
        """Input fields, user side first: [user_id,] history, item_id."""
        return (["user_id"] if self.use_user else []) + ["history", "item_id"]

    def encode(self, user_ids: Sequence[str], item_ids: Sequence[str],
               histories: Sequence[Sequence[str] | None]) -> dict[str, np.ndarray]:
        """{field: int64 array}: item_id [B], history [B, history_len] (the newest positives,
        zero-padded), user_id [B] when used."""
        n, L = len(item_ids), self.history_len
        hist = np.zeros((n, L), np.int64)
        get = self.items.index.get
        for r, h in enumerate(histories):
            if h is None or len(h) == 0 or L == 0:
                continue
            h = h[-L:]
            hist[r, : len(h)] = [get(x, OOV) for x in h]
        out = {"history": hist, "item_id": self.items.lookup(item_ids)}
        if self.use_user:
            out["user_id"] = self.users.lookup(user_ids)
        return out

    def encode_frame(self, pairs: pl.DataFrame) -> dict[str, np.ndarray]:
        return self.encode(pairs["user_id"].to_list(), pairs["item_id"].to_list(), pairs["history"].to_list())

    def encode_samples(self, samples: Sequence[dict]) -> dict[str, np.ndarray]:
        return self.encode([s.get("user_id") for s in samples], [s["item_id"] for s in samples],
                           [s.get("history") for s in samples])

    def config(self) -> dict:
        """JSON-able description (vocabularies included); arrays live in the model's state dict."""
        return {"representation": self.representation, "embed_dim": self.embed_dim,
                "history_len": self.history_len, "use_user": self.use_user,
                "items": self.items.ids, "users": self.users.ids,
                "words": self.words.ids if self.words is not None else None,
                "item_tokens_shape": list(self.item_tokens.shape) if self.item_tokens is not None else None,
                "item_vectors_shape": list(self.item_vectors.shape) if self.item_vectors is not None else None}

    @classmethod
    def from_config(cls, cfg: dict) -> FeatureSpace:
        """The space `config` describes; its content arrays are zeros of the saved shape, to be
        overwritten by the model's state dict."""
        tok, vec = cfg.get("item_tokens_shape"), cfg.get("item_vectors_shape")
        return cls(representation=cfg["representation"], embed_dim=cfg["embed_dim"],
                   history_len=cfg["history_len"], use_user=cfg["use_user"],
                   items=Vocab(cfg["items"]), users=Vocab(cfg["users"]),
                   words=Vocab(cfg["words"]) if cfg.get("words") is not None else None,
                   item_tokens=np.zeros(tok, np.int64) if tok else None,
                   item_vectors=np.zeros(vec, np.float32) if vec else None)


def build_space(pairs: pl.DataFrame, *, representation: str = "id", embed_dim: int = 16, history_len: int = 20,
                use_user: bool = False, min_count: int = 1, user_min_count: int = 1,
                item_table: pl.DataFrame | None = None,
                vectors: tuple[Sequence[str], np.ndarray] | None = None) -> FeatureSpace:
    """Vocabularies from the training `pairs` (user_id, item_id, history), and the item content the
    representation needs: `item_table` (item_id, title) for text, `vectors` (ids, [N, d]) for semantic.
    An item (as candidate or in a history) seen fewer than `min_count` times, a user in fewer than
    `user_min_count` pairs, gets the unknown row, which the rare ones then train."""
    if representation not in REPRESENTATIONS:
        raise ValueError(f"unknown item representation {representation!r}; known: {', '.join(REPRESENTATIONS)}")
    seen = pairs["item_id"].to_list() + pairs["history"].explode().drop_nulls().to_list()
    users = Vocab.build(pairs["user_id"].to_list(), user_min_count) if use_user else Vocab()
    space = FeatureSpace(representation, embed_dim, history_len, use_user, users=users)
    if representation == "id":
        space.items = Vocab.build(seen, min_count)
        return space
    catalog: list[str] = []
    if item_table is not None:
        catalog = item_table["item_id"].cast(pl.Utf8).to_list()
    elif vectors is not None:
        catalog = [str(x) for x in vectors[0]]
    space.items = Vocab(list(dict.fromkeys(catalog + seen)))
    if representation == "text":
        if item_table is None or "title" not in item_table.columns:
            raise ValueError("the text representation needs the item table with a title column")
        titles = dict(zip(item_table["item_id"].cast(pl.Utf8).to_list(), item_table["title"].to_list()))
        tokens = [tokenize(titles.get(i)) for i in space.items.ids]
        space.words = Vocab.build(t for ts in tokens for t in ts)
        width = max([len(ts) for ts in tokens] + [1])
        mat = np.zeros((len(space.items), width), np.int64)
        for r, ts in enumerate(tokens, start=2):
            mat[r, : len(ts)] = space.words.lookup(ts)
        space.item_tokens = mat
    else:
        if vectors is None:
            raise ValueError("the semantic representation needs pretrained item vectors")
        ids, vecs = vectors
        vecs = np.asarray(vecs, np.float32)
        mat = np.zeros((len(space.items), vecs.shape[1]), np.float32)
        rows = space.items.lookup(str(x) for x in ids)
        known = rows != OOV
        mat[rows[known]] = vecs[known]
        space.item_vectors = mat
    return space
