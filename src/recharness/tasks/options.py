"""`--option KEY=VALUE`: one pydantic model per task, so a typo or a bad value
is one clear line naming the option instead of being silently ignored.

Each suite's `options` module maps its tasks to models (`OPTIONS`), named by
its `register_suite(..., options="module:OPTIONS")`. The models
only check: `validate_options` hands back the user's own keys, coerced, so
task code that reads `opts.get(key, default)` behaves as before.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal, get_args

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from recharness.core.errors import ConfigError
from recharness.core.registry import did_you_mean
from recharness.tasks.registry import get_suite, unknown_task

PROMPT_PARTS = ("behaviour", "task_description", "format_indicator")


class OptionError(ValueError):
    """Raised by a model's own checks to blame one option (pydantic would blame none)."""

    def __init__(self, key: str, message: str):
        self.key = key
        super().__init__(message)


class TaskOptions(BaseModel):
    """Options every task accepts: the CLI's --no-history / --no-description /
    --no-format switches arrive as these three keys, whatever the suite."""

    model_config = ConfigDict(extra="forbid", coerce_numbers_to_str=True, frozen=True)
    #: the prompt parts this suite can drop; asking to drop another is an error, not a no-op
    droppable: ClassVar[tuple[str, ...]] = PROMPT_PARTS
    suite: ClassVar[str] = ""

    behaviour: bool = Field(True, description="show the user's history in the prompt (--no-history sets false)")
    task_description: bool = Field(True, description="keep the task-description part (--no-description sets false)")
    format_indicator: bool = Field(True, description="keep the format-indicator part (--no-format sets false)")

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_numbers(cls, v, info):
        """pydantic reads true as 1; `history_len=true` is a mistake, not 1."""
        kinds = get_args(cls.model_fields[info.field_name].annotation) or (cls.model_fields[info.field_name].annotation,)
        if isinstance(v, bool) and bool not in kinds and (int in kinds or float in kinds):
            raise ValueError("expected a number, not true/false")
        return v

    @model_validator(mode="after")
    def _parts_exist(self):
        for part in PROMPT_PARTS:
            if part not in self.droppable and not getattr(self, part):
                raise OptionError(part, f"{self.suite or 'these'} prompts have no separate {part} part to drop")
        return self


#: the splits of a task's interactions into training and test (`data.leave_last_out`, `data.temporal_split`)
SPLITS = ("leave_last_out", "global_time")
#: split=global_time's cut when none is given: the time of the interaction at this quantile of all of them
DEFAULT_CUT = 0.9


class TemporalSplitOptions(TaskOptions):
    """`split` and `cut`, one definition for every task that holds test interactions out (LLMRec
    sequential and direct, RecBench ctr and seqrec): leave-last-out per user, the papers' protocol,
    lets training see interactions stamped after a test target; a global cut time does not."""

    #: what leave_last_out holds out in this task, for the message that refuses a cut without global_time
    held_out: ClassVar[str] = "each user's last item"
    #: `split`'s help in this task's words (`option_table`), where the shared description is too general
    split_help: ClassVar[str | None] = None

    split: Literal[SPLITS] = Field(
        "leave_last_out", description="which interaction is each user's test target: their last (leave-last-out, "
        "the paper's) or their first after one cut time for all users (global_time: references learn from "
        "everything before the cut)")
    cut: float | None = Field(None, gt=0, lt=1, description="split=global_time: the cut is the time of the "
                              f"interaction at this quantile of all interactions' times; none: {DEFAULT_CUT}")

    @model_validator(mode="after")
    def _cut_needs_global_time(self):
        if self.cut is not None and self.split != "global_time":
            raise OptionError("cut", f"a cut time applies to split=global_time only (split=leave_last_out holds out "
                                     f"{self.held_out}): add --option split=global_time")
        return self

    @property
    def cut_quantile(self) -> float:
        """The cut quantile in force: the option, else `DEFAULT_CUT`."""
        return DEFAULT_CUT if self.cut is None else self.cut


def option_keys(model: type[BaseModel]) -> dict[str, str]:
    """Accepted --option key -> field name (a field may take aliases, e.g. `lambda`)."""
    keys: dict[str, str] = {}
    for name, f in model.model_fields.items():
        va = f.validation_alias
        names = [c for c in va.choices if isinstance(c, str)] if isinstance(va, AliasChoices) else [va or name]
        keys.update(dict.fromkeys(names, name))
    return keys


