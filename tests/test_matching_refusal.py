"""is_refusal: the Fail-to-Recommend decision (RecBench+ FTR)."""

import pytest

from recharness.matching import has_refusal_cue, is_refusal
from recharness.matching.parse import list_entry_body, parse_recommendations

REFUSALS = [
    "",
    "   \n\t",
    None,
    "None",
    "*None*",
    "N/A",
    "[]",
    "No recommendations.",
    # RecBench+ Appendix D.1, GPT-4o-mini
    "I'm sorry, but I am unable to provide movie recommendations specifically featuring cinematography by "
    "Ellery Ryan, as I do not have data on his work.",
    "I'm sorry, I can't help with that.",
    "There are no movies that match all of these criteria.",
    "I couldn't find any films directed by Scott Ambrozy.",
    "As an AI language model, I don't have access to a movie database.",
    "Unfortunately, I'm not aware of any books by that author.",
    "That person doesn't appear to exist, so I can't recommend films by them.",
    "<think>The user wants films by John Blick. I know none.</think>\nNone",
    "That's a great question! Movies are a wonderful way to relax.",  # no items at all
]

NOT_REFUSALS = [
    "1. Heat (1995)\n2. Ronin (1998)",
    "Mary Poppins, The Gnome-Mobile",
    "I Can't Sleep (1994)",  # a film, not a refusal
    "Sorry, Wrong Number (1948)",  # also a film
    # apologises, then recommends anyway: it did recommend
    "I'm sorry, but I couldn't find any movies with cinematography by John Blick. However, you might enjoy:\n"
    "1. Speed (1994)\n2. Falling Down (1993)",
    "There are no films shot by Scott Ambrozy; you probably mean Owen Roizman:\n- Network (1976)\n- The Exorcist (1973)",
]


@pytest.mark.parametrize("text", REFUSALS)
def test_refusals(text):
    assert is_refusal(text)


@pytest.mark.parametrize("text", NOT_REFUSALS)
def test_not_refusals(text):
    assert not is_refusal(text)


def test_matched_count_decides_when_the_answer_refuses_and_lists():
    text = "I'm sorry, I couldn't find exact matches. Maybe try:\n1. Some Made Up Film\n2. Another Invented Title"
    # a list of two titles after an apology recommends, even titles the catalog lacks (the paper's FTR: "fails to
    # generate recommended items"; a hallucinated title is still a recommendation)
    assert not is_refusal(text) and not is_refusal(text, matched=0) and not is_refusal(text, matched=1)
    hedge = "I don't know your exact tastes, but here are some picks:\n1. Inception (2010)\n2. Interstellar (2014)"
    assert not is_refusal(hedge, matched=0)
    # one unknown name after a refusal is no list: "Sorry, I can't help with that. Try IMDb." refuses
    assert is_refusal("I'm sorry, I couldn't find any movies like that. Try IMDb.", matched=0)
    # without refusal wording, naming only unknown items is a (bad) recommendation, not a refusal
    assert not is_refusal("1. Some Made Up Film\n2. Another Invented Title", matched=0)
    # one title with its year after an apology is meant as one (a film past the catalog, or invented): the same
    # sentence with a catalog title recommends, so this one does too (before: a decline, the catalog deciding)
    assert not is_refusal("I'm sorry, I couldn't find any films matching that. You might enjoy Zorblax Returns "
                          "(1999).", matched=0)
    assert not is_refusal("Sorry, nothing matched; you might enjoy Zorblax Returns (1999).", matched=0)
    # a dated title named in passing, not suggested, leaves the refusal a refusal
    assert is_refusal("I'm sorry, I can't recommend movies. My knowledge ends before Dune: Part Two (2024) came "
                      "out.", matched=0)
    assert is_refusal("I'm sorry, I can't help with that. Note that Barbie (2023) does not star him.", matched=0)
    # markup around the title, a list entry, or a commendation: still put forward (the review: each a refusal)
    for text in ("I'm sorry, nothing matched. You might enjoy *Zorblax Returns* (1999).",
                 "I'm sorry, nothing matched. You might enjoy \"Zorblax Returns\" (1999).",
                 "I'm sorry, nothing matched. Here is one pick:\n1. Zorblax Returns (1999)",
                 "I'm sorry, nothing matched. Zorblax Returns (1999) is a great pick."):
        assert not is_refusal(text, matched=0), text


def test_cue_detection():
    assert has_refusal_cue("Sorry, but I cannot recommend anything.")
    assert not has_refusal_cue("Sorry, Wrong Number (1948)")
    assert not has_refusal_cue("I Can't Sleep (1994)")


@pytest.mark.parametrize("mark", ["1. ", "(1) ", "#1 ", "# 1. ", "**1.** ", "1 - ", "- ", "\u2022 ", "\t* "])
def test_a_list_entry_is_one_definition_for_the_parser_and_the_ftr_check(mark):
    """Each marker the parser reads as a list entry also makes a dated title after an apology a suggestion (before,
    the FTR check had its own narrower list pattern: "#1", "**1.**" and "1 - " entries were read as a decline)."""
    line = mark + "Zorblax Returns (1999)"
    assert (list_entry_body(line) or "").lstrip("*- ") == "Zorblax Returns (1999)"
    assert parse_recommendations("I'm sorry, nothing matched. Here is one pick:\n" + line) == ["Zorblax Returns (1999)"]
    assert not is_refusal("I'm sorry, nothing matched. Here is one pick:\n" + line, matched=0)


@pytest.mark.parametrize("line", ["Zorblax Returns (1999)", "1.5 stars for Zorblax Returns (1999)", "*Zorblax* (1999)",
                                  "2001: A Space Odyssey (1968)", "### Picks", "1. ", "- "])
def test_no_list_entry(line):
    assert list_entry_body(line) is None
