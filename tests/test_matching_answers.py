"""Free-text answers in the shapes real outputs take, matched to the exact ranked item list (issue:
score what others published). On the built-in ML-1M catalog."""

from __future__ import annotations

import pytest

from recharness.matching import CatalogMatcher


@pytest.fixture(scope="module")
def ml1m_matcher(ml1m):
    return CatalogMatcher(list(zip(ml1m.items["item_id"].to_list(), ml1m.items["title"].to_list())))


@pytest.mark.parametrize("answer, ids", [
    ("[1. Titanic (1997)], [2. Jackie Brown (1997)]", ["1721", "1729"]),  # bracketed, in one line
    ("[Titanic (1997)] [Heat (1995)]", ["1721", "6"]),
    ("Heat (1995) - Ronin (1998)", ["6", "2278"]),  # two titles in one "A - B" line
    ("Heat (1995) – Ronin (1998)", ["6", "2278"]),
    ("Star Trek: Generations (1994), Star Trek: First Contact (1996)", ["329", "1356"]),  # colons in a comma list
    ("1. Crow, The (1994)\n2. Heat", ["353", "6"]),  # an article moved, a missing year
    ("- Toy Story (1995)\n- Fargo (1996)\n- Casablanca (1942)", ["1", "608", "912"]),  # bulleted
    ("Toy Story; Fargo; Casablanca", ["1", "608", "912"]),  # semicolons, no years
    ("- Schindler&#39;s List (1993)\n- Fargo", ["527", "608"]),  # an HTML entity
    ("Lock, Stock and Two Smoking Barrels (1998)", ["2542"]),  # commas inside one title: not split
    ("Star Trek: Generations (1994)", ["329"]),
    # colons in a comma list, one piece exact and the other misspelled (fuzzy, one item): both, in order
    ("Star Trek: Generations (1994), Star Trek: Frist Contact (1996)", ["329", "1356"]),
    ("Star Trek: Genrations (1994), Star Trek: First Contact (1996)", ["329", "1356"]),
    ("Star Trek: Genrations, Star Trek: First Contact", ["329", "1356"]),
    # bracketed: after a label, with a closing ".", one bracket a line
    ("Recommendations: [1. Titanic (1997)], [2. Jackie Brown (1997)]", ["1721", "1729"]),
    ("[1. Titanic (1997)], [2. Jackie Brown (1997)].", ["1721", "1729"]),
    ("[1. Titanic (1997)],\n[2. Jackie Brown (1997)]", ["1721", "1729"]),
    ("[Titanic (1997)]\n[Jackie Brown (1997)]\n[Heat (1995)]", ["1721", "1729", "6"]),
    # a numbered list on one line
    ("1. Toy Story (1995) 2. Fargo (1996) 3. Casablanca (1942)", ["1", "608", "912"]),
    ("1) Toy Story, 2) Fargo, 3) Casablanca", ["1", "608", "912"]),
    ("Here are my recommendations: 1. Heat (1995) 2. Ronin (1998) 3. Fargo (1996)", ["6", "2278", "608"]),
    ("1. Apollo 13 (1995) 2. Toy Story 2 (1999) 3. Fargo (1996)", ["150", "3114", "608"]),  # numbers in titles
    # "A - B" without years; a dash before an explanation is no second title
    ("Heat - Ronin", ["6", "2278"]),
    ("1. Heat - a heist thriller by Michael Mann\n2. Ronin - car chases", ["6", "2278"]),
    ("Heat (1995) - Ronin (1998) - Fargo (1996)", ["6", "2278", "608"]),
    # numbered and bulleted, colons and dashes inside titles
    ("1. Star Wars: Episode IV - A New Hope (1977)\n2. Star Trek: First Contact (1996)\n3. Heat (1995)",
     ["260", "1356", "6"]),
    ("* Toy Story\n* Fargo\n* Casablanca", ["1", "608", "912"]),
    ("Star Wars: Episode IV - A New Hope, Star Trek: First Contact, Heat", ["260", "1356", "6"]),
    # articles moved, inside a comma list; commas inside titles in a comma list
    ("Toy Story, Crow, The, Fargo", ["1", "353", "608"]),
    ("Lock, Stock and Two Smoking Barrels (1998), Heat (1995), Crow, The (1994)", ["2542", "6", "353"]),
    ("Sex, Lies, and Videotape (1989)", ["1186"]),
    # semicolons with years; HTML entities
    ("Heat (1995); Fargo (1996); Casablanca (1942)", ["6", "608", "912"]),
    ("1. Beauty and the Beast (1991)\n2. Schindler&#8217;s List (1993)\n3. Lock, Stock &amp; Two Smoking Barrels",
     ["595", "527", "2542"]),
    # an apology and a suggestion in one sentence: the suggestion counts (the whole sentence was skipped)
    ("I don't have a complete filmography, but you might enjoy Alien (1979) and Contact (1997).", ["1214", "1584"]),
    ("I can't find Tom Hanks in GoodFellas; however, Toy Story (1995) and Toy Story 2 (1999) are great.",
     ["1", "3114"]),
    ("Sorry, I can't recommend Heat (1995) as it is not a comedy.", []),  # the apology's own title: not suggested
    ("Nothing But Trouble (1991) is fun.", ["2265"]),  # "but" inside a title, no apology: not split
    # a bold "Title: Subtitle" is the emphasised span, not cut at its colon (it hit Alien (1979), Mission, The)
    ("1. **Alien: Resurrection** - the fourth film in the series.", ["1690"]),
    ("1. **Mission: Impossible** - spy thriller.", ["648"]),
    # a title-shaped run in prose that is not a title: no hit on its known part ("Aliens", "Heat")
    ("You might enjoy Cowboys and Aliens for a genre mash-up.", []),
    ("You might enjoy Heat and Dust, a Merchant Ivory film.", []),
    ("You should watch Heat, Casablanca and Fargo.", ["6", "912", "608"]),  # every part a title: all three
    # one sentence the parser took for a title and the catalog lacks: the title its prose names
    ("Consider Sense and Sensibility for a twist.", ["17"]),
    # a list entry that is a sentence naming a title: that title, in its place, not a slot lost on the sentence
    ("1. Matrix, The (1999)\n2. I think you would also enjoy Fargo (1996) because of its dark humor.\n3. Heat (1995)",
     ["2571", "608", "6"]),
    ("1. Another great pick is Casablanca\n2. Heat (1995)", ["912", "6"]),
    # an invented title holding a real one is no sentence: unmatched, as it stands (not Lord of the Rings (1978))
    ("1. The Lord of the Rings: Heat Returns (2005)\n2. Heat (1995)", [None, "6"]),
    ("1. If you liked Heat (1995), try something darker\n2. Casablanca (1942)", [None, "912"]),
    # a film named as the user's taste is no pick; the undated pick after it is found in the prose
    ("If you liked Heat (1995), you'll love Ronin.", ["2278"]),
    ("Since you enjoyed Ronin (1998), you'll love Heat and Fargo.", ["6", "608"]),
    ("If you loved Aliens (1986), you might enjoy other Sigourney Weaver films.", []),  # a name is no title
    # a person's credit after a title in prose: the title (the sixth review's FTR flips once the taste film was
    # dropped); a possessive is not cut, nor a one-word "credit" (the seventh review: "Pan's Labyrinth" read as
    # Labyrinth (1986), "Life with Father" as Life (1999))
    ("If you liked Ronin (1998), consider Heat by Michael Mann.", ["6"]),
    ("You should watch Gone with the Wind by Victor Fleming.", ["920"]),
    ("You should watch Pan's Labyrinth.", []),
    ("You should watch Life with Father.", []),
    # names listed after a credit are part of it; a possessive before a title is not cut (a review found the cut
    # read "Watch The Preacher's Wife." as The Wife (1995) and "Denis Villeneuve's Dune" as Dune (1984))
    ("You should watch Heat with Al Pacino and Robert De Niro, and Ronin.", ["6", "2278"]),
    ("Watch Heat with Al Pacino and Fargo.", ["6", "608"]),
    ("Watch Ferris Bueller's Day Off.", ["2918"]),
    ("Watch The Preacher's Wife.", ["1363"]),
    ("Consider Big Momma's House.", ["3646"]),
    ("Try Denis Villeneuve's Dune.", [None]),
    # a marked word in a statement line does not hide its dated picks (the sixth review)
    ('The user has watched "Ronin" and "GoodFellas". The next movie is Heat (1995).', ["6"]),
    ("The user is a **big fan** of crime films. The next movie they will watch is Heat (1995).", ["6"]),
    ("I'm not sure. Fans of Heat (1995) might like Ronin.", ["2278"]),
    ("Fans of Heat will enjoy Ronin.", ["2278"]),
    ("1. Ronin (1998) - as tense as Heat (1995)\n2. Casablanca (1942)", ["2278", "912"]),
])
def test_answer_shapes_give_the_exact_ranked_items(ml1m_matcher, answer, ids):
    assert [m.item_id for m in ml1m_matcher.match_answer(answer)] == ids


