"""The --option keys of RecBench CTR, with the paper's sizes (Table 2) as defaults."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from recharness.tasks.options import TaskOptions, TemporalSplitOptions


class CtrOptions(TemporalSplitOptions):
    suite: ClassVar[str] = "recbench"
    held_out: ClassVar[str] = "each test user's last pairs"
    split_help: ClassVar[str] = (
        "leave_last_out: each test user's last test_pairs_per_user pairs are the test pairs (the paper's); "
        "global_time: one cut time for all users, each test user's first test_pairs_per_user pairs at or after it "
        "tested, nothing at or after it trained on")

    test_users: int = Field(5000, ge=1, description="users drawn for testing (--limit N overrides)")
    test_pairs_per_user: int = Field(4, ge=1, description="each test user's last N labelled pairs are the test pairs "
                                     "(split=global_time: their first N at or after the cut)")
    train_pairs: int = Field(100_000, ge=1, description="labelled pairs sampled for training, validation slice included")
    valid_fraction: float = Field(0.1, ge=0.0, lt=1.0, description="share of the training pairs kept apart for validation")
    history_len: int = Field(20, ge=1, description="positives before the candidate shown as the user's history")
    min_history: int = Field(1, ge=0, description="earlier positives a pair (test or training) needs to be kept")
    negatives: Literal["auto", "ratings", "sampled"] = Field(
        "auto", description="ratings: rating > 3 is a click, < 3 a non-click, 3 dropped; sampled: every "
        "interaction is a click plus neg_ratio unseen items; auto: ratings when the dataset has ratings")
    neg_ratio: int = Field(2, ge=1, description="sampled negatives per positive (negatives=sampled)")


class SeqrecOptions(TemporalSplitOptions):
    """List-wise (next-item) recommendation: leave-last-out per user, Table 2's sizes as defaults."""

    suite: ClassVar[str] = "recbench"
    held_out: ClassVar[str] = "each user's last positive"
    split_help: ClassVar[str] = (
        "leave_last_out: each user's last positive is the test target (the paper's); global_time: one cut time "
        "for all users, the first positive at or after it the test target, nothing at or after it trained on")

    test_users: int = Field(5000, ge=1, description="users drawn for testing: each user's last positive is their "
                            "test target (--limit N overrides)")
    train_sequences: int = Field(40_000, ge=1, description="training sequences kept (a seeded sample when there "
                                 "are more): each user's positives before their last two, cut into windows")
    all_users: bool = Field(False, description="test every eligible user and keep every training sequence "
                            "(RecBole-comparable leave-one-out); overrides test_users and train_sequences")
    history_len: int = Field(20, ge=1, description="most recent positives in a history, test or training (a "
                             "training window is history_len + 1 items); the paper truncates to 20, RecBole uses 50")
    min_history: int = Field(1, ge=1, description="positives a user needs before their validation target to be tested")
    n_recs: int = Field(10, ge=1, description="titles the LLM is asked for (its answer is its ranking)")
    positives: Literal["auto", "ratings", "all"] = Field(
        "auto", description="ratings: rating > 3 is a positive (as ctr); all: every interaction; auto: the "
        "dataset's click labels when it has them, else ratings when it has ratings, else all")


OPTIONS: dict[str, type[TaskOptions]] = {"ctr": CtrOptions, "seqrec": SeqrecOptions}
