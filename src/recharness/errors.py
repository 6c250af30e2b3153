"""Errors a user can act on: they name the file, line and field at fault.

The CLI prints these as one clean message instead of a traceback.
"""

from __future__ import annotations

from pathlib import Path


class RecharnessError(Exception):
    """Base class for errors the CLI reports without a traceback."""


class InputError(RecharnessError):
    """A bad input file: names the file, the 1-based line and the field at fault."""

    def __init__(self, path: str | Path, message: str, line: int | None = None, field: str | None = None):
        self.path = str(path)
        self.line = line
        self.field = field
        self.message = message
        where = self.path
        if line is not None:
            where += f", line {line}"
        if field is not None:
            where += f", field {field!r}"
        super().__init__(f"{where}: {message}")


class ConfigError(RecharnessError):
    """A bad option or model spec given by the user."""
