"""LLMRec sequential and direct recommendation: build, parse, score, references."""

from __future__ import annotations

import math

import numpy as np

import pytest

from recharness.core.types import BuildConfig
from recharness.tasks.llmrec.direct import DirectTask
from recharness.tasks.llmrec.sequential import SequentialTask


@pytest.fixture(scope="module")
def seq_samples(ml1m):
    return list(SequentialTask().build(ml1m, BuildConfig(seed=0, limit=20)))


def test_sequential_build_is_deterministic_and_leak_free(ml1m, seq_samples):
    again = list(SequentialTask().build(ml1m, BuildConfig(seed=0, limit=20)))
    other = list(SequentialTask().build(ml1m, BuildConfig(seed=1, limit=20)))
    assert again == seq_samples
    assert {s["user_id"] for s in other} != {s["user_id"] for s in seq_samples}
    inter = ml1m.interactions
    for s in seq_samples:
        rows = inter.filter(inter["user_id"] == s["user_id"])["item_id"].to_list()
        assert rows[-1] == s["target"]  # leave-last-out: the newest interaction is held out
        assert s["seen"] == rows[:-1]
        assert s["target_title"] not in s["messages"][0]["content"]
    assert len(seq_samples) == 20 and len({s["id"] for s in seq_samples}) == 20


def test_prompt_parts_switch_off(ml1m):
    full = next(SequentialTask().build(ml1m, BuildConfig(limit=1)))["messages"][0]["content"]
    no_hist = next(SequentialTask().build(ml1m, BuildConfig(limit=1, options={"behaviour": False})))["messages"][0]["content"]
    no_fmt = next(SequentialTask().build(ml1m, BuildConfig(limit=1, options={"format_indicator": False})))["messages"][0]["content"]
    assert "oldest first" in full and "oldest first" not in no_hist
    assert "numbered list" in full and "numbered list" not in no_fmt
    assert no_hist in full or full.startswith(no_hist.split("\n\n")[0])



def test_direct_without_its_description_still_shows_the_candidates():
    """--no-description removes an instruction, never the candidates to rank (before, the whole list went with it)."""
    from recharness.tasks.llmrec.prompts import PromptParts, direct_prompt

    hist, cands = [{"title": "A", "rating": 4}], [{"title": "X"}, {"title": "Y"}]
    full = direct_prompt("movie", hist, cands, PromptParts())[0]["content"]
    bare = direct_prompt("movie", hist, cands, PromptParts(task_description=False))[0]["content"]
    assert "[1] X\n[2] Y" in bare and "recommender system" not in bare
    assert full.startswith("You are a movie recommender system. Rank the candidate movies below by how likely the "
                           "user is to choose each one next.\n\nCandidates:\n[1] X\n[2] Y\n\nThe user has")


def test_sequential_parse_matches_catalog_and_scores_by_hand(ml1m, seq_samples):
    task = SequentialTask()
    task.setup(ml1m)
    s = dict(seq_samples[0])
    titles = dict(zip(ml1m.items["item_id"].to_list(), ml1m.items["title"].to_list()))
    s["seen"] = ["1"]  # Toy Story seen before
    s["target"] = "2571"  # Matrix, The (1999)
    answer = "Here you go:\n1. Toy Story (1995)\n2. **The Matrix** (1999) - a classic\n3. Some Film That Does Not Exist (2031)"
    parsed = task.parse(s, answer)
    assert parsed.valid and parsed.value["items"][:2] == ["1", "2571"]
    assert parsed.value["unmatched"] == ["Some Film That Does Not Exist (2031)"]
    pred = {"id": s["id"], "parsed": parsed.value, "valid": True}
    # the seen item and the invented title hold their places (never a hit): the target is second as listed
    assert task.ranked(s, pred) == [None, "2571", None]
    assert task.target_rank(s, pred) == 2
    m = task.score([s], {s["id"]: pred})
    # target at rank 2: HR@1 = 0, HR@5 = 1, NDCG@5 = 1/log2(3), MRR = 1/2
    assert m["HR@1"] == 0.0 and m["HR@5"] == 1.0 and m["NDCG@5"] == pytest.approx(1 / np.log2(3)) and m["MRR"] == 0.5
    assert m["matched_share"] == pytest.approx(2 / 3)
    # second sample misses entirely; means halve
    s2 = dict(s, id="x2", target=next(i for i in titles if i not in ("1", "2571")))
    m2 = task.score([s, s2], {s["id"]: pred, "x2": dict(pred, id="x2")})
    assert m2["HR@10"] == 0.5 and m2["NDCG@10"] == pytest.approx(0.5 / np.log2(3))
    # a second title naming an item already listed holds its place too: "Matrix" is third, not second (the
    # same title written twice is read once, by the parser)
    s4 = dict(s, seen=[], n_recs=5)
    twice = task.parse(s4, "1. Toy Story (1995)\n2. Toy Story\n3. The Matrix (1999)")
    assert task.ranked(s4, {"parsed": twice.value}) == ["1", "1", "2571"]
    assert task.score([s4], {s4["id"]: {"parsed": twice.value, "valid": True}})["NDCG@5"] == pytest.approx(0.5)
    assert not task.parse(s, "I'm sorry, I cannot help with that.").valid
    assert parsed.value["slots"] == ["1", "2571", None]
    # asked for n_recs titles: the first n_recs listed are the answer, an invented one spending its place
    s3 = dict(s, n_recs=2, target="2571")
    late = task.parse(s3, "1. Some Film That Does Not Exist (2031)\n2. Another Invented Film (2030)\n3. The Matrix (1999)")
    assert late.value["items"] == ["2571"] and task.ranked(s3, {"parsed": late.value}) == [None, None]


