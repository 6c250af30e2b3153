"""The suite's --option keys (the three tasks share them): checked here,
turned into SuiteOptions by build.parse_options."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import AliasChoices, Field, field_validator, model_validator

from recharness.tasks.options import OptionError, TaskOptions
from recharness.tasks.perrecbench.groups import LEVELS


class PerRecBenchOptions(TaskOptions):
    suite: ClassVar[str] = "perrecbench"
    droppable: ClassVar[tuple[str, ...]] = ("behaviour",)  # --no-history: no retrieved items (k=0)

    groups: int = Field(200, ge=0, description="groups per level (--limit overrides)")
    levels: str = Field(",".join(LEVELS), description="levels to build, comma-separated")
    gamma: int = Field(20, ge=0, description="users need more than gamma earlier ratings")
    lam: float = Field(0.6, ge=0, validation_alias=AliasChoices("lambda", "lam"),
                       description="members' relative ratings differ by more than lambda pairwise")
    window_days: float = Field(7.0, ge=0, description="members rated the item within this many days")
    items: Literal["distinct", "shared"] = Field(
        "distinct", description="distinct: each level on its own query items; shared: every level on the same items, "
        "its members a subset of one group of the largest level's size (the authors' released outputs): a level "
        "difference is then group size alone")
    mean_over: Literal["history", "all"] = Field("history", description="user mean rating over earlier or all ratings (all: the prompt's average and most common rating then include the query's own rating and later ones, a leak kept only to match other code)")
    tries: int = Field(20, ge=1, description="window anchors tried per item")
    heldout: int | None = Field(None, ge=0, description="groups per level kept for few-shot examples; none: 50 when shots>0, else 0")
    k: int = Field(4, ge=0, description="retrieved history items shown per user")
    bm25: Literal["catalog", "user"] = Field("catalog", description="BM25 over the whole catalog or the user's items")
    profile: bool = Field(True, description="LLM-written user profiles")
    profile_items: int = Field(20, ge=1, description="recent items a profile is written from")
    profiles: str | None = Field(None, description="JSON file {user_id: profile text} instead of writing them")
    shots: int = Field(0, ge=0, description="few-shot examples per prompt")
    cot: bool = Field(False, description="chain-of-thought prompts")
    sc: int = Field(1, ge=1, description="self-consistency samples")
    sc_temperature: float = Field(0.7, ge=0, allow_inf_nan=False, description="temperature of self-consistency samples")
    temperature: float = Field(0.0, ge=0, allow_inf_nan=False, description="sampling temperature (the paper used 0.1)")
    max_retries: int = Field(1, ge=0, description="re-asks after an unparseable answer")
    max_tokens: int | None = Field(None, ge=1, description="answer length; none: per method")
    compat: Literal["perrecbench"] | None = Field(None, description="perrecbench: headline tau as the original code computes it")
    invalid: Literal["zero", "drop"] = Field("zero", description="unparseable answers score tau 0, or are dropped")
    labels: str | None = Field(None, description="groups from original label files (a folder or one file)")
    predictions: str | None = Field(None, description="folder of released <mode>-<level>.json prediction files to import")
    predictions_name: str = Field("imported", description="name of the imported predictions")
    orders: int = Field(1, ge=1, le=50, description="list: show each group under this many seeded orders of its "
                        "users (the most-liked user's position balanced): tau's spread across orders, position bias "
                        "and a Borda-aggregated row; the group's orders are one unit of resampling")

    @field_validator("levels")
    @classmethod
    def _levels(cls, v: str) -> str:
        bad = [lv for lv in (x.strip() for x in v.split(",")) if lv and lv not in LEVELS]
        if bad:
            raise ValueError(f"unknown level(s) {bad}; levels are {list(LEVELS)}")
        return v

    @field_validator("compat", mode="before")
    @classmethod
    def _compat(cls, v):
        return None if v in (None, "", "none", False) else v

    @model_validator(mode="after")
    def _items_are_selected(self):
        if self.items == "shared" and self.labels:
            raise OptionError("items", "labels= reads the groups of the given label files: items=shared chooses how "
                              "this build selects its own; give one of them")
        return self

    @model_validator(mode="after")
    def _shots_need_heldout(self):
        if self.shots and self.heldout == 0:
            raise OptionError("heldout", "few-shot prompts need held-out groups: set heldout > 0")
        return self


OPTIONS = {"point": PerRecBenchOptions, "pair": PerRecBenchOptions, "list": PerRecBenchOptions}
