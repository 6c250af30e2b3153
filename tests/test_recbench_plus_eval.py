"""RecBench+ scoring, references, profiles, phrasing and tables on hand-worked examples."""

from __future__ import annotations

import math

import polars as pl
import pytest

from recharness.core.types import ScoreRow
from recharness.data.store import Dataset
from recharness.tasks.recbench_plus.condition_tasks import ExplicitTask
from recharness.tasks.recbench_plus.phrasing import (
    ConditionText,
    clean_query,
    describe_group,
    parse_subset_queries,
    template_condition_queries,
)
from recharness.tasks.recbench_plus.profiles import common_interest_sets, demographic_groups
from recharness.tasks.recbench_plus.tables import paper_tables


def _toy() -> Dataset:
    items = pl.DataFrame({
        "item_id": ["1", "2", "3", "4", "5"],
        "title": ["Heat (1995)", "Collateral (2004)", "Insider, The (1999)", "Top Gun (1986)", "Ronin (1998)"],
        "year": [1995, 2004, 1999, 1986, 1998],
        "genres": [["Crime"], ["Crime"], ["Drama"], ["Action"], ["Action", "Crime"]],
        "directors": [["Michael Mann"], ["Michael Mann"], ["Michael Mann"], ["Tony Scott"], ["John Frankenheimer"]],
        "cast": [["Al Pacino", "Robert De Niro"], ["Tom Cruise"], ["Al Pacino"], ["Tom Cruise"], ["Robert De Niro"]],
    })
    inter = pl.DataFrame({
        "user_id": ["u1", "u1", "u1", "u1", "u2", "u2"],
        "item_id": ["1", "3", "4", "5", "2", "4"],
        "rating": [5.0, 4.0, 3.0, 4.0, 5.0, 2.0],
        "timestamp": [1, 2, 3, 4, 1, 2],
    })
    users = pl.DataFrame({"user_id": ["u1", "u2"]})
    return Dataset("toy-movies", inter, items, users, meta={"domain": "movie"})


def _sample(sid="q", k=None, history=()):
    return {"id": sid, "task": "explicit", "conditions": [["Directed_by", "Michael Mann"]],
            "stated_conditions": [["Directed_by", "Michael Mann"]], "gt": ["1", "3"], "satisfying": ["1", "2", "3"],
            "k": k, "ref_k": 2, "history": list(history), "groups": ["conditions=1", "history=with" if history else "history=without"]}


ANSWER = "1. Heat (1995)\n2. Top Gun\n3. Manhunter (1986)\n4. Collateral"


@pytest.fixture(scope="module")
def task():
    t = ExplicitTask()
    t.setup(_toy())
    return t


def _pred(task, sample, text):
    p = task.parse(sample, text)
    return {"id": sample["id"], "parsed": p.value, "valid": p.valid, "output": text}


def test_precision_recall_cmr_by_hand(task):
    s = _sample()
    p = _pred(task, s, ANSWER)
    assert p["parsed"]["item_ids"] == ["1", "4", None, "2"] and not p["parsed"]["ftr"]
    m = task.score([s], {"q": p})
    # L = [Heat, Top Gun, <unmatched>, Collateral]; GT = {Heat, The Insider}; Mann films = {Heat, Collateral, Insider}
    assert m["P"] == pytest.approx(1 / 4) and m["R"] == pytest.approx(1 / 2)
    assert m["CMR"] == pytest.approx(2 / 4) and m["unmatched"] == pytest.approx(1 / 4)
    assert m["FTR"] == 0.0 and m["n_scored"] == 1 and m["missing"] == 0
    # fixed K = 2: L = [Heat, Top Gun], precision over K
    s2 = _sample(k=2)
    m2 = task.score([s2], {"q": _pred(task, s2, ANSWER)})
    assert (m2["P"], m2["R"], m2["CMR"], m2["unmatched"]) == (0.5, 0.5, 0.5, 0.0)