def test_direct_parse_numbers_titles_and_garbage():
    task = DirectTask()
    s = {"candidates": ["a", "b", "c", "d", "e", "f"],
         "candidate_titles": ["Alien (1979)", "Heat (1995)", "Fargo (1996)", "Big (1988)", "Jaws (1975)", "Up (2009)"],
         "target": "c", "id": "s"}
    p = task.parse(s, "3, 1, [2], 3, 9")
    assert p.valid and p.value["ranking"] == ["c", "a", "b"] and p.value["partial"] and p.value["out_of_range"] == 1
    assert p.value["slots"] == ["c", "a", "b", "c", None]  # the list as written: what the metrics read
    # a repeat or a number no candidate has holds its place: "c" (3) is third as written, not moved up
    for answer in ("1, 1, 3, 4", "9, 2, 3, 1"):
        p = task.parse(s, answer)
        rec = {"parsed": p.value, "valid": True}
        assert task.target_rank(s, rec) == 3
        assert task.score([s], {"s": rec})["NDCG@5"] == pytest.approx(0.5)
    p = task.parse(s, "1, 2, 3, 4, 5, 6")
    assert "slots" not in p.value and task.target_rank(s, {"parsed": p.value, "valid": True}) == 3
    p = task.parse(s, "I would go with Fargo (1996), then Alien (1979).")
    assert p.value["ranking"] == ["c", "a"] and p.value["how"] == "titles"
    assert not task.parse(s, "").valid
    assert not task.parse(s, "No idea, sorry!").valid
    p = task.parse(s, "4,3,2,1, 6, 5")
    assert p.value["ranking"] == ["d", "c", "b", "a", "f", "e"] and not p.value["partial"]
    # target c at rank 2: HR@1 = 0, HR@5 = 1, NDCG@5 = 1/log2(3), MRR = 1/2
    m = task.score([s], {"s": {"parsed": p.value, "valid": True}})
    assert m["HR@1"] == 0.0 and m["HR@5"] == 1.0
    assert m["NDCG@5"] == pytest.approx(1 / math.log2(3)) and m["MRR"] == 0.5
    assert "HR@10" not in m  # k beyond the candidate count would be trivially 1
    # at k equal to the candidate count too: 10 candidates, a complete ranking with the target last, HR@10 would be
    # 1 for any complete answer; NDCG@10 still weighs the place: 1/log2(11)
    ten = {"candidates": list("abcdefghij"), "candidate_titles": [f"T{k}" for k in range(10)], "target": "a",
           "id": "t"}
    last = task.parse(ten, ", ".join(str(k) for k in range(2, 11)) + ", 1")
    assert last.value["ranking"][-1] == "a" and not last.value["partial"]
    m10 = task.score([ten], {"t": {"parsed": last.value, "valid": True}})
    assert "HR@10" not in m10 and m10["HR@5"] == 0.0 and m10["NDCG@10"] == pytest.approx(1 / math.log2(11))
    assert set(task.units([ten], {"t": {"parsed": last.value, "valid": True}})) >= {"NDCG@10", "HR@5"}
    # beyond accuracy likewise: the top 10 of 10 candidates is all of them (head/tail HR@10 would be 1, ARP the
    # candidates' own); at the largest HR cut-off below the list instead, k = 5: the top 5 is b..f
    import polars as pl

    from recharness.metrics.beyond_accuracy import Popularity

    inter = pl.DataFrame({"user_id": [f"u{j}" for j in range(10) for _ in range(j + 1)],
                          "item_id": [c for j, c in enumerate("abcdefghij") for _ in range(j + 1)]})
    pop = Popularity.of(inter, list("abcdefghij"))  # item j has j + 1 interactions; head (top 2): i, j

    class _Split:
        def of(self, samples):
            return pop

    task.popularity = _Split()
    answers = {"t": {"parsed": last.value, "valid": True}}
    m10 = task.score([ten], answers)
    assert not [k for k in m10 if k.startswith(("HR@10", "ARP@10", "coverage@10", "Gini@10", "novelty@10"))], m10
    assert m10["ARP@5"] == pytest.approx((2 + 3 + 4 + 5 + 6) / 5) and m10["coverage@5"] == pytest.approx(0.5)
    assert m10["HR@5 tail"] == 0.0 and "HR@5 head" not in m10  # target a (1 interaction) is a tail item, missed
    assert set(task.units([ten], answers)) >= {"ARP@5", "coverage@5", "HR@5 tail"}
    # the lists beyond accuracy reads are the places the metrics read: "2" five times fills the top 5, and the
    # target after it is a miss there too (before: read from the ranking of distinct candidates, a tail hit)
    again = {"t": {"parsed": task.parse(ten, "2, 2, 2, 2, 2, 1").value, "valid": True}}
    m5 = task.score([ten], again)
    assert m5["HR@5"] == 0.0 and m5["HR@5 tail"] == 0.0 and m5["coverage@5"] == pytest.approx(0.1)
    assert task.units([ten], again)["HR@5 tail"].point() == 0.0
    task.popularity = None
    # huge answers: digit runs are not candidate numbers, and only the first 20,000 characters are read
    assert task.parse(s, "2, 1\n" + "1" * 9000).value["ranking"] == ["b", "a"]
    assert not task.parse(s, "1" * 9000 + " 2, 1").valid  # a list inside a line of garbage is no list
    assert not task.parse(s, "x " * 10000 + "2, 1").valid
    # numbers in prose are not a ranking
    p = task.parse(s, "I cannot rank these, sorry. There are 6 candidates and 3 are dramas.")
    assert not p.valid and p.value["ranking"] == []


