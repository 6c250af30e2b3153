"""One small registry for everything looked up by name: suites, tasks, backends, datasets, metrics, baselines.

Entries are objects, or lazy "package.module:Object" strings imported on first
use (so listing names never imports torch or llama.cpp). An unknown name is a
ConfigError that lists the known ones and suggests the nearest.

    BACKENDS = Registry("model backend")
    BACKENDS.add("llamacpp", "recharness.models.llamacpp:LlamaCppBackend")

    @METRICS.register("auc", higher_is_better=True)
    def auc(...): ...
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from recharness.core.errors import ConfigError

T = TypeVar("T")


def load_target(target: str) -> Any:
    """Import "package.module:attr.path"."""
    module, _, attr = target.partition(":")
    obj = importlib.import_module(module)
    for part in filter(None, attr.split(".")):
        obj = getattr(obj, part)
    return obj


def did_you_mean(name: str, known) -> str:
    """' (did you mean 'x'?)' for the nearest known name, else ''; shared by every "unknown ..." message."""
    close = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


class Registry(Generic[T]):
    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, Any] = {}
        self._meta: dict[str, dict] = {}

    def add(self, name: str, obj: T | str, **meta) -> None:
        if name in self._entries and self._entries[name] is not obj:
            raise ValueError(f"{self.kind} {name!r} is registered twice")
        self._entries[name] = obj
        self._meta[name] = meta

    def remove(self, name: str) -> None:
        """Forget `name` (a plug-in registered for a while, e.g. a test's toy suite)."""
        self._entries.pop(name, None)
        self._meta.pop(name, None)

    def register(self, name: str, **meta) -> Callable[[T], T]:
        """Decorator form of `add`."""
        def deco(obj: T) -> T:
            self.add(name, obj, **meta)
            return obj
        return deco

    def get(self, name: str) -> T:
        if name not in self._entries:
            raise ConfigError(self.unknown(name))
        obj = self._entries[name]
        if isinstance(obj, str):
            obj = load_target(obj)
            self._entries[name] = obj
        return obj

    def meta(self, name: str) -> dict:
        """The keyword metadata given at registration; never imports a lazy entry."""
        if name not in self._entries:
            raise ConfigError(self.unknown(name))
        return self._meta[name]

    def unknown(self, name: str) -> str:
        known = ", ".join(sorted(self._entries)) or "none"
        return f"unknown {self.kind} {name!r}{did_you_mean(name, self._entries)}; known: {known}"

    def items(self) -> Iterator[tuple[str, T]]:
        """(name, object) in registration order; imports lazy entries."""
        return ((name, self.get(name)) for name in list(self._entries))

    def names(self) -> list[str]:
        return list(self._entries)

    def __contains__(self, name: str) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)