def test_a_title_with_two_ids_is_a_hit_on_either_once():
    from recharness.tasks.llmrec.common import CatalogContext
    from recharness.tasks.llmrec.sequential import SequentialTask

    ctx = CatalogContext(CatalogMatcher([("246", "Chasing Amy (1997)"), ("268", "Chasing Amy (1997)"), ("6", "Heat (1995)")]))
    parsed = ctx.resolve("1. Heat (1995)\n2. Chasing Amy (1997)")
    assert parsed["items"] == ["6", "246"] and parsed["twins"] == {"246": ["246", "268"]}
    task = SequentialTask()
    sample = {"id": "s", "task": "sequential", "seen": [], "n_recs": 10, "target": "268"}
    assert task.ranked(sample, {"parsed": parsed}) == ["6", "268"]  # the target is hit at rank 2, once
    assert task.score([sample], {"s": {"parsed": parsed, "valid": True}})["HR@5"] == 1.0


def test_an_answer_naming_no_catalog_item_is_counted_apart():
    from recharness.tasks.llmrec.common import CatalogContext
    from recharness.tasks.llmrec.sequential import SequentialTask

    ctx = CatalogContext(CatalogMatcher([("6", "Heat (1995)"), ("1", "Toy Story (1995)")]))
    task = SequentialTask()
    task.ctx = ctx
    samples = [{"id": f"s{k}", "task": "sequential", "seen": [], "n_recs": 10, "target": "6"} for k in range(4)]
    texts = ["1. Heat (1995)", "1. Zorblax Returns\n2. Quux (2031)", "I'm sorry, I can't help with that.", "1. Toy Story"]
    preds = {s["id"]: {**task.parse(s, x).__dict__, "parsed": task.parse(s, x).value} for s, x in zip(samples, texts)}
    m = task.score(samples, preds)
    assert [p["valid"] for p in preds.values()] == [True, True, False, True]
    assert m["unrecognised_rate"] == pytest.approx(1 / 4)  # s1: named two titles, the catalog knows neither
    assert task.units(samples, preds)["unrecognised_rate"].point() == pytest.approx(1 / 4)