def test_refusals_nothing_and_missing(task):
    samples = [_sample("a"), _sample("b"), _sample("c"), _sample("d")]
    preds = {
        "a": _pred(task, samples[0], ANSWER),
        "b": _pred(task, samples[1], "I'm sorry, but I couldn't find any movies directed by that person."),
        "c": _pred(task, samples[2], "None"),
    }
    assert preds["b"]["parsed"]["ftr"] and preds["b"]["valid"]
    assert preds["c"]["parsed"]["ftr"] and preds["c"]["valid"]
    m = task.score(samples, preds)
    assert m["n_scored"] == 3 and m["missing"] == 1
    assert m["P"] == pytest.approx(0.25 / 3) and m["R"] == pytest.approx(0.5 / 3)
    assert m["FTR"] == pytest.approx(2 / 3)
    assert m["CMR"] == pytest.approx(0.5)  # only the query that recommended something has a CMR
    # an empty answer, or reasoning cut off before its answer, is no answer: invalid (scored as unanswered: FTR 1
    # here, but 0 on a misinformed query, where a deliberate decline is the best FTR and an empty answer got it)
    empty = task.parse(samples[3], "")
    assert not empty.valid and empty.error == "empty answer"
    cut = task.parse(samples[3], "<think>I'm not aware of such a film. Let me list: Heat (1995), Ron")
    assert not cut.valid and cut.error.startswith("no answer after the reasoning")


def test_repeated_titles_count_once_and_refusal_with_items_is_not_ftr(task):
    s = _sample()
    p = _pred(task, s, "Sorry, I am not sure, but maybe:\n- Heat\n- Heat (1995)\n- The Insider")
    assert p["parsed"]["item_ids"] == ["1", "3"] and not p["parsed"]["ftr"]
    m = task.score([s], {"q": p})
    assert (m["P"], m["R"], m["CMR"], m["FTR"]) == (1.0, 1.0, 1.0, 0.0)


def test_the_querys_own_films_are_not_its_recommendations(task):
    """A misinformed query claims Top Gun (4) is a Michael Mann film: the correction naming Top Gun recommends
    nothing (FTR 1, the paper's right answer); an answer that just lists Top Gun keeps it, a wrong pick. An implicit
    query's reference film (Heat, 1) repeated back is no recommendation: no CMR from it."""
    mis = {**_sample("m"), "task": "misinformed",
           "misinformed": {"relation": "Directed_by", "value": "Michael Mann", "errorInfo": {"movieIds": [4]}}}
    corrected = _pred(task, mis, "Top Gun (1986) was not directed by Michael Mann, so I cannot recommend it.")
    listed = _pred(task, mis, "1. Top Gun (1986)")
    assert task.score([mis], {"m": corrected})["FTR"] == 1.0
    plain = _pred(task, mis, "Top Gun (1986) wasn't directed by Michael Mann.")  # a correction, no apology
    assert task.score([mis], {"m": plain})["FTR"] == 1.0
    m = task.score([mis], {"m": listed})
    assert (m["FTR"], m["P"], m["CMR"]) == (0.0, 0.0, 0.0)
    imp = {**_sample("i"), "task": "implicit", "implicit": {"relation": "Directed_by", "value": "Michael Mann",
                                                             "referenceMovieIds": [1]}}
    m = task.score([imp], {"i": _pred(task, imp, "1. Heat (1995)\n2. The Insider (1999)")})
    # L = [The Insider]: Heat, the query's own reference, left out
    assert (m["P"], m["R"], m["CMR"], m["FTR"]) == (1.0, 0.5, 1.0, 0.0)
    m = task.score([imp], {"i": _pred(task, imp, "Heat (1995)")})
    assert m["FTR"] == 1.0 and "CMR" not in m


def test_references_by_hand():
    ds = _toy()
    t = ExplicitTask()
    samples = [_sample("n"), _sample("h", history=["4"])]
    refs = t.references(ds, samples)
    # popularity: Top Gun (2 users) first, then ids 1, 2, ... ; the shown history is never recommended
    assert refs["popularity"]["n"]["parsed"]["item_ids"] == ["4", "1"]
    assert refs["popularity"]["h"]["parsed"]["item_ids"] == ["1", "2"]
    # KG baseline: the most popular items with every stated condition (Michael Mann films)
    assert refs["kg-conditions"]["n"]["parsed"]["item_ids"] == ["1", "2"]
    m = t.score(samples, refs["kg-conditions"])
    assert (m["P"], m["R"], m["CMR"]) == (0.5, 0.5, 1.0)
    bd = t.breakdown(samples, refs["popularity"])
    assert (bd["history=without"]["P"], bd["history=without"]["CMR"]) == (0.5, 0.5)  # Heat, Top Gun
    assert (bd["history=with"]["P"], bd["history=with"]["CMR"]) == (0.5, 1.0)  # Heat, Collateral


