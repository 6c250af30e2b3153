"""Questions that are not a task's samples (an LLM judge's verdicts, RecBench+ query phrasing) asked
through the same executor as a run: `run_samples` with a log of its own, so they are bounded in
concurrency, cached, retried, resumable after a kill and written exactly once, as answers are.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

from recharness.core.io import read_jsonl
from recharness.core.types import GenerationParams, Messages, Parsed
from recharness.execution.executor import CachedModel, RunStats, run_samples


class TextRequest:
    """The task-like request kind for a chat question: generate with `params`, parse with `parse`
    (default: any text is the answer), re-ask once with `reminder` after an unparseable answer."""

    request = "generate"

    def __init__(self, params: GenerationParams, parse: Callable[[str], Parsed] | None = None,
                 reminder: str | None = None):
        self.params = params
        self._parse = parse
        self.format_reminder = reminder

    def generation_params(self, sample: dict) -> GenerationParams:
        return self.params

    def parse(self, sample: dict, text: str) -> Parsed:
        return self._parse(text) if self._parse is not None else Parsed(text)


async def answer_messages(model: CachedModel, questions: dict[str, Messages], request: TextRequest, log: Path | None,
                          *, max_retries: int = 1, build: str | None = None,
                          fresh: set[str] | None = None) -> tuple[dict[str, dict], RunStats]:
    """{question id: answer record} for `questions` ({id: chat messages}), through `run_samples`.

    `log`: the answers' file (JSONL, one record per question, resumed when it exists; `build`
    stamps and checks its records like a predictions file's). None: a temporary file (nothing
    to resume). A question left unanswered (retries ran out) is absent from the result. `fresh`: ids asked
    past the response cache (`CachedModel.asking_again`)."""
    samples = [{"id": qid, "task": "question", "messages": m} for qid, m in questions.items()]

    async def go(path: Path) -> tuple[dict[str, dict], RunStats]:
        stats = await run_samples(samples, {"question": request}, model, path, max_retries=max_retries,
                                  build=build, fsync=False, fresh=fresh)
        got = {r["id"]: r for r in read_jsonl(path, tolerate_torn_tail=True)} if path.exists() else {}
        return {q: got[q] for q in questions if q in got}, stats

    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        return await go(log)
    with tempfile.TemporaryDirectory(prefix="recharness-questions-") as tmp:
        return await go(Path(tmp) / "answers.jsonl")