def test_pathological_answers_parse_in_linear_time():
    """Untrusted text: a long line of brackets ending otherwise backtracked exponentially (40 entries did not finish in
    30 s), and an entry of thousands of separators re-read its rest at each one."""
    import time

    from recharness.matching.parse import parse_recommendations

    for text in ("[a] " * 40 + "[", "Recommendations: " + " ".join(f"[Title {i}]" for i in range(400)) + " Enjoy!",
                 "A…" * 10000, "." * 20000):
        t0 = time.process_time()
        parse_recommendations(text)
        assert time.process_time() - t0 < 2.0, text[:40]


def test_runs_of_any_whitespace_are_read_in_linear_time(ml1m_matcher):
    """A person's name (`_PERSON_RE`) once read "\\s+(?:de|...)?\\s*", which can cut a run of spaces between two
    words in as many ways as it is long, and `_SEPARATORS_RE` reread a run from each of its places; only spaces and
    tabs were collapsed first, so runs of no-break spaces took seconds (a review: 5-56 s for 19,000-32,000)."""
    import time

    nb = "\u00a0"
    for text in ("Watch Heat by Ab" + " " * 19000 + "Cd Ef Gh Ij.", "Watch Heat" + nb * 19000 + "now.",
                 "Heat - " + (nb + "\t") * 16000 + "a thriller", "Watch Heat by Ab" + nb * 2000 + "Cd" + nb * 2000 + "Ef"):
        t0 = time.process_time()
        ml1m_matcher.match_answer(text)
        assert time.process_time() - t0 < 2.0, repr(text[:20])