def test_common_interest_sets_by_hand():
    hist = {"u1": ["a", "b", "c", "d"], "u2": ["x", "b", "a", "c"], "u3": ["c", "a", "b", "y"], "u4": ["a", "c", "b"]}
    sets = common_interest_sets(hist, length=3, theta=3, prev_len=2)
    assert len(sets) == 1
    s = sets[0]
    assert s.items == ("a", "b", "c") and s.support == 4
    assert s.previous == [(("x",), 1)]
    assert s.occurrences == [("u1", 0), ("u2", 1), ("u3", 0), ("u4", 0)]
    assert common_interest_sets(hist, length=3, theta=5) == []
    two = common_interest_sets(hist, length=2, theta=2)
    assert {x.items: x.support for x in two} == {("a", "b"): 3, ("b", "c"): 2, ("a", "c"): 3}
    assert sorted(x.quintile for x in two) == [1, 2, 2]  # (a, b) and (a, c) share support 3: one quintile
    with pytest.raises(ValueError):
        common_interest_sets(hist, length=1)
    # support counts users, not windows: one user repeating a, b, c is one user (it was support 6 from 2 users)
    rep = {"u1": ["a", "b", "c", "a", "b", "c", "a"], "u2": ["a", "b", "c"]}
    assert common_interest_sets(rep, length=3, theta=3) == []
    assert [x.support for x in common_interest_sets(rep, length=3, theta=2)] == [2]
    # a window repeating an item is no 3-item set
    assert common_interest_sets({"u1": ["a", "a", "b"], "u2": ["a", "b", "a"]}, length=3, theta=2) == []


def test_demographic_tfidf_by_hand():
    users = pl.DataFrame({"user_id": ["u1", "u2", "u3", "u4"], "gender": ["M", "M", "F", "F"], "age": [25, 25, 25, 35],
                          "occupation_name": ["programmer", "programmer", "writer", "writer"]})
    inter = pl.DataFrame({"user_id": ["u1", "u1", "u2", "u2", "u3", "u3", "u4", "u1"],
                          "item_id": ["a", "b", "a", "c", "a", "b", "d", "a"]})  # u1 rated "a" twice: counts once
    groups = {(g.group_type, str(g.group)): g for g in demographic_groups(inter, users, min_users=1)}
    male = groups[("gender", "Male")]
    assert male.size == 2
    # N = 4 users; df: a 3, b 2, c 1; Male: a 2/2, b 1/2, c 1/2
    assert [i for i, _, _ in male.top] == ["c", "b", "a"]
    assert [s for _, s, _ in male.top] == pytest.approx([0.5 * math.log(4), 0.5 * math.log(2), math.log(4 / 3)])
    assert [n for _, _, n in male.top] == [1, 1, 2]
    assert groups[("age", "25-34")].size == 3 and groups[("age", "35-44")].size == 1
    assert ("age_gender_occupation", "['25-34', 'Male', 'programmer']") in groups
    assert all(g.size >= 2 for g in demographic_groups(inter, users, min_users=2))


def test_template_phrasing():
    d, s = template_condition_queries([ConditionText("Starring", "Tom Hanks"), ConditionText("Genre", "War")], "movie")
    assert d == "Can you recommend some war movies starring Tom Hanks?"
    assert s == "I'm looking for something to watch: war movies starring Tom Hanks. What would you suggest?"
    d, _ = template_condition_queries([ConditionText("Directed_by", "James Cameron", "implicit", ("The Abyss (1989)",))], "movie")
    assert d == "Can you recommend some movies directed by the director of The Abyss (1989)?"
    d, _ = template_condition_queries([ConditionText("Starring", "X Y", "implicit", ("A (1990)", "B (1991)")),
                                       ConditionText("Release_decade", "1990s")], "movie")
    assert d == "Can you recommend some movies starring the actor who appears in both A (1990) and B (1991) and released in the 1990s?"
    d, _ = template_condition_queries([ConditionText("Directed_by", "James Cameron", "misinformed", ("Star Trek (2009)",)),
                                       ConditionText("Starring", "A"), ConditionText("Starring", "B")], "movie")
    assert d == ("I really liked Star Trek (2009), which James Cameron directed. "
                 "Can you recommend some movies directed by James Cameron and starring A and B?")
    assert describe_group({"age": "25-34", "gender": "Male", "occupation": "programmer"}) == "a 25-34-year-old male programmer"
    assert describe_group({"gender": "Female"}) == "a woman"
    assert describe_group({"occupation": "executive/managerial"}) == "an executive"
    assert describe_group({"age": "Under 18", "occupation": "K-12 student"}) == "an under-18 K-12 student"
    assert describe_group({"age": "56+"}) == "a 56-or-older person"


