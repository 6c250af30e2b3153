"""Malformed model answers, each with the exact parse expected: tests/fixtures/malformed_answers.jsonl.

One JSON object a line: {"parser", "input", "expected", "note"}. `input` is the
answer, or {"prefix", "repeat", "times", "suffix"} for answers too long to
store (built here). Parsers:
  direct            DirectTask.parse against CANDIDATES (ids "1".."20"):
                    {"valid": bool, "ranking": [candidate numbers]}
  recommendations   parse_recommendations: [titles]
  resolve_answer    RecBench+ resolve_answer against CATALOG: {"item_ids": [...], "ftr": bool}
  catalog_resolve   CatalogMatcher(CATALOG).resolve: {"ids": [...], "unmatched": [...]}
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import pytest

from recharness.matching import CatalogMatcher, parse_recommendations
from recharness.tasks.llmrec.direct import DirectTask
from recharness.tasks.recbench_plus.evaluate import resolve_answer

FIXTURE = Path(__file__).parent / "fixtures" / "malformed_answers.jsonl"

CANDIDATES = [
    "Heat (1995)", "Fargo (1996)", "Alien (1979)", "Big (1988)", "Jaws (1975)", "Casablanca (1942)", "12 Angry Men (1957)",
    "Ronin (1998)", "Speed (1994)", "Aliens (1986)", "Top Gun (1986)", "Collateral (2004)", "Insider, The (1999)",
    "Matrix, The (1999)", "Forrest Gump (1994)", "Halloween (1978)", "Michael (1996)", "Friday (1995)",
    "Godfather, The (1972)", "Seven (Se7en) (1995)",
]
CATALOG = {
    "heat": "Heat (1995)", "fargo": "Fargo (1996)", "casablanca": "Casablanca (1942)", "alien": "Alien (1979)",
    "aliens": "Aliens (1986)", "crouching": "Crouching Tiger, Hidden Dragon (2000)",
    "lock": "Lock, Stock & Two Smoking Barrels (1998)", "matrix": "Matrix, The (1999)", "friday": "Friday (1995)",
    "michael": "Michael (1996)", "big": "Big (1988)", "speed": "Speed (1994)", "halloween": "Halloween (1978)",
    "godfather": "Godfather, The (1972)", "shawshank": "Shawshank Redemption, The (1994)", "gump": "Forrest Gump (1994)",
    "collateral": "Collateral (2004)", "insider": "Insider, The (1999)", "topgun": "Top Gun (1986)", "ronin": "Ronin (1998)",
    "sorry": "Sorry, Wrong Number (1948)", "seven": "Seven (Se7en) (1995)",
}
MATCHER = CatalogMatcher(CATALOG)
SAMPLE = {"id": "s", "candidates": [str(k) for k in range(1, len(CANDIDATES) + 1)], "candidate_titles": CANDIDATES}


def load_cases() -> list[dict]:
    return [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines() if line.strip()]


CASES = load_cases()


def answer_text(spec) -> str:
    """The answer: stored as is, or built from a {"prefix", "repeat", "times", "suffix"} recipe."""
    if isinstance(spec, str):
        return spec
    return spec.get("prefix", "") + spec["repeat"] * spec["times"] + spec.get("suffix", "")


def run(parser: str, text: str):
    """What the named parser makes of `text`, in the fixture's `expected` shape."""
    if parser == "direct":
        p = DirectTask().parse(SAMPLE, text)
        return {"valid": p.valid, "ranking": [int(c) for c in p.value["ranking"]]}
    if parser == "recommendations":
        return parse_recommendations(text)
    if parser == "resolve_answer":
        r = resolve_answer(text, MATCHER)
        return {"item_ids": r["item_ids"], "ftr": r["ftr"]}
    if parser == "catalog_resolve":
        ids, unmatched = MATCHER.resolve(text)
        return {"ids": ids, "unmatched": unmatched}
    raise ValueError(f"unknown parser {parser!r}")


