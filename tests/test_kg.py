"""The item knowledge graph: relations from item columns, look-ups both ways."""

from __future__ import annotations

import polars as pl
import pytest

from recharness.kg import ItemKG, specs_for


def _movies() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "item_id": ["1", "2", "3", "4"],
            "title": ["A (1995)", "B (1998)", "C (1984)", "D (2001)"],
            "year": [1995, 1998, 1984, None],
            "genres": [["War", "Drama"], ["War"], ["Comedy"], []],
            "directors": [["Robert Zemeckis"], ["Steven Spielberg"], ["Robert Zemeckis"], None],
            "cast": [["Tom Hanks", "Gary Sinise"], ["Tom Hanks", "Matt Damon"], ["Michael  J. Fox"], []],
            "languages": [["English"], ["English", "Français"], ["No Language"], ["Pусский", "Russian"]],
            "certificate": ["PG-13", "R", "NR", None],
        },
        schema_overrides={"year": pl.Int64},
    )


def test_relations_and_both_way_lookups():
    kg = ItemKG.from_items(_movies())
    assert kg.relations == ("Directed_by", "Starring", "Genre", "Language", "Certificate", "Release_decade")
    assert kg.specific_relations == {"Directed_by", "Starring"}
    assert kg.values("1", "Starring") == {"Tom Hanks", "Gary Sinise"}
    assert kg.items_with("Starring", "Tom Hanks") == {"1", "2"}
    assert kg.items_with("Directed_by", "Robert Zemeckis") == {"1", "3"}
    assert kg.values("3", "Starring") == {"Michael J. Fox"}  # whitespace folded
    assert kg.values("2", "Release_decade") == {"1990s"} and kg.values("3", "Release_decade") == {"1980s"}
    assert kg.values("2", "Language") == {"English", "French"}
    assert kg.values("4", "Language") == {"Russian"}  # two spellings, one value
    assert kg.values("3", "Language") == frozenset()  # "No Language" is not a language
    assert kg.values("3", "Certificate") == frozenset()  # "NR" dropped
    assert not kg.knows("4", "Directed_by") and kg.knows("1", "Directed_by")
    assert kg.has("2", "Genre", "War") and not kg.has("3", "Genre", "War")
    assert not kg.has("9", "Genre", "War") and not kg.has("1", "Genre", "Western")
    assert kg.satisfying([("Starring", "Tom Hanks"), ("Genre", "War")]) == {"1", "2"}
    assert kg.satisfying([("Starring", "Tom Hanks"), ("Genre", "Drama")]) == {"1"}
    assert kg.satisfying([("Starring", "Nobody")]) == set()
    assert kg.satisfying([]) == set()
    assert kg.satisfies("1", [("Genre", "War"), ("Certificate", "PG-13")])
    assert not kg.satisfies("2", [("Genre", "War"), ("Certificate", "PG-13")])
    assert kg.facts("unknown") == []
    by = {s.relation: s for s in kg.stats()}
    assert (by["Starring"].values, by["Starring"].edges, by["Starring"].items) == (4, 5, 3)


def test_integer_paths_agree_with_string_api():
    kg = ItemKG.from_items(_movies())
    p = kg.pair_index[("Starring", "Tom Hanks")]
    q = kg.pair_index[("Genre", "War")]
    assert [kg.item_ids[i] for i in kg.intersect_pairs([p, q])] == ["1", "2"]
    m = kg.pairs_matrix()
    assert m.shape == (4, len(kg.pairs))
    for n, item in enumerate(kg.item_ids):
        assert {kg.pairs[c] for c in m[n].indices} == set(kg.facts(item))


def test_amazon_relations_where_present():
    items = pl.DataFrame({
        "item_id": ["a", "b", "c"],
        "title": ["x", "y", "z"],
        "main_category": ["Books", "Books", None],
        "store": ["Penguin", None, "Penguin"],
        "categories": [["Books", "Fiction"], [], ["Kindle"]],
        "author": ["Le Guin", "Le Guin", None],
    })
    kg = ItemKG.from_items(items)
    assert set(kg.relations) == {"Store", "Author", "Category"}
    assert kg.specific_relations == {"Store", "Author"}
    assert kg.values("a", "Category") == {"Books", "Fiction"}
    assert kg.items_with("Author", "Le Guin") == {"a", "b"}
    assert kg.items_with("Store", "Penguin") == {"a", "c"}


def test_errors_name_the_problem():
    with pytest.raises(ValueError, match="no knowledge-graph relation"):
        ItemKG.from_items(pl.DataFrame({"item_id": ["1"], "title": ["t"]}))
    with pytest.raises(ValueError, match="item_id"):
        ItemKG.from_items(pl.DataFrame({"title": ["t"]}))
    with pytest.raises(ValueError, match="duplicate"):
        ItemKG(["1", "1"], [])
    with pytest.raises(KeyError, match="unknown item"):
        ItemKG(["1"], [("2", "Genre", "War")])
    assert {s.column for s in specs_for(["item_id", "title", "store"])} == {"store"}


def test_ml1m_graph(ml1m):
    kg = ItemKG.from_dataset(ml1m)
    assert len(kg) == ml1m.items.height
    # the official RecBench+ example: Tom Hanks war movies are Forrest Gump (356) and Saving Private Ryan (2028)
    assert {"356", "2028"} <= kg.satisfying([("Starring", "Tom Hanks"), ("Genre", "War")])
    assert kg.items_with("Directed_by", "James Cameron") >= {"1200", "1240", "589"}
    assert kg.values("1", "Release_decade") == {"1990s"}