def test_llm_output_checks():
    assert clean_query('Sure! Here is the query: "Any war films with Tom Hanks?"')[0] == "Any war films with Tom Hanks?"
    assert clean_query("Films by James Cameron?", ["James Cameron"]) == (None, "the query names the hidden value")
    # a whole word: a hidden certificate "R" is not in "rating", nor a genre "War" in "award" (before: rejected)
    assert clean_query("Any film with the same rating as Heat (1995)?", ["R"]) == (
        "Any film with the same rating as Heat (1995)?", None)
    assert clean_query("An award winner like Heat (1995)?", ["War"]) == ("An award winner like Heat (1995)?", None)
    assert clean_query("Something rated R like Heat (1995)?", ["R"]) == (None, "the query names the hidden value")
    assert clean_query("Some good westerns like Unforgiven (1992)?", ["Western"]) == (None, "the query names the hidden value")
    # a consonant's -y plural names the genre too (before: "comedies" passed as not naming "Comedy")
    assert clean_query("Any fun comedies like Big (1988)?", ["Comedy"]) == (None, "the query names the hidden value")
    assert clean_query("Any fun comedy like Big (1988)?", ["Comedy"]) == (None, "the query names the hidden value")
    assert clean_query("Any fun stuff like Big (1988)?", ["Comedy"]) == ("Any fun stuff like Big (1988)?", None)
    assert clean_query("Films with new days like Big (1988)?", ["Day"]) == (None, "the query names the hidden value")
    assert clean_query("Films with new daies like Big (1988)?", ["Day"]) == ("Films with new daies like Big (1988)?", None)
    assert clean_query("")[1] == "empty answer"
    assert clean_query("I'm ready to assist you. What's your query?", required=["Tom Hanks"]) == (
        None, "the query omits 'Tom Hanks'")
    assert clean_query("Films with the star of Big, please!", required_any=["Big", "Splash"])[0]
    assert clean_query("Films with that actor, please!", required_any=["Big"])[1] == "the query names none of the referenced titles"
    out = parse_subset_queries('Here: [{"reason": "r", "query": "q?", "movie subset": ["A", "B"]}, {"query": 3}]')
    assert out == [{"reason": "r", "query": "q?", "subset": ["A", "B"]}]
    assert parse_subset_queries("no json here") == []


def test_paper_tables_layout():
    rows = []
    for t, (p, r, c, f) in {"explicit": (0.2, 0.4, 0.6, 0.0), "implicit": (0.1, 0.2, 0.3, 0.1),
                            "misinformed": (0.0, 0.1, 0.0, 0.5)}.items():
        rows.append(ScoreRow("m1", t, {"P": p, "R": r, "CMR": c, "FTR": f}, 10,
                             extra={"breakdown": {"history=with": {"P": p / 2, "R": r, "CMR": c, "FTR": f}}}))
    rows.append(ScoreRow("popularity", "interest", {"P": 0.01, "R": 0.05, "FTR": 0.0}, 10, kind="reference"))
    md = paper_tables(rows)
    assert "| m1 | 0.200 | 0.400 | 0.600 | 0.000 | 0.100 | 0.200 | 0.300 | 0.100 | 0.000 | 0.100 | 0.000 | 0.500 | 0.100 | 0.233 | 0.300 |" in md
    assert "Misinformed FTR↑" in md and "Explicit FTR↓" in md
    assert "| m1 | 0.100 | 0.400 |" in md  # the with-history table uses the breakdown
    assert "| popularity (ref) | 0.010 | 0.050 | 0.000 | – | – | – | – | – | – |" in md


def test_a_users_queries_are_one_unit_of_resampling(task):
    """Interest records and per_user > 1 give one user several queries (sharing the user's history and
    ground-truth pool): intervals resample users, a demographic group's queries together, else queries."""
    from recharness.tasks.recbench_plus.base import unit_of

    samples = []
    for sid, user, idx in (("a-h", "u1", 0), ("a-n", "u1", 0), ("b-h", "u1", 1), ("c-h", "u2", 2), ("c-n", "u2", 2)):
        samples.append({**_sample(sid), "source_user": user, "data_idx": idx, "with_history": sid.endswith("-h")})
    assert [unit_of(s) for s in samples] == ["user u1"] * 3 + ["user u2"] * 2
    assert unit_of({"id": "demographics-4.1-n", "with_history": False, "data_idx": 4}) == "record 4"
    assert unit_of({"id": "q7-h", "with_history": True}) == "query q7"
    preds = {s["id"]: _pred(task, s, ANSWER) for s in samples}
    u = task.units(samples, preds)
    assert u["P"].independent == 2 and u["valid_rate"].independent == 2  # two users, not five queries
    assert u["P"].point() == pytest.approx(task.score(samples, preds)["P"])
    assert (u["P"].point(), u["R"].point()) == (pytest.approx(1 / 4), pytest.approx(1 / 2))  # as by hand, above


