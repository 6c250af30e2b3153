"""The --option keys of RecBench CTR, with the paper's sizes (Table 2) as defaults."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from recharness.tasks.options import TaskOptions


class CtrOptions(TaskOptions):
    suite: ClassVar[str] = "recbench"

    test_users: int = Field(5000, ge=1, description="users drawn for testing (--limit N overrides)")
    test_pairs_per_user: int = Field(4, ge=1, description="each test user's last N labelled pairs are the test pairs")
    train_pairs: int = Field(100_000, ge=1, description="labelled pairs sampled for training, validation slice included")
    valid_fraction: float = Field(0.1, ge=0.0, lt=1.0, description="share of the training pairs kept apart for validation")
    history_len: int = Field(20, ge=1, description="positives before the candidate shown as the user's history")
    min_history: int = Field(1, ge=0, description="earlier positives a pair (test or training) needs to be kept")
    negatives: Literal["auto", "ratings", "sampled"] = Field(
        "auto", description="ratings: rating > 3 is a click, < 3 a non-click, 3 dropped; sampled: every "
        "interaction is a click plus neg_ratio unseen items; auto: ratings when the dataset has ratings")
    neg_ratio: int = Field(2, ge=1, description="sampled negatives per positive (negatives=sampled)")


OPTIONS: dict[str, type[TaskOptions]] = {"ctr": CtrOptions}
