"""CatalogMatcher on a small hand-made catalog (ML-1M spellings): each rule once."""

import polars as pl
import pytest

from recharness.matching import DEFAULT_THRESHOLD, CatalogMatcher, Match

CATALOG = {
    "1": "Toy Story (1995)",
    "3114": "Toy Story 2 (1999)",
    "2571": "Matrix, The (1999)",
    "908": "Boot, Das (1981)",
    "97": "Hate (Haine, La) (1995)",
    "29": "City of Lost Children, The (Cité des enfants perdus, La) (1995)",
    "293": "Professional, The (a.k.a. Leon: The Professional) (1994)",
    "47": "Seven (Se7en) (1995)",
    "1320": "Alien\ufffd (1992)",
    "1214": "Alien (1979)",
    "1200": "Aliens (1986)",
    "3054": "Pok\ufffdmon: The First Movie (1998)",
    "364": "Lion King, The (1994)",
    "1219": "Psycho (1960)",
    "2389": "Psycho (1998)",
    "2936": "Sullivan's Travels (1942)",
    "589": "Terminator 2: Judgment Day (1991)",
    "1240": "Terminator, The (1984)",
    "260": "Star Wars: Episode IV - A New Hope (1977)",
    "1196": "Star Wars: Episode V - The Empire Strikes Back (1980)",
    "1374": "Star Trek: The Wrath of Khan (1982)",
    "2000": "Lethal Weapon (1987)",
    "2001": "Lethal Weapon 2 (1989)",
    "356": "Forrest Gump (1994)",
    "3793": "X-Men (2000)",
    "2542": "Lock, Stock & Two Smoking Barrels (1998)",
    "1221": "Godfather: Part II, The (1974)",
    "858": "Godfather, The (1972)",
    "1250": "Bridge on the River Kwai, The (1957)",
}


@pytest.fixture(scope="module")
def m():
    return CatalogMatcher(CATALOG)


@pytest.mark.parametrize(
    "query, item_id",
    [
        ("The Matrix", "2571"),
        ("Matrix", "2571"),
        ("THE MATRIX (1999)", "2571"),
        ("Matrix, The (1999)", "2571"),
        ("Das Boot", "908"),
        ("The Boat (Das Boot) (1981)", "908"),  # RecBench+ ground-truth spelling
        ("La Haine", "97"),
        ("La Cité des enfants perdus", "29"),
        ("The City of Lost Children (1995)", "29"),
        ("Leon: The Professional", "293"),
        ("Se7en", "47"),
        ("Seven (1995)", "47"),
        ("Alien 3", "1320"),
        ("Alien³ (1992)", "1320"),
        ("Aliens", "1200"),  # the lost character is not "s"
        ("Pokémon: The First Movie", "3054"),
        ("Pokemon: The First Movie (1998)", "3054"),
        ("Godfather Part II", "1221"),
        ("The Godfather II (1974)", "1221"),
        ("The Godfather (1972)", "858"),
        ("Xmen", "3793"),
        ("X Men", "3793"),
        ("Lock, Stock and Two Smoking Barrels", "2542"),
        ("The Bridge on the River Kwai (1957)", "1250"),
    ],
)
def test_exact(m, query, item_id):
    r = m.match(query)
    assert (r.item_id, r.kind, r.score) == (item_id, "exact", 100.0)
    assert r.query == query and r.title == CATALOG[item_id]


def test_year_picks_among_remakes(m):
    assert m.match("Psycho (1960)").item_id == "1219"
    assert m.match("Psycho (1998)").item_id == "2389"
    assert m.match("Psycho (1961)").item_id == "1219"  # a year off by one still counts



@pytest.mark.parametrize("query", ["Psycho (1998 remake)", "Psycho (remake, 1998)", "Psycho (1998 version)",
                                   "Psycho [1998 film]"])
def test_a_year_tagged_remake_or_version_is_that_years_film(m, query):
    """"(1998 remake)" is Psycho (1998): it matched Psycho (1960), and beside it in a list the two merged as one."""
    assert m.match(query).item_id == "2389"
    ids, _ = m.resolve(f"1. Psycho (1960)\n2. {query}")
    assert ids == ["1219", "2389"]