def test_direct_parse_ranks_every_candidate_a_line_names():
    """A list line naming several candidate titles ("A - B", "watched - candidate", "A, B and C") gives each, in
    order; words that are no title end the run, so a title in an explanation is not ranked by that line."""
    task = DirectTask()
    s = {"candidates": ["a", "b", "c", "d", "e", "f", "g"],
         "candidate_titles": ["Alien (1979)", "Heat (1995)", "Fargo (1996)", "Big (1988)", "Jaws (1975)", "Up (2009)",
                              "Ronin (1998)"],
         "target": "g", "id": "s"}

    def ranking(text):
        p = task.parse(s, text)
        assert p.valid and p.value["how"] == "titles"
        return p.value["ranking"]

    assert ranking("1. Heat (1995) - Ronin (1998)\n2. Fargo (1996)") == ["b", "g", "c"]  # "A - B": both
    assert ranking("1. Casino - Ronin (1998)\n2. Cliffhanger - Heat (1995)") == ["g", "b"]  # watched - candidate
    assert ranking("1. Casino - Heat (1995), Ronin (1998) and Fargo (1996)\n2. Alien (1979)") == ["b", "g", "c", "a"]
    assert ranking('- "Jaws (1975)" / "Up (2009)"\n- Big (1988) -> Alien (1979)') == ["e", "f", "d", "a"]
    # a dash before an explanation is no second title; a title named in the explanation is not ranked there
    assert ranking("1. Heat (1995) - a great heist film\n2. Ronin (1998)") == ["b", "g"]
    assert ranking("1. Heat (1995) - tense, like Ronin (1998)\n2. Fargo (1996)\n3. Ronin (1998)") == ["b", "c", "g"]
    # never an item twice: a candidate named on two lines keeps its first place
    assert ranking("1. Heat (1995) - Ronin (1998)\n2. Ronin (1998) - Heat (1995)\n3. Fargo (1996) - Fargo (1996)"
                   ) == ["b", "g", "c"]
    # NIR's released shape (titles without years, the candidates as the authors' prompt showed them): the target
    # as the second title of a line is ranked where the line puts it
    nir = {"candidates": ["a", "b", "c", "d"], "candidate_titles": ["Die Hard 2", "Under Siege", "The Rock", "Speed"],
           "target": "c", "id": "n"}
    p = task.parse(nir, "1. Cliffhanger - Die Hard 2\n2. Under Siege - The Rock\n3. True Lies - Speed")
    assert p.value["ranking"] == ["a", "b", "c", "d"] and not p.value["partial"]
    m = task.score([nir], {"n": {"parsed": p.value, "valid": True}})
    assert m["HR@1"] == 0.0 and m["MRR"] == pytest.approx(1 / 3)


