"""The suite's --option keys: RecBenchPlusOptions checks them (descriptions
and defaults are there, listed by `known_options`), parse_options turns them
into the Options the tasks use. `--limit N` caps the queries per task
(users/sets/groups drawn by --seed)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from recharness.tasks.options import OptionError, TaskOptions, check
from recharness.tasks.recbench_plus.official import FILES


@dataclass(frozen=True)
class Options:
    history: tuple[bool, ...]  # which prompt variants: True = with the user's history
    k: int | None  # fixed K (Appendix F) or None = open-ended (the paper's default)
    history_len: int
    max_tokens: int
    ref_k: int  # list length of the reference methods for open-ended queries
    query_field: str
    per_user: int
    min_gt: int
    max_gt: int
    specific: bool
    mix: tuple[float, float, float] | None  # None = the paper's Table 1 mix for the query type
    misinfo_items: int
    ref_top: int  # 0: any item with the hidden value (the paper's draw)
    misinfo_top: int  # 0: the whole KG (the paper's draw)
    interest_len: int
    interest_support: int
    interest_prev: int
    demo_groups: int
    demo_min_users: int
    demo_top: int
    phrase_model: str | None
    phrase_max_tokens: int
    write_official: bool


def mix_weights(mix: str | None) -> tuple[float, float, float] | None:
    """'paper' -> None (Table 1's mix); 'a,b,c' -> weights of 1, 2 and 3-4 conditions, normalised."""
    if mix in (None, "paper"):
        return None
    try:
        parts = tuple(float(x) for x in str(mix).split(","))
    except ValueError:
        raise ValueError("expected 'paper' or three weights like 0.45,0.47,0.08") from None
    if len(parts) != 3 or min(parts) < 0 or sum(parts) <= 0:
        raise ValueError("expected three non-negative weights (1, 2, 3-4 conditions)")
    return tuple(p / sum(parts) for p in parts)  # type: ignore[return-value]


_NONE = (None, "", False, 0, "0", "none", "None")


class RecBenchPlusOptions(TaskOptions):
    """Every task of the suite reads the same options."""

    suite: ClassVar[str] = "recbench-plus"
    droppable: ClassVar[tuple[str, ...]] = ("behaviour",)

    history: Literal["both", "with", "without"] = Field("both", description="prompt variants (Appendix G)")
    k: int | None = Field(None, ge=1, description="ask for K items (Appendix F); none: open-ended, as in the paper")
    history_len: int = Field(20, ge=0, description="most recent history items shown (ground truth removed first)")
    max_tokens: int = Field(200, ge=1, description="answer length")
    ref_k: int = Field(10, ge=1, description="list length of the reference methods for open-ended queries")
    query_field: Literal["situational", "direct"] = Field("situational", description="which query text to ask")
    per_user: int = Field(1, ge=1, description="condition queries per user")
    min_gt: int = Field(2, ge=2, description="fewest ground-truth items of a condition query")
    max_gt: int = Field(10, ge=2, description="most ground-truth items of a condition query")
    specific: bool = Field(True, description="condition sets need one specific relation (director, cast), not only broad ones")
    mix: str | None = Field("paper", description="share of 1, 2 and 3-4 condition queries: paper or a,b,c")
    misinfo_items: int = Field(1, ge=1, description="false claims per misinformed query")
    ref_top: int = Field(5, ge=0, description="an implicit query's first reference film is one of this many most "
                         "popular items with the hidden value; 0: any of them (the paper's draw)")
    misinfo_top: int = Field(100, ge=0, description="a misinformed query's false claims come from this many most "
                             "popular items; 0: the whole KG (the paper's draw)")
    interest_len: int = Field(3, ge=2, description="items of an interest sequence")
    interest_support: int = Field(5, ge=2, description="users sharing an interest sequence (theta)")
    interest_prev: int = Field(3, ge=1, description="history items before the sequence")
    demo_groups: int = Field(10, ge=1, description="demographic groups")
    demo_min_users: int = Field(20, ge=1, description="fewest users of a demographic group")
    demo_top: int = Field(10, ge=1, description="top movies per demographic group")
    phrase_model: str | None = Field(None, description="write queries with this model and the Appendix H prompts")
    phrase_max_tokens: int = Field(200, ge=16, description="length of a written query")
    write_official: bool = Field(True, description="write built queries in the official layout to <run dir>/recbench_plus/")
    official_dir: str | None = Field(None, description="load the official files (ExplicitQuery.json, ...) found there")
    explicit_file: str | None = Field(None, description=f"load this {FILES['explicit']}")
    implicit_file: str | None = Field(None, description=f"load this {FILES['implicit']}")
    misinformed_file: str | None = Field(None, description=f"load this {FILES['misinformed']}")
    interest_file: str | None = Field(None, description=f"load this {FILES['interest']}")
    demographics_file: str | None = Field(None, description=f"load this {FILES['demographics']}")

    @field_validator("history", mode="before")
    @classmethod
    def _lower(cls, v):
        return v.lower() if isinstance(v, str) else v

    @field_validator("k", "phrase_model", mode="before")
    @classmethod
    def _none(cls, v):
        return None if v in _NONE else v

    @field_validator("mix")
    @classmethod
    def _mix(cls, v):
        mix_weights(v)
        return v

    @model_validator(mode="after")
    def _range(self):
        if self.max_gt < self.min_gt:
            raise OptionError("max_gt", f"must be >= min_gt ({self.min_gt})")
        return self


OPTIONS = dict.fromkeys(FILES, RecBenchPlusOptions)


def parse_options(opts: dict) -> Options:
    """The checked options of a build; a bad or unknown key is a ConfigError naming it."""
    o = check(RecBenchPlusOptions, opts, "recbench-plus")
    history = "without" if not o.behaviour else o.history  # `recharness build --no-history`
    return Options(
        history={"both": (True, False), "with": (True,), "without": (False,)}[history],
        mix=mix_weights(o.mix),
        **{f: getattr(o, f) for f in Options.__dataclass_fields__ if f not in ("history", "mix")},
    )
