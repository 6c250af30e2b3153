"""The reference-model contract: fit on training data, predict records the task's `score` reads.

A baseline is fitted once (`train` stage, or on the fly by a task's `references`) and then
answers every sample of the tasks it serves, so a trained model (RecBench CTR's DLRMs) and a
count (popularity) go through the same two calls and the same scorer as an LLM.
"""

from __future__ import annotations

import sys
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Self

import polars as pl

from recharness.core.errors import ConfigError, InputError
from recharness.core.rundir import RunDir, check_side_file
from recharness.core.types import reference_record


def training_rows(interactions: pl.DataFrame) -> pl.DataFrame:
    """All interactions but each user's last one: the leave-last-out split every llmrec build holds out."""
    pos = pl.int_range(pl.len()).over("user_id")
    return interactions.filter(pos < pl.len().over("user_id") - 1)


def pairs_path(run_dir: Path, suite: str, part: str = "train") -> Path:
    """Where a build that ships labelled training pairs writes them (`RunDir.pairs`)."""
    return RunDir(run_dir).pairs(suite, part)


#: the files a list-wise build (RecBench seqrec) writes beside its samples: `pairs_path(run, suite, part)`
SEQUENCE_PARTS = {"train": "seqrec_train", "valid": "seqrec_valid"}


def read_sequences(run_dir: Path, suite: str) -> pl.DataFrame | None:
    """A list-wise build's training and validation rows (user_id, history, target, part), or None."""
    parts = [pl.read_parquet(check_side_file(run_dir, p)).with_columns(pl.lit(part).alias("part"))
             for part, name in SEQUENCE_PARTS.items() if (p := pairs_path(run_dir, suite, name)).exists()]
    return pl.concat(parts) if parts else None


def sequence_positives(sequences: pl.DataFrame) -> pl.DataFrame:
    """(user_id, item_id): each user's positives in the training rows (never a validation target), once each."""
    rows = sequences.filter(pl.col("part") == "train")
    return (rows.select("user_id", pl.concat_list("history", "target").alias("item_id"))
            .explode("item_id").unique(maintain_order=True))


@dataclass(frozen=True)
class TrainData:
    """What a reference model may learn from: never a sample's held-out target."""

    #: training interactions only (user_id, item_id, rating, timestamp); for a pairs build, its positive pairs
    interactions: pl.DataFrame
    #: the catalog (item ids); knowing which items exist reveals no target
    items: list[str]
    #: a pairs build's labelled training pairs (user_id, item_id, label, timestamp, history), else None
    pairs: pl.DataFrame | None = None
    #: a pairs build's validation slice of the training pairs (early stopping), else None
    valid: pl.DataFrame | None = None
    #: the dataset's item table (item_id, title, attributes): text and embedding item representations
    item_table: pl.DataFrame | None = None
    #: the dataset's name: where per-dataset caches (item embeddings) live
    dataset_name: str | None = None
    #: a list-wise build's rows (user_id, history, target, part: "train" or "valid"), else None
    sequences: pl.DataFrame | None = None

    @classmethod
    def leave_last_out(cls, dataset) -> TrainData:
        """The training part of a leave-last-out build: each user's last interaction is the test target."""
        return cls(training_rows(dataset.interactions), dataset.items["item_id"].to_list(),
                   item_table=dataset.items, dataset_name=dataset.name)

    @classmethod
    def of_build(cls, dataset, run_dir: Path | None, suite: str) -> TrainData:
        """The build's own training pairs where it wrote them (`pairs_path`), else its training sequences
        (`SEQUENCE_PARTS`: interactions are their positives), else its leave-last-out part."""
        if run_dir is not None:
            from recharness.core.rundir import missing_side_files

            gone = missing_side_files(run_dir)
            if gone:  # without them the fallback below is leave-last-out over the whole dataset: the test targets
                raise InputError(Path(run_dir) / gone[0], f"the build's training file{'s' if len(gone) > 1 else ''} "
                                 f"{', '.join(gone)} {'are' if len(gone) > 1 else 'is'} gone (build.json records "
                                 "them): a model fitted without them would see the test targets; run `recharness "
                                 "build` again")
        path = pairs_path(run_dir, suite) if run_dir is not None else None
        sequences = read_sequences(run_dir, suite) if run_dir is not None else None
        if path is None or not path.exists():
            if sequences is not None:
                return cls(sequence_positives(sequences), dataset.items["item_id"].to_list(), sequences=sequences,
                           item_table=dataset.items, dataset_name=dataset.name)
            return cls.leave_last_out(dataset)
        if sequences is not None:  # two splits in one run: a model fitted on both would see test targets
            raise ConfigError(f"{run_dir} holds both pair-wise training pairs ({path.name}) and list-wise training "
                              f"sequences ({SEQUENCE_PARTS['train']}.parquet) of different splits: build ctr and "
                              "seqrec into separate --out directories")
        pairs = pl.read_parquet(check_side_file(run_dir, path))
        clicks = pairs.filter(pl.col("label") == 1).select("user_id", "item_id", "timestamp")
        valid_path = pairs_path(run_dir, suite, "valid")
        valid = pl.read_parquet(check_side_file(run_dir, valid_path)) if valid_path.exists() else None
        return cls(clicks, dataset.items["item_id"].to_list(), pairs, valid=valid,
                   item_table=dataset.items, dataset_name=dataset.name)

    def require_pairs(self, who: str) -> pl.DataFrame:
        """The labelled pairs, or a ConfigError: fitting a CTR model on leave-last-out rows would see test pairs."""
        if self.pairs is None:
            raise ConfigError(f"{who} fits on a build's labelled training pairs (<run>/<suite>/train.parquet); "
                              "this training data has none: rebuild the run")
        return self.pairs