def test_direct_candidates_hold_target_and_unseen_negatives(ml1m):
    samples = list(DirectTask().build(ml1m, BuildConfig(seed=3, limit=10, options={"n_candidates": 15})))
    inter = ml1m.interactions
    for s in samples:
        assert len(s["candidates"]) == 15 == len(set(s["candidates"]))
        assert s["candidates"].count(s["target"]) == 1
        had = set(inter.filter(inter["user_id"] == s["user_id"])["item_id"].to_list())
        assert not (set(s["candidates"]) - {s["target"]}) & had
    positions = {s["candidates"].index(s["target"]) for s in samples}
    assert len(positions) > 1  # the target is not always in the same slot


def test_a_users_direct_candidates_are_the_same_in_any_build_of_the_seed(ml1m):
    """The negatives came from one stream over the users, so `--users` (or `--limit`) gave a user other candidates
    than the full build did: a subset run was not comparable sample by sample. Each user draws from their own."""
    full = {s["user_id"]: s for s in DirectTask().build(ml1m, BuildConfig(seed=0, limit=12))}
    some = sorted(full)[5:8]
    for kind in ({}, {"negatives": "popularity"}):
        full_k = {s["user_id"]: s for s in DirectTask().build(ml1m, BuildConfig(seed=0, limit=12, options=kind))}
        part = list(DirectTask().build(ml1m, BuildConfig(seed=0, users=tuple(some), options=kind)))
        assert sorted(s["user_id"] for s in part) == some
        for s in part:
            assert s["candidates"] == full_k[s["user_id"]]["candidates"], kind
    other = {s["user_id"]: s for s in DirectTask().build(ml1m, BuildConfig(seed=1, users=tuple(some)))}
    assert all(full[u]["candidates"] != other[u]["candidates"] for u in some)  # the seed still decides


def test_direct_with_llmrank_retriever_lists(llmrank_games):
    ds = llmrank_games
    samples = list(DirectTask().build(ds, BuildConfig(seed=0, limit=None, options={"retriever": "sasrec", "n_candidates": 20})))
    cands = ds.extras["candidates"]
    lists = dict(zip(cands.filter(cands["retriever"] == "sasrec")["user_id"].to_list(),
                     cands.filter(cands["retriever"] == "sasrec")["item_ids"].to_list()))
    assert len(samples) == len(lists) == 200
    for s in samples:
        assert s["target"] in s["candidates"] and len(s["candidates"]) == 20
        # the list's first 19 items (but the target), shown in a seeded random order, not the retriever's
        assert sorted(c for c in s["candidates"] if c != s["target"]) == \
            sorted([c for c in lists[s["user_id"]] if c != s["target"]][:19])
    assert sum([c for c in s["candidates"] if c != s["target"]] == [c for c in lists[s["user_id"]] if c != s["target"]][:19]
               for s in samples) == 0


def test_published_retriever_lists_hold_items_the_user_had(llmrank_games):
    """README's figure: LLMRank's lists, kept as published (unfiltered against the history, as its own
    `sample_candidates.py`), give BPR's users 520 of 3,800 shown negatives from their own history (13.7%), the
    random retriever none; counted by hand from the data on 2026-11-30."""
    seen_share = {}
    for retriever in ("bpr", "random"):
        samples = list(DirectTask().build(llmrank_games, BuildConfig(
            seed=0, limit=None, options={"retriever": retriever, "n_candidates": 20})))
        negatives = [(c, s) for s in samples for c in s["candidates"] if c != s["target"]]
        seen_share[retriever] = (sum(c in set(s["seen"]) for c, s in negatives), len(negatives))
    assert seen_share == {"bpr": (520, 3800), "random": (0, 3800)}


