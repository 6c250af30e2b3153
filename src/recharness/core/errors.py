"""Errors a user can act on: they name the file, line and field at fault.

The CLI prints these as one clean message instead of a traceback.
"""

from __future__ import annotations

import re
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


class NameTaken(ConfigError):
    """A method's answer file holds answers made another way (another model, settings, prompt): `what` says how,
    the message adds what `run` offers (another --name, --overwrite); `eval`, which has neither, says its own."""

    def __init__(self, what: str):
        self.what = what
        super().__init__(f"{what}. Give this run another --name to keep both, or --overwrite to replace those answers")


class AnswerError(RecharnessError):
    """An answer (imported, a reference model's, a parser's) not of its task's declared answer type."""


class SampleError(RecharnessError):
    """One sample cannot be answered (bad response, prompt too long, HTTP 4xx): recorded as invalid.

    `kind` is a short stable label counted in run summaries and tables.
    """

    def __init__(self, kind: str, message: str):
        self.kind = kind
        super().__init__(message)


class TransientError(RecharnessError):
    """Retries ran out on a failure that may pass (429, 5xx, timeout, reset): the sample stays undone."""

    def __init__(self, kind: str, message: str):
        self.kind = kind
        super().__init__(message)


class EndpointRefused(RecharnessError):
    """The endpoint refuses the request as configured (HTTP 401, 403, 404, 405, 501: a bad key, a wrong
    model name, an endpoint that is not there; a 400 or 422 saying the model is unknown; a server that
    answers without the log-probabilities asked for): every request would fail alike, so the run stops at
    once, commits nothing for it, and the CLI exits 2 naming the endpoint, the status and its message."""

    def __init__(self, message: str, status: int | None = None):
        self.status = status
        super().__init__(message)


class ServerUnreachable(RecharnessError):
    """The endpoint refused several connections in a row: stop the run instead of failing every sample."""


class BuildMismatch(RecharnessError):
    """Predictions made for another build of the run directory."""


class Unfinished(RecharnessError):
    """A run left samples unanswered (`exit_code` 3: transient errors outlived their retries, rerun to finish; 4:
    the server could not be reached): `eval` exits as `run` does, never with the usage error's 2."""

    def __init__(self, message: str, exit_code: int):
        self.exit_code = exit_code
        super().__init__(message)


#: a URL's user-info: everything from "://" to the last "@" that a host (name, IPv4 or [IPv6], optional port)
#: follows, so a password holding "/", "?" or "#" (which ends the authority for a URL parser) is hidden whole
_USERINFO = re.compile(r"(://)[^\s]*@(?=(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::\d+)?(?:[/?#\s\"'<>,;)]|$))")


def hide_userinfo(text: str) -> str:
    """`text` with the user:password part of every URL in it replaced by ***."""
    return _USERINFO.sub(r"\1***@", text)


def one_line(text: str, limit: int = 300) -> str:
    """Collapse a message to one line of bounded length, with credentials in URLs hidden."""
    text = hide_userinfo(" ".join(str(text).split()))
    return text if len(text) <= limit else text[: limit - 1] + "…"