@pytest.mark.parametrize("case", CASES, ids=[f"{n + 1}-{c['parser']}" for n, c in enumerate(CASES)])
def test_malformed_answer_parses_as_expected(case):
    text = answer_text(case["input"])
    t0 = time.process_time()
    got = run(case["parser"], text)
    assert got == case["expected"], case["note"]
    assert time.process_time() - t0 < 1.0  # CPU time: hostile or 100k-character answers cost bounded work


def test_fixture_is_well_formed_and_covers_every_parser():
    assert all(set(c) == {"parser", "input", "expected", "note"} and c["note"] for c in CASES)
    counts = Counter(c["parser"] for c in CASES)
    assert set(counts) == {"direct", "recommendations", "resolve_answer", "catalog_resolve"}
    assert min(counts.values()) >= 3
    assert any(len(answer_text(c["input"])) >= 100_000 for c in CASES)  # the 100k-character answers
    assert any(answer_text(c["input"]) == "" for c in CASES)


def test_a_ranking_naming_numbers_no_candidate_has_is_counted():
    """A 0-based ranking "0, 1, 2" is read as candidates 1 and 2 (0 left out): out_of_range_rate says so."""
    task = DirectTask()
    p = task.parse(SAMPLE, "0, 1, 2")
    assert p.value["ranking"] == ["1", "2"] and p.value["out_of_range"] == 1
    sample = {**SAMPLE, "target": "3", "seen": []}
    pred = {"parsed": p.value, "valid": p.valid}
    ok = task.parse(SAMPLE, "3, 1, 2")
    m = task.score([sample, {**sample, "id": "t"}], {"s": pred, "t": {"parsed": ok.value, "valid": ok.valid}})
    assert m["out_of_range_rate"] == 0.5


def test_whitespace_heavy_direct_answers_parse_in_linear_time():
    for text in ("1" + " " * 19000 + "x", " " * 20000 + "3, 1"):
        t0 = time.process_time()
        DirectTask().parse(SAMPLE, text)
        assert time.process_time() - t0 < 0.5  # 1.7 s for the first before runs of spaces were collapsed


def test_a_title_opening_the_clause_after_an_apologys_but_is_read():
    """"I am not aware of films matching every condition, but Philadelphia (1993) comes close": the clause after
    "but" opens with the title, which the capitalised-run rule skipped as a sentence start (the answer read as a
    decline). Its first word may start a title with a year; without one it stays skipped (a common word)."""
    m = CatalogMatcher({"heat": "Heat (1995)", "fargo": "Fargo (1996)", "speed": "Speed (1994)"})
    r = resolve_answer("I am not aware of films matching every condition, but Fargo (1996) comes close.", m)
    assert r["item_ids"] == ["fargo"] and not r["ftr"]
    r = resolve_answer("I'm sorry, I can't find an exact match, but Heat (1995) and Fargo (1996) are close.", m)
    assert r["item_ids"] == ["heat", "fargo"] and not r["ftr"]
    # a sentence start without a year is still no title ("Speed matters" names nothing)
    r = resolve_answer("I'm sorry, I don't know such films, but Speed matters less than mood here.", m)
    assert r["item_ids"] == [] and r["ftr"]
    # a negation that is no denial of a credit, and a title with a negative word, still suggest
    m2 = CatalogMatcher({"fargo": "Fargo (1996)", "nocountry": "No Country for Old Men (2007)"})
    for text, want in (("I'm sorry, I can't find that actor, but Fargo (1996) is not to be missed.", ["fargo"]),
                       ("I'm sorry, I can't find that actor, but Fargo (1996) never disappoints.", ["fargo"]),
                       ("I'm sorry, I can't find that, but No Country for Old Men (2007) comes close.", ["nocountry"])):
        r = resolve_answer(text, m2)
        assert r["item_ids"] == want and not r["ftr"], (text, r)
    # a clause that denies what it names suggests nothing: still a decline
    for text in ("I'm sorry, but Heat (1995) does not feature Tom Hanks.",
                 "I couldn't find a film matching all of that, but Heat (1995) was not directed by Christopher Nolan."):
        r = resolve_answer(text, m)
        assert r["item_ids"] == [] and r["ftr"], (text, r)