def _wording(err: dict) -> str:
    ctx = {k: int(v) if isinstance(v, float) and v.is_integer() else v for k, v in (err.get("ctx") or {}).items()}
    kind = err["type"]
    if kind == "value_error":
        return str(ctx.get("error", err["msg"]))
    for prefix, text in (("greater_than_equal", "must be >= {ge}"), ("greater_than", "must be > {gt}"),
                         ("less_than_equal", "must be <= {le}"), ("less_than", "must be < {lt}"),
                         ("int_", "expected an integer"), ("float_", "expected a number"),
                         ("bool_", "expected true or false"), ("string_", "expected text"),
                         ("literal_error", "expected {expected}")):
        if kind.startswith(prefix):
            return text.format(**ctx)
    return err["msg"]


def _unknown(keys: list[str], known: list[str], where: str) -> ConfigError:
    hint = did_you_mean(keys[0], known)
    names = ", ".join(repr(k) for k in keys)
    return ConfigError(f"unknown --option {names} for {where}{hint}; known: {', '.join(sorted(known))}")


def check(model: type[TaskOptions], options: dict[str, Any], where: str) -> TaskOptions:
    """Validate `options` against one model; any problem is one ConfigError line ending in `(where)`."""
    keys = option_keys(model)
    extra = [k for k in options if k not in keys]
    if extra:
        raise _unknown(extra, list(keys), where)
    try:
        return model.model_validate(options)
    except ValidationError as e:
        err = e.errors()[0]
        blamed = (err.get("ctx") or {}).get("error")
        key = blamed.key if isinstance(blamed, OptionError) else str(err["loc"][0]) if err["loc"] else None
        what = f"--option {key}={options[key]}" if key in options else f"--option {key}" if key else "--option"
        raise ConfigError(f"{what}: {_wording(err)} ({where})") from None


def suite_models(suite: str) -> dict[str, type[TaskOptions]]:
    """{task: options model}; a registered suite without an options module takes only the prompt switches."""
    s = get_suite(suite)  # raises for an unknown suite
    return s.hook("options") if s.supports("options") else dict.fromkeys(s.tasks, TaskOptions)


def validate_options(suite: str, tasks: list[str] | None, options: dict[str, Any] | None) -> dict[str, Any]:
    """Check the raw `--option` dict for the given tasks of `suite` (None: the
    suite's default tasks). A key must belong to at least one of the tasks and
    passes every task that has it. Returns the user's keys with coerced values."""
    models = suite_models(suite)
    if not tasks:
        tasks = get_suite(suite).default_tasks
    tasks = list(dict.fromkeys(tasks))
    bad = [t for t in tasks if t not in models]
    if bad:
        raise unknown_task(suite, bad[0], models)
    options = dict(options or {})
    keys = {t: option_keys(models[t]) for t in tasks}
    known = sorted({k for ks in keys.values() for k in ks})
    extra = [k for k in options if k not in known]
    if extra:
        raise _unknown(extra, known, f"{suite} (tasks: {', '.join(tasks)})")
    one_model = len(set(models.values())) == 1  # then errors name the suite, not a task
    out: dict[str, Any] = {}
    for t in tasks:
        mine = {k: v for k, v in options.items() if k in keys[t]}
        obj = check(models[t], mine, suite if one_model else f"{suite}/{t}")
        for k in mine:
            out.setdefault(k, getattr(obj, keys[t][k]))
    return {k: out[k] for k in options}


def option_table(suite: str, task: str) -> list[tuple[str, str, str]]:
    """(key, default as typed on the command line, help) for one task's options, in declaration order, the
    split options (`TemporalSplitOptions`) last."""
    models = suite_models(suite)
    if task not in models:
        raise unknown_task(suite, task, models)
    model = models[task]
    out: list[tuple[str, str, str]] = []
    listed: set[str] = set()
    shared = set(TemporalSplitOptions.model_fields) - set(TaskOptions.model_fields)
    # the task's own options first, then the split's (shared by every task that holds interactions out)
    for key, name in sorted(option_keys(model).items(), key=lambda kv: kv[1] in shared):
        if name in listed or (name in PROMPT_PARTS and name not in model.droppable):
            continue  # an alias of a key already listed, or a part the suite cannot drop
        listed.add(name)
        f = model.model_fields[name]
        default = f.default
        shown = "none" if default is None else str(default).lower() if isinstance(default, bool) else str(default)
        text = (getattr(model, "split_help", None) if name == "split" else None) or f.description or ""
        out.append((key, shown, text))
    return out


def known_options(suite: str, task: str) -> dict[str, str]:
    """{key: help text with the default} for one task, for --help and the docs."""
    return {key: f"{text} (default: {default})" for key, default, text in option_table(suite, task)}