def test_without_year_priority_then_catalog_order_decides():
    assert CatalogMatcher(CATALOG).match("Psycho").item_id == "1219"
    assert CatalogMatcher(CATALOG, priority={"2389": 10, "1219": 3}).match("Psycho").item_id == "2389"


def test_a_remake_outside_the_catalog_does_not_match(m):
    r = m.match("The Lion King (2019)")
    assert (r.item_id, r.kind) == (None, "none")
    assert m.match("The Lion King (1994)").item_id == "364"
    assert CatalogMatcher(CATALOG, year_tolerance=30).match("The Lion King (2019)").item_id == "364"


def test_subtitle_side_needs_the_exact_year(m):
    assert m.match("Terminator 2 (1991)").item_id == "589"
    assert m.match("Star Wars (1977)").item_id == "260"
    assert m.match("Star Wars: A New Hope (1977)").item_id == "260"
    assert m.match("Star Wars: The Empire Strikes Back (1980)").item_id == "1196"
    assert m.match("Star Trek II: The Wrath of Khan (1982)").item_id == "1374"
    assert m.match("Star Wars").kind == "none"  # which episode? no year, no guess
    assert m.match("Star Wars: Episode II - Attack of the Clones (2002)").kind == "none"


def test_fuzzy_catches_misspellings(m):
    r = m.match("Forest Gump (1994)")
    assert (r.item_id, r.kind) == ("356", "fuzzy")
    assert DEFAULT_THRESHOLD <= r.score < 100
    assert m.match("Sullivans Travles").item_id == "2936"


def test_fuzzy_respects_numbers_and_years(m):
    assert m.match("Toy Story 3").kind == "none"  # not Toy Story 2
    assert m.match("Lethal Weapon 3 (1992)").kind == "none"
    assert m.match("Lethal Weapon 4").kind == "none"
    assert m.match("Forest Gump (2015)").kind == "none"


def test_unknown_titles_are_kept(m):
    r = m.match("Inception (2010)")
    assert r == Match(None, "none", r.score, "Inception (2010)")
    assert m.match("").kind == "none"
    assert m.match("   ").kind == "none"


def test_threshold_is_applied():
    strict = CatalogMatcher(CATALOG, threshold=99)
    assert strict.match("Forest Gump (1994)").kind == "none"
    loose = CatalogMatcher(CATALOG, threshold=50)
    assert loose.match("Forest Gump (1994)").item_id == "356"


def test_inputs_mapping_pairs_and_frame():
    pairs = list(CATALOG.items())
    frame = pl.DataFrame({"item_id": list(CATALOG), "title": list(CATALOG.values())})
    for items in (CATALOG, pairs, frame):
        assert CatalogMatcher(items).match("Das Boot").item_id == "908"
    assert len(CatalogMatcher(pairs)) == len(CATALOG)
    assert CatalogMatcher([(7, "Heat (1995)")]).match("Heat").item_id == "7"  # ids become strings


def test_bracketed_qualifiers_shared_by_many_items_are_not_names():
    games = CatalogMatcher(
        [
            ("a", "Mario Kart DS (Nintendo DS)"),
            ("b", "New Super Mario Bros. (Nintendo DS)"),
            ("c", "Halo 3 (Legendary Edition)"),
            ("d", "Halo 3"),
        ]
    )
    assert games.match("Nintendo DS").kind == "none"
    assert games.match("Mario Kart DS").item_id == "a"
    assert games.match("Halo 3 (Legendary Edition)").item_id == "c"
    assert games.match("Halo 3").item_id == "d"


def test_match_many_keeps_order(m):
    out = m.match_many(["Das Boot", "Inception", "The Matrix"])
    assert [r.item_id for r in out] == ["908", None, "2571"]


