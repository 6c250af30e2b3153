"""Duplicate titles (ML-100k after `prepare`: "Chasing Amy (1997)" is item 246 and item 268): a title names
every id that carries it, so a hit on any of them counts, once, in recbench seqrec and RecBench+ alike."""

from __future__ import annotations

import math

import pytest

from recharness.matching import CatalogMatcher
from recharness.matching.twins import with_twins

ML100K_LIKE = [("6", "Heat (1995)"), ("246", "Chasing Amy (1997)"), ("268", "Chasing Amy (1997)"),
               ("300", "Fargo (1996)"), ("670", "Body Snatchers (1993)"), ("573", "Body Snatchers (1993)")]


@pytest.fixture()
def ctx():
    from recharness.tasks.llmrec.common import CatalogContext

    return CatalogContext(CatalogMatcher(ML100K_LIKE))


def test_with_twins_replaces_once():
    twins = {"246": ["246", "268"]}
    assert with_twins(["6", "246"], twins, {"268"}) == ["6", "268"]
    assert with_twins(["6", "246"], twins, {"246"}) == ["6", "246"]  # the named id itself is wanted
    assert with_twins(["246", None], twins, {"300"}) == ["246", None]  # no twin wanted: unchanged
    assert with_twins(["6"], None, {"268"}) == ["6"]


@pytest.mark.parametrize("target, history, rank", [
    ("268", [], 2.0),  # the second id of the title: a hit at the title's place
    ("246", [], 2.0),
    ("268", ["246"], 2.0),  # the user saw the twin: the title still names the target
    ("573", [], 3.0),
    ("300", [], math.inf),
])
def test_recbench_seqrec_hits_any_twin_once(ctx, target, history, rank):
    from recharness.tasks.recbench.seqrec import SeqrecTask, sample_rank

    task = SeqrecTask()
    task.ctx = ctx
    sample = {"id": "s", "task": "seqrec", "user_id": "u", "target": target, "history": history}
    p = task.parse(sample, "1. Heat (1995)\n2. Chasing Amy (1997)\n3. Body Snatchers (1993)\n4. Chasing Amy (1997)")
    assert p.valid and p.value["items"][:3] == ["6", "246", "670"]
    assert sample_rank(sample, {"parsed": p.value}) == rank
    m = task.score([sample], {"s": {"parsed": p.value, "valid": True}})
    assert m["HR@10"] == (1.0 if rank <= 10 else 0.0) and m["MRR"] == (1 / rank if rank <= 10 else 0.0)


def test_recbench_plus_hits_any_twin_once():
    from recharness.tasks.recbench_plus.evaluate import query_metrics, resolve_answer

    matcher = CatalogMatcher(ML100K_LIKE)
    parsed = resolve_answer("1. Heat (1995)\n2. Chasing Amy (1997)\n3. Chasing Amy (1997)", matcher)
    assert parsed["item_ids"] == ["6", "246"] and parsed["twins"] == {"246": ["246", "268"]}
    samples = [{"id": "a", "gt": ["268", "6"]}, {"id": "b", "gt": ["246", "268"]}, {"id": "c", "gt": ["300"]}]
    rows = query_metrics(samples, {s["id"]: {"parsed": parsed, "valid": True} for s in samples})
    assert (rows[0]["P"], rows[0]["R"]) == (1.0, 1.0)  # 268 is hit by the title
    assert (rows[1]["P"], rows[1]["R"]) == (0.5, 0.5)  # one title, one hit: never both twins
    assert (rows[2]["P"], rows[2]["R"]) == (0.0, 0.0)


def test_the_title_twins_the_readme_counts(llmrank_games, ml1m):
    """README: the matcher reads 383 titles of LLMRank's Games as carried by several items, none of ML-1M's."""
    def twin_titles(ds) -> int:
        items = list(zip(ds.items["item_id"].to_list(), ds.items["title"].to_list()))
        m = CatalogMatcher(items)
        return len({frozenset([i, *m.twins(i)]) for i, _ in items if m.twins(i)})

    assert twin_titles(llmrank_games) == 383 and twin_titles(ml1m) == 0