def test_a_title_repeated_word_for_word_keeps_its_place():
    """"1. Fargo 2. Fargo 3. Heat" put Heat second: the parser folded an exact repeat, while a repeat spelled
    otherwise ("Fargo (1996)") kept its place, as `listed_slots` says every repeat does. Heat is third now."""
    from recharness.matching import parse_candidates, parse_recommendations
    from recharness.tasks.llmrec.common import CatalogContext
    from recharness.tasks.llmrec.sequential import SequentialTask

    assert [c.title for c in parse_candidates("1. Fargo\n2. Fargo\n3. Heat")] == ["Fargo", "Fargo", "Heat"]
    assert parse_recommendations("1. Fargo\n2. Fargo\n3. Heat") == ["Fargo", "Heat"]  # the titles it names
    ctx = CatalogContext(CatalogMatcher([("608", "Fargo (1996)"), ("6", "Heat (1995)")]))
    task = SequentialTask()
    sample = {"id": "s", "task": "sequential", "seen": [], "n_recs": 10, "target": "6"}
    for text in ("1. Fargo\n2. Fargo\n3. Heat", "1. Fargo\n2. Fargo (1996)\n3. Heat", "Fargo, Fargo, Heat"):
        parsed = ctx.resolve(text)
        assert parsed["slots"] == ["608", "608", "6"] and parsed["items"] == ["608", "6"], text
        m = task.score([sample], {"s": {"parsed": parsed, "valid": True}})
        assert m["MRR"] == pytest.approx(1 / 3), text


def test_a_real_title_named_twice_is_two_matched_places():
    """matched_share counted distinct matched items over every named title: once exact repeats were kept, a model
    looping on real titles ("Heat, Alien, Heat, Alien") scored 0.5, like one inventing half its titles. Places
    now count on both sides; an invented title named twice is two unmatched places."""
    from recharness.matching.answers import matched_named
    from recharness.tasks.llmrec.common import CatalogContext
    from recharness.tasks.llmrec.sequential import SequentialTask

    ctx = CatalogContext(CatalogMatcher([("608", "Fargo (1996)"), ("6", "Heat (1995)"), ("1214", "Alien (1979)")]))
    task = SequentialTask()
    sample = {"id": "s", "task": "sequential", "seen": [], "n_recs": 10, "target": "6"}
    for text, share in (("1. Heat\n2. Alien\n3. Heat\n4. Alien", 1.0), ("1. Fargo\n2. Fargo (1996)\n3. Heat", 1.0),
                        ("1. Zorblax\n2. Zorblax\n3. Heat\n4. Alien", 0.5)):
        parsed = ctx.resolve(text)
        assert task.score([sample], {"s": {"parsed": parsed, "valid": True}})["matched_share"] == pytest.approx(share)
        assert task.units([sample], {"s": {"parsed": parsed, "valid": True}})["matched_share"].point() \
            == pytest.approx(share)
    # a record written before places: its matched items over its titles
    assert matched_named({"items": ["6"], "strings": ["Heat", "Zorblax"]}) == (1, 2)


def test_a_title_made_of_a_repeated_title_is_that_title(ml1m_matcher):
    """"Niagara, Niagara" (1997) was read as Niagara (1953) twice once exact repeats were kept; list lines of one
    title stay two entries."""
    ids = lambda text: [m.item_id for m in ml1m_matcher.match_answer(text)]  # noqa: E731
    assert ids("Niagara, Niagara") == ["1811"]
    assert ids("I'd suggest: Niagara, Niagara") == ["1811"]
    assert ids("Heat, Niagara, Niagara") == ["6", "1811"]
    assert ids("1. Niagara\n2. Niagara\n3. Heat") == ["2939", "2939", "6"]
    # the join where the pieces stand, not anywhere in the answer (the final review: both gave 1811 for entries 2-3)
    assert ids("1. Niagara, Niagara\n2. Niagara\n3. Niagara\n4. Heat") == ["1811", "2939", "2939", "6"]
    assert ids("1. Niagara\n2. Niagara\n3. Heat\n\nAlso consider Niagara, Niagara.") == ["2939", "2939", "6"]
    # a title inside the candidate before it, or in the reasoning, is not where the join stands (the last review)
    got = ids("You enjoyed Niagara. Recommendations: Heat, Niagara, Niagara")
    assert got[-1] == "1811" and "2939" not in got, got
    assert ids("<think>Heat is good. Niagara (1953) too.</think>Heat, Niagara, Niagara") == ["6", "1811"]
    # a title named twice whose join matches another item by an alias side is that title twice, not the alias's
    # item ("Bewegte Mann, Der" is film 811)
    twice = "Maybe, Maybe Not (Bewegte Mann, Der) (1994)"
    assert ids(f"{twice}, {twice}, Contender, The (2000)") == ["860", "860", "3952"]
    assert ids(f"{twice}, {twice}") == ["860", "860"]
    star = "Star Wars: Episode IV - A New Hope (1977)"
    assert ids(f"{star}, {star}") == ["260", "260"]