def test_resolve(m):
    ids, unmatched = m.resolve(
        "1. The Matrix (1999)\n2. Inception (2010)\n3. Das Boot\n4. Matrix\n5. Forest Gump"
    )
    assert ids == ["2571", "908", "356"]  # in answer order, the repeat dropped
    assert unmatched == ["Inception (2010)"]


def test_resolve_rejoins_titles_split_at_commas(m):
    ids, unmatched = m.resolve("Toy Story, Lock, Stock and Two Smoking Barrels, Das Boot")
    assert ids == ["1", "2542", "908"] and unmatched == []


def test_resolve_keeps_verbatim_catalog_titles_whole():
    shop = CatalogMatcher(
        [
            ("a", "Exist Archive: The other side of the sky - PlayStation Vita"),
            ("b", "Marvel Ultimate Alliance"),
            ("c", "Marvel: Ultimate Alliance"),
            ("d", "HUHD Gaming Headset for 2.4Ghz, Xbox One, Xbox 360, PS4, PC, Noise Cancelling"),
            ("e", "Heat"),
        ]
    )
    assert shop.resolve("1. Exist Archive: The other side of the sky - PlayStation Vita\n2. Heat") == (["a", "e"], [])
    assert shop.resolve("HUHD Gaming Headset for 2.4Ghz, Xbox One, Xbox 360, PS4, PC, Noise Cancelling") == (["d"], [])
    # two items whose titles fold alike: the literal spelling decides
    assert shop.match("Marvel: Ultimate Alliance").item_id == "c"
    assert shop.match("Marvel Ultimate Alliance").item_id == "b"


def test_match_answer_reports_every_candidate(m):
    out = m.match_answer("1. Das Boot\n2. Inception (2010)\n3. Forest Gump")
    assert [(r.item_id, r.kind) for r in out] == [("908", "exact"), (None, "none"), ("356", "fuzzy")]


def test_resolve_refusal(m):
    assert m.resolve("I'm sorry, I can't help with that.") == ([], [])


@pytest.mark.parametrize(
    "text",
    ["x Toy Story and " * 5_000, '"Das Boot" ' * 10_000, "Toy, " * 20_000, ("Alien Aliens " * 60 + ". ") * 200, "And " * 30_000],
)
def test_titles_in_prose_cost_bounded_work(m, text):
    import time

    t0 = time.process_time()  # CPU time: a busy machine must not fail this
    out = m.match_answer(text)
    assert time.process_time() - t0 < 0.5
    assert len(out) <= 100


def test_an_unknown_entry_before_a_title_with_commas_keeps_its_place():
    """"Some Made Up Thing" joined to the next line by a comma matched that line's Amazon title through its
    side, so the invented entry vanished and every later title moved up a place (the review of 2026-11-29)."""
    from recharness.matching import CatalogMatcher

    title = ("Summer Crystal Hair Clip Sparkling Sequins, Double-Layered Alligator Clip Hair Bow Accessory For "
             "Women and Girls, Made in Korea, Daily, Party, Cosplay (Holographic)")
    m = CatalogMatcher([("1", title), ("2", "Heat (1995)"), ("3", "Lock, Stock and Two Smoking Barrels (1998)")])
    got = m.match_answer(f"1. Heat (1995)\n2. Some Made Up Thing\n3. {title}")
    assert [x.item_id for x in got] == ["2", None, "1"]
    # a title cut at its comma still joins back
    assert [x.item_id for x in m.match_answer("1. Lock\n2. Stock and Two Smoking Barrels (1998)")] == ["3"]
    # a join that is the item's whole title stays one entry, even where its second piece alone names that item
    # by its alternative title (the fifth review: "Heat, Blood In, Blood Out (...), Fargo" got an empty slot)
    m = CatalogMatcher([("1", "Blood In, Blood Out (a.k.a. Bound by Honor) (1993)"), ("2", "Heat (1995)"),
                        ("3", "Fargo (1996)")])
    got = m.match_answer("Heat, Blood In, Blood Out (a.k.a. Bound by Honor), Fargo")
    assert [x.item_id for x in got] == ["2", "1", "3"]
