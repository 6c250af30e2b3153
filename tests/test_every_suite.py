"""Every registered suite × task runs end to end (build → run → score → report) with the fake model.

Parametrised from the registry, so a suite is covered the day it registers:
its tasks are tried on the test datasets in turn and must build on at least one.
"""

from __future__ import annotations

import json

import pytest

from recharness.core.errors import ConfigError
from recharness.core.io import read_jsonl
from recharness.models.fake import FakeBackend
from recharness.runner import pipeline
from recharness.tasks.registry import suites

TEST_DATASETS = ("ml-1m", "amazon2023", "llmrank-games")


def _cases() -> list[tuple[str, str]]:
    out = []
    for name, s in suites().items():
        out += [(name, t) for t in s.tasks]
    return out


@pytest.fixture(scope="module")
def datasets(ml1m, amazon2023, llmrank_games):
    return TEST_DATASETS


@pytest.mark.parametrize("suite, task", _cases())
def test_suite_task_end_to_end_with_the_fake_model(suite, task, datasets, tmp_path):
    errors = {}
    for ds in datasets:
        run = tmp_path / ds
        try:
            info = pipeline.build(suite, ds, run, tasks=[task], seed=0, limit=3)
        except ConfigError as e:  # the task does not apply to this dataset (e.g. no review text)
            errors[ds] = str(e)
            continue
        if info["counts"][task]:
            break
        errors[ds] = "built no samples"
    else:
        pytest.fail(f"{suite}/{task} built on none of {datasets}: {errors}")
    n = info["counts"][task]
    path, stats = pipeline.run(run, FakeBackend("fake"), "fake", use_cache=False)
    assert stats.done == n and stats.complete and not stats.errors, stats
    recs = list(read_jsonl(path))
    assert sorted(r["id"] for r in recs) == sorted(r["id"] for r in read_jsonl(run / "samples.jsonl"))
    assert all(r["build"] == info["fingerprint"] and isinstance(r["valid"], bool) for r in recs)

    rows = pipeline.score(run, seed=0)
    mine = [r for r in rows if r.method == "fake" and r.task == task]
    assert len(mine) == 1 and mine[0].n == n and mine[0].metrics, rows
    assert all(isinstance(v, (int, float)) for v in mine[0].metrics.values())

    from recharness.report.html import write_report
    from recharness.report.tables import load_scores, write_scores

    write_scores(rows, run)
    html = write_report(load_scores(run), run).read_text(encoding="utf-8")
    assert "<table" in html and "fake" in html
    assert json.loads((run / "scores.json").read_text())
