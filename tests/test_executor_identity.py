"""The executor owns the one-model rule: a log (predictions, a judge's verdicts, phrasings) another model
started is refused by `run_samples` itself, whoever calls it, before anything is asked or written."""

from __future__ import annotations

import pytest

from recharness.core.errors import ConfigError
from recharness.core.io import read_jsonl
from recharness.core.types import GenerationParams
from recharness.execution.executor import with_model
from recharness.execution.requests import TextRequest, answer_messages
from recharness.models.fake import FakeBackend

QUESTIONS = {f"q{i}": [{"role": "user", "content": f"question {i}"}] for i in range(3)}


def ask(backend, log, questions=QUESTIONS):
    request = TextRequest(GenerationParams(max_tokens=8))
    return with_model(backend, lambda m: answer_messages(m, questions, request, log), use_cache=False)


def test_a_log_resumes_with_its_own_model_and_refuses_another(tmp_path):
    log = tmp_path / "answers.jsonl"
    got, stats = ask(FakeBackend("a"), log, dict(list(QUESTIONS.items())[:2]))
    assert set(got) == {"q0", "q1"} and stats.done == 2
    got, stats = ask(FakeBackend("a"), log)  # the same model: only the new question is asked
    assert set(got) == set(QUESTIONS) and stats.skipped == 2 and stats.done == 1
    before = log.read_bytes()
    with pytest.raises(ConfigError, match=r"holds the answers of another model .*\"model\": \"a\".*\"model\": \"b\""):
        ask(FakeBackend("b"), log, {**QUESTIONS, "q9": [{"role": "user", "content": "new"}]})
    assert log.read_bytes() == before  # nothing asked, nothing written
    assert [r["model"]["model"] for r in read_jsonl(log)] == ["a", "a", "a"]


def test_a_log_that_is_not_ours_or_nests_too_deep_is_a_clear_input_error(tmp_path):
    from recharness.core.errors import InputError

    foreign = tmp_path / "foreign.jsonl"
    foreign.write_text('{"id": "q0", "model": "gpt-4"}\n')  # "model" as a string, not our identity object
    with pytest.raises(InputError, match=r'foreign.jsonl.*"model" is not an object'):
        ask(FakeBackend("a"), foreign)
    deep = tmp_path / "deep.jsonl"
    deep.write_text("[" * 200_000 + "\n")  # before: RecursionError, a traceback
    with pytest.raises(InputError, match=r"deep.jsonl.*line 1.*nested too deeply"):
        list(read_jsonl(deep))
