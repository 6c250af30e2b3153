"""Suites by name: a new suite is one folder under tasks/ that registers itself."""

from __future__ import annotations

import importlib

from recharness.errors import ConfigError

_SUITES: dict[str, dict] = {}

def _suite_packages() -> list[str]:
    """Every sub-package of recharness.tasks is a suite that registers itself on import."""
    import pkgutil

    import recharness.tasks as pkg

    return [f"recharness.tasks.{m.name}" for m in pkgutil.iter_modules(pkg.__path__) if m.ispkg]


def register_suite(name: str, tasks: dict, description: str, default_tasks: list[str] | None = None,
                   paper_tables=None) -> None:
    """`paper_tables(rows) -> Markdown`: the suite's results in its paper's table layout (optional)."""
    _SUITES[name] = {"tasks": tasks, "description": description, "default_tasks": default_tasks or list(tasks),
                     "paper_tables": paper_tables}


def _load() -> None:
    for mod in _suite_packages():
        importlib.import_module(mod)


def suites() -> dict[str, dict]:
    _load()
    return dict(_SUITES)


def get_suite(name: str) -> dict:
    _load()
    if name not in _SUITES:
        raise ConfigError(f"unknown suite {name!r}; known: {', '.join(sorted(_SUITES))}")
    return _SUITES[name]


def get_task(suite: str, task: str):
    s = get_suite(suite)
    if task not in s["tasks"]:
        raise ConfigError(f"suite {suite!r} has no task {task!r}; it has: {', '.join(s['tasks'])}")
    return s["tasks"][task]()