def test_references_are_scored_by_the_same_scorer(ml1m, seq_samples):
    task = SequentialTask()
    refs = task.references(ml1m, seq_samples, seed=0)
    assert set(refs) == {"popularity", "random"}
    for recs in refs.values():
        for s in seq_samples:
            items = recs[s["id"]]["parsed"]["items"]
            assert len(items) == 10 and not set(items) & set(s["seen"])
    pop = task.score(seq_samples, refs["popularity"])
    rnd = task.score(seq_samples, refs["random"])
    # the scorer's HR@10 is the share of samples whose target is among the 10 items, worked out here
    for m, recs in ((pop, refs["popularity"]), (rnd, refs["random"])):
        want = sum(s["target"] in recs[s["id"]]["parsed"]["items"] for s in seq_samples) / len(seq_samples)
        assert m["HR@10"] == pytest.approx(float(want), abs=1e-12)


def test_a_repeat_target_is_counted_as_unreachable(ml1m, seq_samples):
    """A held-out item the user had before (H&M repeat purchases) is out of every method's list: its share is
    reported, and only when there is one."""
    task = SequentialTask()
    task.setup(ml1m)
    s = dict(seq_samples[0], seen=["1", "2571"], target="2571")
    other = dict(seq_samples[1], seen=["1"], target="2571", id="x2")
    pred = {"parsed": task.parse(s, "1. The Matrix (1999)").value, "valid": True}
    m = task.score([s, other], {s["id"]: pred, "x2": dict(pred)})
    assert m["target_seen_rate"] == 0.5 and m["HR@1"] == 0.5  # only the sample whose target is unseen is hit
    assert "target_seen_rate" not in task.score([other], {"x2": pred})


def test_a_direct_repeat_target_is_reported():
    """The held-out item also in the history is the only candidate the user had: its share is said."""
    from recharness.tasks.llmrec.direct import DirectTask

    base = {"task": "direct", "candidates": ["t", "a", "b"], "candidate_titles": ["T", "A", "B"], "target": "t"}
    samples = [{**base, "id": "s1", "seen": ["x", "t"]}, {**base, "id": "s2", "seen": ["x"]}]
    preds = {s["id"]: {"parsed": {"ranking": ["t", "a", "b"]}, "valid": True} for s in samples}
    assert DirectTask().score(samples, preds)["target_seen_rate"] == 0.5
    assert "target_seen_rate" not in DirectTask().score(samples[1:], preds)


def test_direct_rank_marks_before_candidate_numbers_are_no_candidates():
    """"1) 5" ranks candidate 5 first: its rank mark was read as candidate 1 (a list "1, 5"), so candidate 1 came
    first in every such answer: HR@1 0 and MRR 1/2 for an answer that put the target first."""
    task = DirectTask()
    s = {"candidates": list("abcdef"), "candidate_titles": ["Alien (1979)", "Heat (1995)", "Fargo (1996)", "Big (1988)",
                                                             "Jaws (1975)", "Up (2009)"], "target": "e", "id": "s"}
    for text in ("1) 5\n2) 3\n3) 1", "(1) 5\n(2) 3\n(3) 1", "1 - 5\n2 - 3\n3 - 1", "1) [5]\n2) [3]\n3) [1]",
                 "1. 5\n2. 3\n3. 1"):
        p = task.parse(s, text)
        assert p.valid and p.value["ranking"] == ["e", "c", "a"], (text, p.value)
        m = task.score([s], {"s": {"parsed": p.value, "valid": True}})
        assert m["HR@1"] == 1.0 and m["MRR"] == 1.0
    # bracketed candidate numbers alike stay a list, and a title after a rank mark stays a title
    assert task.parse(s, "(5) (3) (1)").value["ranking"] == ["e", "c", "a"]
    assert task.parse(s, "[5], [3], [1]").value["ranking"] == ["e", "c", "a"]
    assert task.parse(s, "1) Jaws (1975)\n2) Fargo (1996)").value["ranking"] == ["e", "c"]