#: a target-rank request: (target item, the history the sample shows, the user or None)
RankQuery = tuple[str, Sequence[str], str | None]


class Baseline(ABC):
    """A reference method. Registered in `BASELINES` with the tasks it serves ("suite:task")."""

    name: str = ""
    #: whether `p_clicks` gives probabilities (log loss means something) or only a ranking score in [0, 1] (AUC
    #: reads the order alone; the ctr task then shows no log loss for it)
    click_probabilities: bool = True

    @classmethod
    def create(cls, seed: int = 0) -> Self:
        """A fresh, unfitted instance; baselines that draw at random override this to take the seed."""
        return cls()

    def settings(self) -> dict:
        """What, besides the training data, decides its predictions (stamped on every record)."""
        return {}

    def identity(self) -> dict:
        return {"baseline": self.name, "settings": self.settings()}

    @abstractmethod
    def fit(self, train: TrainData) -> Self: ...

    def predict(self, samples: list[dict], task=None) -> dict[str, dict]:
        """{sample id: prediction record} for samples of one `task` (a Task): the task asks the baseline
        through its request kinds, in one batch (`Task.reference_answers`); the same samples give the
        same records."""
        if task is None:
            raise ValueError(f"{self.name} answers samples through their task (Task.reference_answers): pass it")
        answers = task.reference_answers(self, samples)
        return {s["id"]: reference_record(s["id"], a) for s, a in zip(samples, answers, strict=True)}

    # ---- request kinds: a baseline implements those it can answer (`Ranker`: all), a task asks for those
    # it needs; asked one it cannot answer, a baseline says so
    def rank(self, candidates: list[str], *, user: str | None = None, history: Sequence[str] = ()) -> list[str]:
        raise ValueError(f"{self.name} does not answer ranking requests (rank)")

    def top_k(self, k: int, exclude: set[str] = frozenset(), *, user: str | None = None,
              history: Sequence[str] = ()) -> list[str]:
        raise ValueError(f"{self.name} does not answer top-k requests (top_k)")

    def p_clicks(self, samples: list[dict]) -> list[float]:
        """Per sample, a score in [0, 1] for its (user_id, item_id, history): higher, more likely a click."""
        raise ValueError(f"{self.name} does not answer click requests (p_clicks)")

    def target_ranks(self, queries: Sequence[RankQuery]) -> list[dict]:
        """Per query (target, history, user): {"rank": the target's 1-based rank among all items not in
        the history, None when never ranked}, with what a decoder reports of its search where it has
        one (items, beams, invalid, top1_invalid)."""
        raise ValueError(f"{self.name} does not answer target-rank requests (target_ranks)")

    def top_ks(self, queries: Sequence[RankQuery], k: int) -> list[list[str]]:
        """Per query (target, history, user): the `k` best items not in the history, best first (what
        beyond-accuracy metrics read); the target plays no part."""
        raise ValueError(f"{self.name} does not answer top-k requests (top_ks)")

    def target_ranks_and_tops(self, queries: Sequence[RankQuery], k: int) -> list[dict]:
        """`target_ranks` with each answer's top-`k` list beside its rank (`"top"`); a model that scores
        every item once for both overrides it (SASRec, SID-SASRec, the history scorers). A baseline that answers
        target ranks but no top-k lists gives its ranks alone (scored like a rank-only file: no list metrics)."""
        ranks = self.target_ranks(queries)
        if type(self).top_ks is Baseline.top_ks:
            return ranks
        return [{**r, "top": t} for r, t in zip(ranks, self.top_ks(queries, k), strict=True)]


class Ranker(Baseline):
    """A baseline that ranks items. Its request kinds: `rank` (given candidates in its order),
    `top_k` (the k best items not excluded), `target_rank` (a target's rank in its whole order,
    history removed; None: an item it never ranks) and, where it has one, `p_click` (a click score
    per user-item pair); `target_ranks`, `top_ks` and `p_clicks` are the batched kinds every baseline
    may answer (here: one call per query). Each task turns these into its own records (`Task.reference_answer`),
    passing the user (`user=`) and the history the sample shows (`history=`): personalised rankers
    (`HistoryScorer`) score from them, non-personalised ones ignore them."""

    @abstractmethod
    def top_k(self, k: int, exclude: set[str] = frozenset(), *, user: str | None = None,
              history: Sequence[str] = ()) -> list[str]: ...

    @abstractmethod
    def rank(self, candidates: list[str], *, user: str | None = None, history: Sequence[str] = ()) -> list[str]: ...

    def p_click(self, sample: dict) -> float:
        """A score in [0, 1] for a sample's (user, item): higher means more likely a click."""
        raise ValueError(f"{self.name} does not answer click requests (p_click)")

    def p_clicks(self, samples: list[dict]) -> list[float]:
        return [self.p_click(s) for s in samples]

    def target_ranks(self, queries: Sequence[RankQuery]) -> list[dict]:
        return [{"rank": self.target_rank(t, list(h), user=u)} for t, h, u in queries]

    def top_ks(self, queries: Sequence[RankQuery], k: int) -> list[list[str]]:
        return [self.top_k(k, exclude=set(h), user=u, history=list(h)) for _, h, u in queries]

    def target_rank(self, target: str, history: list[str], *, user: str | None = None) -> int | None:
        """The target's 1-based rank among all items not in `history` (None: never ranked)."""
        ranked = self.top_k(sys.maxsize, exclude=set(history), user=user, history=history)
        return ranked.index(target) + 1 if target in ranked else None