def test_a_written_query_that_names_its_own_answers_is_not_used():
    """Appendix H tells the writing model not to name the subset's titles; a query that does would hand the
    answer to the model under test."""
    from recharness.tasks.recbench_plus.profile_tasks import names_its_answer

    titles = ["Silence of the Lambs, The (1991)", "The Silence of the Lambs (1991)", "Taxi Driver (1976)"]
    assert names_its_answer("I loved Silence of the Lambs, The (1991) and Taxi Driver (1976)...", titles)
    assert names_its_answer("Something as tense as the silence of the lambs, please", titles)
    assert not names_its_answer("Dark psychological thrillers with a detective, please", titles)
    assert names_its_answer("A big night out", ["Big (1988)"]) and not names_its_answer("bigger", ["Big (1988)"])


def test_cmr_says_how_many_queries_it_rests_on(task):
    """An official query over a relation the KG lacks (Cinematography) has no CMR: the score says which share
    of the queries CMR covers instead of averaging the others silently."""
    known = _sample("a")
    unknown = {**_sample("b"), "conditions": [["Cinematography", "Dante Spinotti"]], "satisfying": None}
    preds = {"a": _pred(task, known, ANSWER), "b": _pred(task, unknown, ANSWER)}
    m = task.score([known, unknown], preds)
    assert m["CMR"] == pytest.approx(2 / 4) and m["CMR_checkable"] == 0.5
    assert "CMR_checkable" not in task.score([known], {"a": preds["a"]})


def test_no_scored_query_gives_no_number():
    """No query scored (every answer missing): P, R and FTR are NaN, not 0.0 (FTR 0 is the best score of a
    condition task), and the counts say why."""
    import math

    from recharness.tasks.recbench_plus.evaluate import aggregate

    out = aggregate([None, None])
    assert all(math.isnan(out[k]) for k in ("P", "R", "FTR")) and "CMR" not in out
    assert (out["n_scored"], out["missing"]) == (0.0, 2.0)
    one = aggregate([None, {"P": 0.25, "R": 0.5, "FTR": 0.0, "CMR": 0.5}])
    assert (one["P"], one["R"], one["FTR"], one["CMR"], one["n_scored"]) == (0.25, 0.5, 0.0, 0.5, 1.0)


def test_a_sample_without_ground_truth_gets_no_precision_and_stops_nothing(task):
    """An older build's sample with an empty ground truth: no P or R for it, the others scored (before, the
    whole task's scoring raised)."""
    s, empty = _sample("a"), {**_sample("b"), "gt": []}
    m = task.score([s, empty], {"a": _pred(task, s, ANSWER), "b": _pred(task, empty, ANSWER)})
    assert m["P"] == pytest.approx(1 / 4) and m["R"] == pytest.approx(1 / 2) and m["n_scored"] == 2


def test_the_querys_own_film_is_dropped_before_its_title_twin_counts_as_a_hit():
    """An implicit query's reference film (101) that shares its title with a ground-truth item (1): naming it
    is repeating the query, not a hit (before, the twin swap came first and made it item 1: P = 1)."""
    from recharness.tasks.recbench_plus.evaluate import recommended

    parsed = {"item_ids": ["101", "5"], "twins": {"101": ["1", "101"], "1": ["1", "101"]}}
    assert recommended(parsed, None, wanted=["1", "2"], drop={"101"}) == ["5"]
    # the matcher may have picked the ground-truth id for that title: still the query's own film
    assert recommended({"item_ids": ["1", "5"], "twins": parsed["twins"]}, None, wanted=["1", "2"],
                       drop={"101"}) == ["5"]
    # without the query naming it, the twin stands for the ground truth as before
    assert recommended(parsed, None, wanted=["1", "2"]) == ["1", "5"]


