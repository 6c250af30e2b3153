"""A latency timed over HTTP with several requests in flight holds the server's queue: each answer records the
concurrency it was asked at, the row says it (`latency_concurrency`), and RecBench's tables mark it beside the
latency, where a conventional model's is single calls in series."""

from __future__ import annotations

from recharness.core.io import read_jsonl
from recharness.core.types import ScoreRow
from recharness.runner.pipeline import _latency_summary
from recharness.tasks.recbench.tables import LOAD_NOTE, table5
from recharness.testing.fake_server import FakeServerProcess
from tests.test_faults import run, samples_for


def test_each_answer_records_the_concurrency_it_was_timed_at(tmp_path):
    with FakeServerProcess() as srv:
        run(samples_for([], n_ok=6), srv.base_url, tmp_path / "c4.jsonl", concurrency=4)
        run(samples_for([], n_ok=3), srv.base_url, tmp_path / "c1.jsonl", concurrency=1)
    c4, c1 = list(read_jsonl(tmp_path / "c4.jsonl")), list(read_jsonl(tmp_path / "c1.jsonl"))
    assert {r["concurrency"] for r in c4} == {4} and {r["concurrency"] for r in c1} == {1}
    assert _latency_summary(c4)["latency_concurrency"] == 4.0
    assert "latency_concurrency" not in _latency_summary(c1)
    # a cached answer keeps the latency it was first timed with, of unknown load: it records none
    assert "latency_concurrency" not in _latency_summary([{**r, "cached": True} for r in c4])


def test_recbench_table_marks_a_latency_timed_under_load():
    def row(method, kind, lat, load=None):
        m = {"NDCG@10": 0.1, "latency_s": lat, **({"latency_concurrency": load} if load else {})}
        return ScoreRow(method, "seqrec", m, 10, kind=kind)

    md = table5({"ml-1m": [row("llm", "model", 0.5, 8.0), row("sasrec", "reference", 0.0004)]})
    llm = next(x for x in md.splitlines() if x.startswith("| llm"))
    ref = next(x for x in md.splitlines() if x.startswith("| SASRec"))
    assert "500.00ms (8 in flight)" in llm and "in flight" not in ref and LOAD_NOTE in md
    assert LOAD_NOTE not in table5({"ml-1m": [row("llm", "model", 0.5, None)]})
