"""The one look of a progress bar on stderr: description, bar, done/total, elapsed, time left.

Every long stage (run, train, embeddings, fine-tuning) shows the same columns, so a user reads them once.
"""

from __future__ import annotations

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


def stage_progress(console: Console | None = None, *extra: ProgressColumn, transient: bool = False) -> Progress:
    """A rich Progress with the standard columns; `extra` columns (e.g. a loss) go before the times."""
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), *extra,
                    TimeElapsedColumn(), TimeRemainingColumn(), console=console or Console(stderr=True),
                    transient=transient)
