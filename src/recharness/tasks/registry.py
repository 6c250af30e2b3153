"""Suites by name: a new suite is one folder under tasks/ that registers itself.

A suite is a `Suite` record in `SUITES` (the generic Registry), so the CLI and
the runner ask it what it can do (`suite.judge`, `suite.paper_tables`) instead
of testing suite names.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from recharness.core.errors import ConfigError
from recharness.core.registry import Registry, did_you_mean, load_target


@dataclass(frozen=True)
class DemoRun:
    """One run of `recharness demo`: a run directory `label` of this suite's `tasks` on `limit` users
    (queries, groups) per task, built with `options` (--option KEY=VALUE); `order` places it among all."""

    label: str
    tasks: tuple[str, ...]
    limit: int
    options: tuple[str, ...] = ()
    order: int = 0


@dataclass(frozen=True, eq=False)
class Suite:
    name: str
    description: str
    tasks: dict[str, type]  # task name -> Task subclass, in listing order
    default_tasks: list[str]
    #: `paper_tables(rows) -> Markdown`: the results in the paper's table layout (None: none)
    paper_tables: Callable | None = None
    #: `context(dataset, BuildConfig) -> object`: per-build state shared by the suite's tasks (None: none)
    context: Callable | None = None
    #: `judge(run_dir, backend, judge_slug, **kw) -> files`, or its lazy "module:function" (None: nothing to judge)
    judge: Callable | str | None = field(default=None, repr=False)
    #: {task: pydantic options model}, or its lazy "module:OPTIONS" (None: only the common prompt switches)
    options: dict | str | None = field(default=None, repr=False)
    #: the runs `recharness demo` makes of this suite
    demo: tuple[DemoRun, ...] = ()
    #: `import_files(run_dir, source, name) -> (predictions path, problems)`: `score --predictions` of the
    #: suite's released layout (a folder, or .json files), or its lazy "module:function" (None: JSONL/CSV only)
    import_files: Callable | str | None = field(default=None, repr=False)
    #: {task: lazy "module:function"} building fine-tuning examples (`recharness finetune`), see finetune.recipes
    finetune: dict | str | None = field(default=None, repr=False)

    @property
    def capabilities(self) -> frozenset[str]:
        """The optional hooks this suite provides, e.g. {"judge", "paper_tables"}."""
        return frozenset(k for k in ("paper_tables", "context", "judge", "options", "import_files", "finetune")
                         if getattr(self, k))

    def supports(self, capability: str) -> bool:
        return capability in self.capabilities

    def hook(self, capability: str) -> Callable:
        """The hook itself (lazy targets imported now); ConfigError if the suite has none."""
        fn = getattr(self, capability, None) if capability in self.capabilities else None
        if fn is None:
            have = ", ".join(sorted(self.capabilities)) or "none"
            raise ConfigError(f"suite {self.name!r} does not support {capability} (it supports: {have})")
        return load_target(fn) if isinstance(fn, str) else fn


SUITES: Registry[Suite] = Registry("suite")


def _suite_packages() -> list[str]:
    """Every sub-package of recharness.tasks is a suite that registers itself on import."""
    import pkgutil

    import recharness.tasks as pkg

    return [f"recharness.tasks.{m.name}" for m in pkgutil.iter_modules(pkg.__path__) if m.ispkg]


def register_suite(name: str, tasks: dict, description: str, default_tasks: list[str] | None = None,
                   paper_tables: Callable | None = None, context: Callable | None = None,
                   judge: Callable | str | None = None, options: dict | str | None = None,
                   demo: tuple[DemoRun, ...] | list[DemoRun] = (), import_files: Callable | str | None = None,
                   finetune: dict | str | None = None) -> Suite:
    """Register a suite (see `Suite` for the optional hooks); returns its record."""
    suite = Suite(name, description, dict(tasks), list(default_tasks or tasks), paper_tables, context, judge, options,
                  tuple(demo), import_files, finetune)
    SUITES.add(name, suite)
    return suite


def load_suites() -> None:
    """Import every suite, so what they register (tasks, metrics, baselines) is known; cheap after the first call."""
    for mod in _suite_packages():
        importlib.import_module(mod)


def suites() -> dict[str, Suite]:
    load_suites()
    return dict(SUITES.items())


def get_suite(name: str) -> Suite:
    load_suites()
    return SUITES.get(name)


def get_task(suite: str, task: str) -> Any:
    """A new instance of one task of `suite`."""
    s = get_suite(suite)
    if task not in s.tasks:
        raise unknown_task(suite, task, s.tasks)
    return s.tasks[task]()


def unknown_task(suite: str, task: str, known) -> ConfigError:
    """The one wording for a task name the suite does not have."""
    return ConfigError(f"suite {suite!r} has no task {task!r}{did_you_mean(task, known)}; it has: {', '.join(known)}")


def suite_context(suite: str, dataset, options: dict | None, *, seed: int = 0, limit: int | None = None):
    """The suite's per-build context (built once, shared by its tasks), or None if the suite has none."""
    from recharness.core.types import BuildConfig

    factory = get_suite(suite).context
    if factory is None:
        return None
    return factory(dataset, BuildConfig(seed=seed, limit=limit, options=dict(options or {})))