def test_an_implicit_reference_film_never_shares_a_title_with_the_ground_truth():
    import numpy as np

    from recharness.kg.graph import ItemKG
    from recharness.tasks.recbench_plus.conditions import ConditionSampler, SharedRelation

    # items 0, 1, 2 by director D (the user's: the ground truth); 3 is another edition of item 0, 4 a film of D too
    kg = ItemKG(["0", "1", "2", "3", "4"], [(i, "Directed_by", "D") for i in "01234"], specific={"Directed_by"})
    pop = np.array([1.0, 1.0, 1.0, 100.0, 0.0])  # the twin is the most popular candidate
    sr = SharedRelation(pairs=(0,), items=np.array([0, 1, 2]))
    plain = ConditionSampler(kg, pop, ref_top=1)
    assert plain.implicit(sr, np.random.default_rng(0)).refs[0] == 3  # the title a copy would score with
    guarded = ConditionSampler(kg, pop, ref_top=1, twins={0: (3,), 3: (0,)})
    assert guarded.implicit(sr, np.random.default_rng(0)).refs[0] == 4


def test_a_template_interest_query_never_names_a_ground_truth_item():
    """A user who had a ground-truth item before the interest window (a repeat) had it named in the template query
    ("I recently enjoyed ... Film 1 ..."), handing the answer over; the shown history already left it out."""
    from recharness.core.types import BuildConfig
    from recharness.tasks.recbench_plus.profile_tasks import InterestTask

    items = pl.DataFrame({"item_id": [str(i) for i in range(1, 30)],
                          "title": [f"Film {i} ({1950 + i})" for i in range(1, 30)]})
    rows = []
    for u in range(6):  # every user: 10+u, then item 1 once before the shared window 1, 2, 3
        for t, i in enumerate([10 + u, 1, 20 + u, 1, 2, 3]):
            rows.append((f"u{u}", str(i), 4.0, t))
    inter = pl.DataFrame(rows, schema=["user_id", "item_id", "rating", "timestamp"], orient="row")
    ds = Dataset("toy-interest", inter, items, pl.DataFrame({"user_id": [f"u{u}" for u in range(6)]}),
                 meta={"domain": "movie"})
    t = InterestTask()
    samples = list(t.build(ds, BuildConfig(seed=0, options={"interest_len": 3, "interest_support": 5,
                                                            "history": "without"})))
    assert samples
    for s in samples:
        assert set(s["gt"]) == {"1", "2", "3"}
        assert "Film 1 (1951)" not in s["query"], s["query"]


def test_items_without_attributes_build_profile_queries_and_name_what_condition_queries_need():
    """A catalog of ids and titles (MicroLens): interest queries build (they need no KG; before, every task
    raised "no knowledge-graph relation"), condition queries say what they lack; users without an occupation
    give no demographics queries, said, not a ValueError."""
    from recharness.core.errors import ConfigError
    from recharness.core.types import BuildConfig
    from recharness.tasks.recbench_plus.profile_tasks import DemographicsTask, InterestTask

    items = pl.DataFrame({"item_id": [str(i) for i in range(1, 10)], "title": [f"Film {i}" for i in range(1, 10)]})
    rows = [(f"u{u}", str(i), 4.0, t) for u in range(6) for t, i in enumerate([4 + u % 3, 1, 2, 3])]
    inter = pl.DataFrame(rows, schema=["user_id", "item_id", "rating", "timestamp"], orient="row")
    users = pl.DataFrame({"user_id": [f"u{u}" for u in range(6)], "age": [25] * 6, "gender": ["F"] * 6})
    ds = Dataset("toy-plain", inter, items, users, meta={"domain": "movie"})
    cfg = BuildConfig(seed=0, options={"interest_len": 3, "interest_support": 5, "history": "without"})
    assert list(InterestTask().build(ds, cfg))
    with pytest.raises(ConfigError, match="no knowledge-graph relation"):
        list(ExplicitTask().build(ds, cfg))
    demo = DemographicsTask()
    assert list(demo.build(ds, BuildConfig(seed=0))) == []
    assert "occupation" in demo.why_none_made(ds, BuildConfig(seed=0))


def test_an_unknown_title_named_twice_is_one_wrong_entry(task):
    """The title parser no longer folds an exact repeat (a ranked list's places keep it); RecBench+'s list L still
    holds each recommendation once, unknown titles too: "Manhunter, Manhunter, Heat" is P 1/2, not 1/3."""
    s = _sample()
    p = _pred(task, s, "1. Manhunter (1986)\n2. Manhunter (1986)\n3. Heat (1995)\n4. Heat")
    assert p["parsed"]["strings"] == ["Manhunter (1986)", "Heat (1995)"] and p["parsed"]["item_ids"] == [None, "1"]
    assert task.score([s], {"q": p})["P"] == pytest.approx(0.5)
