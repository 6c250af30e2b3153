"""Personalised rankers that score the whole catalog from a user's history.

ItemKNN, EASE, matrix factorisation and the Markov model differ only in how they turn a history
into one score per item (`scores`); everything a task asks of a ranker — rank given candidates,
the top k unseen items, a target's full-catalog rank, a click score — is derived here once, with
one tie rule (training popularity, then item id), so the four models are compared on equal terms.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import Self

import numpy as np
import polars as pl
import scipy.sparse as sp

from recharness.baselines.base import Ranker, TrainData, training_rows


def in_time_order(df: pl.DataFrame) -> pl.DataFrame:
    """Interactions by user, then timestamp (the file's order among equal stamps); as they are without stamps."""
    if "timestamp" not in df.columns:
        return df
    return df.with_row_index("_pos").sort(["user_id", "timestamp", "_pos"]).drop("_pos")


def training_sequences(train: TrainData) -> list[tuple[str, list[str]]]:
    """(user, items in order) per training sequence: a list-wise build's training rows (history, then
    target: a user may have several windows, each transition in one of them), else one per user from
    the training interactions in time order (stable: the file's order among equal stamps)."""
    if train.sequences is not None:
        rows = train.sequences.filter(pl.col("part") == "train")
        return [(u, list(h) + [t]) for u, h, t in rows.select("user_id", "history", "target").iter_rows()]
    return list(user_sequences(train).items())


def user_sequences(train: TrainData) -> dict[str, list[str]]:
    """Each training user's items in order (a list-wise build's windows joined where they share an item)."""
    if train.sequences is not None:
        out: dict[str, list[str]] = {}
        for u, seq in training_sequences(train):
            prev = out.setdefault(u, [])
            prev.extend(seq[1:] if prev and seq and prev[-1] == seq[0] else seq)
        return out
    out: dict[str, list[str]] = {}
    for u, i in in_time_order(train.interactions).select("user_id", "item_id").iter_rows():
        out.setdefault(u, []).append(i)
    return out


def validation_split(train: TrainData, max_users: int, seed: int) -> tuple[TrainData, list[tuple[list[str], str]]]:
    """What a tuner fits on and what it scores, carved from the training data only (never a test target):
    a list-wise build's own validation rows, else each training user's last training item held out.
    At most `max_users` (history, target) pairs, drawn with `seed`."""
    if train.sequences is not None:
        if not (train.sequences["part"] == "valid").any():
            from recharness.core.errors import ConfigError

            raise ConfigError(f"tuning on {train.dataset_name or 'this'} list-wise build needs its validation rows "
                              "(seqrec_valid.parquet beside samples.jsonl in the run directory), which it has none "
                              "of: build it again (`recharness build recbench -t seqrec -o RUN`)")
        valid = train.sequences.filter(pl.col("part") == "valid")
        pairs = [(list(h), t) for h, t in valid.select("history", "target").iter_rows()]
        fit_on = train
    else:
        seqs = user_sequences(train)
        pairs = [(s[:-1], s[-1]) for s in seqs.values() if len(s) >= 2]
        held = training_rows(in_time_order(train.interactions))  # each user's last training item is the validation target
        fit_on = TrainData(held, train.items, item_table=train.item_table, dataset_name=train.dataset_name)
    if len(pairs) > max_users:
        pick = np.random.default_rng(seed).choice(len(pairs), size=max_users, replace=False)
        pairs = [pairs[k] for k in sorted(pick)]
    return fit_on, pairs


def click_validation(train: TrainData, seed: int) -> tuple[TrainData, pl.DataFrame]:
    """(what a tuner fits on, the labelled pairs it scores) for a pairs (CTR) build, from the training data
    only: the build's valid.parquet, else the same seeded 10% of the training pairs the DLRMs hold out
    (`dlrm.baseline.validation_pairs`, repeated here so the HistoryScorers need no torch). The fit's data
    is the remaining pairs' clicks, without any (user, item) of a validation pair."""
    pairs = train.require_pairs("a click objective")
    valid = train.valid
    if valid is None or valid.height == 0:
        is_valid = np.random.default_rng(seed).random(pairs.height) < 0.1  # as `dlrm.baseline.holdout(pairs, 0.1, seed)`
        pairs, valid = pairs.filter(pl.Series(~is_valid)), pairs.filter(pl.Series(is_valid))
    pairs = pairs.join(valid.select("user_id", "item_id").unique(), on=["user_id", "item_id"], how="anti")
    clicks = pairs.filter(pl.col("label") == 1).select("user_id", "item_id", "timestamp")
    fit_on = TrainData(clicks, train.items, pairs, valid=valid, item_table=train.item_table,
                       dataset_name=train.dataset_name)
    return fit_on, valid


def click_samples(pairs: pl.DataFrame) -> list[dict]:
    """The pairs as the ctr task's samples for `p_clicks`: user_id, item_id and the history shown."""
    has_history = "history" in pairs.columns
    cols = ["user_id", "item_id"] + (["history"] if has_history else [])
    return [{"user_id": r[0], "item_id": r[1], "history": list(r[2] or ()) if has_history else []}
            for r in pairs.select(cols).iter_rows()]


class HistoryScorer(Ranker):
    """A ranker whose answers all come from `scores(history)`: one float per catalog item.

    Tasks pass the user's history where the sample carries it (`history=`), else the user id
    (`user=`), whose training history the model kept; an unknown user with no history gets the
    popularity order (every score 0, ties by popularity)."""

    click_probabilities = False  # `p_clicks` is the item's place in the user's order: a ranking score

    #: Optuna search space: {parameter: ("int"|"float"|"log"|"logint", low, high)}; see `baselines.tuning`
    space: dict[str, tuple[str, float, float]] = {}

    def __init__(self, seed: int = 0, **params):
        self.seed = seed
        self.params = {**self.defaults(), **params}
        self.items: list[str] = []
        self.code: dict[str, int] = {}
        self.histories: dict[str, list[str]] = {}
        self.tiebreak = np.zeros(0)
        self.log: dict = {}

    @classmethod
    def defaults(cls) -> dict:
        return {}

    @classmethod
    def create(cls, seed: int = 0, **params) -> Self:
        return cls(seed=seed, **params)

    def settings(self) -> dict:
        return dict(self.params)

    # ------------------------------------------------------------ fitting

    def fit(self, train: TrainData) -> Self:
        self.items = list(dict.fromkeys(train.items))
        self.code = {i: k for k, i in enumerate(self.items)}
        self.histories = user_sequences(train)
        sequences = training_sequences(train)
        users = {u: k for k, u in enumerate(dict.fromkeys(u for u, _ in sequences))}
        rows = [users[u] for u, s in sequences for i in s if i in self.code]
        cols = [self.code[i] for _, s in sequences for i in s if i in self.code]
        x = sp.csr_matrix((np.ones(len(rows), dtype=np.float32), (rows, cols)), shape=(len(users), len(self.items)))
        x.sum_duplicates()
        x.data[:] = 1.0  # implicit feedback: seen or not
        counts = np.asarray(x.sum(axis=0)).ravel()
        # popularity, then item id: the order among equal scores (a rank in 0..n-1, lower first)
        order = sorted(range(len(self.items)), key=lambda k: (-counts[k], self.items[k]))
        self.tiebreak = np.empty(len(self.items))
        self.tiebreak[order] = np.arange(len(self.items))
        self._fit_matrix(x, [s for _, s in sequences])
        return self

    @abstractmethod
    def _fit_matrix(self, x: sp.csr_matrix, sequences: list[list[str]]) -> None:
        """Learn from the binary user × item matrix `x` and the ordered training sequences."""

    @abstractmethod
    def _scores(self, history: np.ndarray) -> np.ndarray:
        """One score per catalog item after the history (item codes, oldest first); higher is better."""

    # ------------------------------------------------------------ answering

    def scores(self, history: Sequence[str]) -> np.ndarray:
        codes = np.asarray([self.code[i] for i in history if i in self.code], dtype=np.int64)
        return np.asarray(self._scores(codes), dtype=np.float64).ravel()

    def _history(self, user: str | None, history: Sequence[str]) -> list[str]:
        return list(history) if history else list(self.histories.get(user, ()))

    def _order(self, s: np.ndarray, keep: np.ndarray) -> np.ndarray:
        idx = np.flatnonzero(keep)
        return idx[np.lexsort((self.tiebreak[idx], -s[idx]))]

    def _ahead(self, s: np.ndarray, t: int) -> np.ndarray:
        """Which items come before item `t` in the order of scores `s` (ties by popularity, then id)."""
        return (s > s[t]) | ((s == s[t]) & (self.tiebreak < self.tiebreak[t]))

    def top_k(self, k: int, exclude: set[str] = frozenset(), *, user: str | None = None,
              history: Sequence[str] = ()) -> list[str]:
        s = self.scores(self._history(user, history))
        keep = np.ones(len(self.items), dtype=bool)
        keep[[self.code[i] for i in exclude if i in self.code]] = False
        return [self.items[j] for j in self._order(s, keep)[:k]]

    def rank(self, candidates: list[str], *, user: str | None = None, history: Sequence[str] = ()) -> list[str]:
        """Candidates by score (ties by popularity, then id); items outside the catalog last, in their order."""
        s = self.scores(self._history(user, history))
        known = [c for c in dict.fromkeys(candidates) if c in self.code]
        known.sort(key=lambda c: (-s[self.code[c]], self.tiebreak[self.code[c]]))
        return known + [c for c in candidates if c not in self.code]

    def target_rank(self, target: str, history: list[str], *, user: str | None = None) -> int | None:
        """The target's 1-based rank among all catalog items not in `history`; None for an unknown item."""
        t = self.code.get(target)
        if t is None:
            return None
        s = self.scores(self._history(user, history))
        keep = np.ones(len(self.items), dtype=bool)
        keep[[self.code[i] for i in history if i in self.code]] = False
        keep[t] = True
        return int(np.count_nonzero(self._ahead(s, t) & keep)) + 1

    def target_ranks_and_tops(self, queries, k: int) -> list[dict]:
        """`target_rank` and `top_k` (history excluded) from one `scores` call per query."""
        out = []
        for target, history, user in queries:
            history = list(history)
            s = self.scores(self._history(user, history))
            keep = np.ones(len(self.items), dtype=bool)
            keep[[self.code[i] for i in history if i in self.code]] = False
            top = [self.items[j] for j in self._order(s, keep)[:k]]
            t = self.code.get(target)
            if t is None:
                rank = None
            else:
                keep[t] = True
                rank = int(np.count_nonzero(self._ahead(s, t) & keep)) + 1
            out.append({"rank": rank, "top": top})
        return out

    def p_click(self, sample: dict) -> float:
        """The item's place in the user's full-catalog order as a score in [0, 1] (1 = first): comparable
        across users for AUC, a ranking score and not a calibrated probability (its logloss means little)."""
        t = self.code.get(sample["item_id"])
        if t is None:
            return 0.0
        history = self._history(sample.get("user_id"), sample.get("history") or ())
        s = self.scores(history)
        # among the items that could be recommended (not the history, as `target_rank`): a longer history
        # would otherwise lower every score of its user, and pooled AUC compares users
        keep = np.ones(len(self.items), dtype=bool)
        keep[[self.code[i] for i in history if i in self.code]] = False
        keep[t] = True
        return 1.0 - int(np.count_nonzero(self._ahead(s, t) & keep)) / max(1, int(keep.sum()) - 1)

    # ------------------------------------------------------------ persistence (no pickle: arrays and JSON)

    def state(self) -> dict[str, np.ndarray]:
        """The learned arrays `load` restores (subclasses add theirs)."""
        return {"tiebreak": self.tiebreak}

    def restore(self, arrays: dict[str, np.ndarray]) -> None:
        self.tiebreak = arrays["tiebreak"]

    def save(self, path) -> object:
        import json
        from pathlib import Path

        from recharness.core.io import atomic_write_bytes, atomic_write_text

        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        import io

        buf = io.BytesIO()
        arrays = self.state()
        flat = {}
        for k, v in arrays.items():
            if sp.issparse(v):
                v = v.tocsr()
                flat.update({f"{k}.data": v.data, f"{k}.indices": v.indices, f"{k}.indptr": v.indptr,
                             f"{k}.shape": np.asarray(v.shape)})
            else:
                flat[k] = np.asarray(v)
        np.savez(buf, **flat)
        atomic_write_bytes(path / "model.npz", buf.getvalue())
        atomic_write_text(path / "config.json", json.dumps(
            {"baseline": self.name, "seed": self.seed, "settings": self.settings(), "items": self.items,
             "histories": self.histories, "log": self.log}))
        return path

    @classmethod
    def load(cls, path) -> Self:
        import json
        from pathlib import Path

        path = Path(path)
        config = json.loads((path / "config.json").read_text())
        if config.get("baseline") != cls.name:
            from recharness.core.errors import ConfigError

            raise ConfigError(f"{path} holds a {config.get('baseline')!r} model, not {cls.name!r}")
        self = cls(seed=int(config.get("seed", 0)), **config.get("settings", {}))
        self.items = list(config["items"])
        self.code = {i: k for k, i in enumerate(self.items)}
        self.histories = {u: list(h) for u, h in config.get("histories", {}).items()}
        self.log = config.get("log", {})
        with np.load(path / "model.npz", allow_pickle=False) as z:
            flat = {k: z[k] for k in z.files}
        arrays = {}
        for k in {k.split(".")[0] for k in flat}:
            if f"{k}.indptr" in flat:
                arrays[k] = sp.csr_matrix((flat[f"{k}.data"], flat[f"{k}.indices"], flat[f"{k}.indptr"]),
                                          shape=tuple(flat[f"{k}.shape"]))
            else:
                arrays[k] = flat[k]
        self.restore(arrays)
        return self
