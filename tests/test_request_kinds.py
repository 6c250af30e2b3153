"""Baselines answer request kinds, not task names: a task asks them (`Task.reference_answers`), the
list-wise and click tasks in one batched call (`target_ranks`, `p_clicks`), so trained models keep
their batched speed; and no module of baselines/ reads a sample's task."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from recharness.baselines.base import Baseline, Ranker
from recharness.tasks.recbench.ctr import CtrTask
from recharness.tasks.recbench.seqrec import SeqrecTask

BASELINES_DIR = Path(__file__).resolve().parents[1] / "src" / "recharness" / "baselines"


class Counting(Baseline):
    name = "counting"

    def __init__(self):
        self.calls: list[tuple[str, int]] = []

    def fit(self, train):
        return self

    def target_ranks(self, queries):
        self.calls.append(("target_ranks", len(queries)))
        return [{"rank": len(h) + 1} for _, h, _ in queries]

    def p_clicks(self, samples):
        self.calls.append(("p_clicks", len(samples)))
        return [0.25] * len(samples)


class Listed(Ranker):
    name = "listed"
    order = ["a", "b", "c", "d"]

    def fit(self, train):
        return self

    def top_k(self, k, exclude=frozenset(), *, user=None, history=()):
        return [i for i in self.order if i not in exclude][:k]

    def rank(self, candidates, *, user=None, history=()):
        return sorted(candidates, key=self.order.index)


SEQ = [{"id": f"s{k}", "task": "seqrec", "user_id": str(k), "history": ["a"] * k, "target": "c"} for k in range(5)]
CTR = [{"id": f"c{k}", "task": "ctr", "user_id": str(k), "item_id": "a", "history": []} for k in range(7)]


def test_list_wise_and_click_tasks_ask_one_batch():
    b = Counting()
    recs = b.predict(SEQ, SeqrecTask())
    assert b.calls == [("target_ranks", 5)]
    assert [recs[s["id"]]["parsed"] for s in SEQ] == [{"rank": k + 1} for k in range(5)]
    recs = b.predict(CTR, CtrTask())
    assert b.calls[-1] == ("p_clicks", 7) and {r["parsed"]["p_yes"] for r in recs.values()} == {0.25}


def test_a_ranker_answers_the_batched_kinds_one_query_at_a_time():
    r = Listed()
    recs = r.predict([{"id": "x", "task": "seqrec", "history": ["a", "b"], "target": "d"}], SeqrecTask())
    assert recs["x"]["parsed"] == {"rank": 2, "top": ["c", "d"]}  # d after c, history removed; its top-10 list
    with pytest.raises(ValueError, match="does not answer click requests"):
        r.predict(CTR[:1], CtrTask())


def test_a_baseline_refuses_a_kind_it_does_not_answer_and_needs_the_task():
    with pytest.raises(ValueError, match="does not answer target-rank requests"):
        Baseline.target_ranks(Counting.__new__(Counting), [("a", [], None)])
    with pytest.raises(ValueError, match="does not answer ranking requests"):
        Counting().rank(["a", "b"])
    with pytest.raises(ValueError, match="through their task"):
        Counting().predict(SEQ)


def task_reads(path: Path) -> list[int]:
    """Lines where a module reads a sample's task: `s["task"]`, `s.get("task")`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant) and n.slice.value == "task":
            out.append(n.lineno)
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "get" and n.args \
                and isinstance(n.args[0], ast.Constant) and n.args[0].value == "task":
            out.append(n.lineno)
    return out


def test_no_baseline_reads_a_samples_task(tmp_path):
    planted = tmp_path / "m.py"
    planted.write_text('if s.get("task") != "seqrec" or s["task"] == "ctr":\n    pass\n')
    assert task_reads(planted) == [1, 1]
    found = {str(f.relative_to(BASELINES_DIR)): lines for f in sorted(BASELINES_DIR.rglob("*.py"))
             if (lines := task_reads(f))}
    assert not found, f"baselines reading a sample's task (answer request kinds instead): {found}"
