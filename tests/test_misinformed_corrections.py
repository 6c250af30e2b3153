"""A misinformed query's falsely claimed film leaves the list L only when the answer corrects or refuses the claim
in the sentence naming the film or the claimed value, never because of an unrelated note, never when it is listed.

Modelled on ml-1m sample `misinformed-0-h`: "I loved Richard O'Brien in Aliens (1986)" (false); ground truth
Rocky Horror (2657) and Dark City (1748)."""

from __future__ import annotations

import polars as pl
import pytest

from recharness.data.store import Dataset
from recharness.matching.cues import has_correction_cue
from recharness.tasks.recbench_plus.condition_tasks import ExplicitTask


def _toy() -> Dataset:
    items = pl.DataFrame({
        "item_id": ["1200", "1748", "2657", "1"],
        "title": ["Aliens (1986)", "Dark City (1998)", "Rocky Horror Picture Show, The (1975)", "Heat (1995)"],
        "year": [1986, 1998, 1975, 1995],
        "genres": [["Sci-Fi"], ["Sci-Fi"], ["Comedy"], ["Crime"]],
        "directors": [["James Cameron"], ["Alex Proyas"], ["Jim Sharman"], ["Michael Mann"]],
        "cast": [["Sigourney Weaver"], ["Richard O'Brien"], ["Richard O'Brien"], ["Al Pacino"]],
    })
    inter = pl.DataFrame({"user_id": ["u1", "u1", "u2", "u2"], "item_id": ["1200", "1748", "2657", "1"],
                          "rating": [5.0, 4.0, 5.0, 3.0], "timestamp": [1, 2, 1, 2]})
    return Dataset("toy-mis", inter, items, pl.DataFrame({"user_id": ["u1", "u2"]}), meta={"domain": "movie"})


MIS = {"id": "m", "task": "misinformed", "conditions": [["Starring", "Richard O'Brien"]],
       "stated_conditions": [["Starring", "Richard O'Brien"]], "gt": ["2657", "1748"], "satisfying": ["1748", "2657"],
       "k": None, "ref_k": 10, "history": [], "groups": ["conditions=1", "history=without"],
       "misinformed": {"relation": "Starring", "value": "Richard O'Brien",
                       "errorInfo": {"movies": ["Aliens (1986)"], "movieIds": [1200]}}}


@pytest.fixture(scope="module")
def task():
    t = ExplicitTask()
    t.setup(_toy())
    return t


def _score(task, text):
    p = task.parse(MIS, text)
    m = task.score([MIS], {"m": {"id": "m", "parsed": p.value, "valid": p.valid, "output": text}})
    return {k: m[k] for k in ("P", "R", "FTR", "CMR") if k in m}


LISTED = "1. Aliens (1986)\n2. Dark City (1998)"


@pytest.mark.parametrize("note", ["\n\nNote: release years may be incorrect.", "\n\nSorry, I may be mistaken about the years.",
                                  "\n\nNote: Richard O'Brien is not actually in Aliens."])
def test_note_elsewhere_does_not_drop_the_listed_claimed_film(task, note):
    base = _score(task, LISTED)
    assert (base["P"], base["CMR"], base["FTR"]) == (0.5, 0.5, 0.0)
    assert _score(task, LISTED + note) == base  # Aliens is still a (wrong) recommendation


def test_lone_listed_claimed_film_with_unrelated_note_is_not_ftr(task):
    m = _score(task, "1. Aliens (1986)\n\nNote: the release year may be incorrect.")
    assert (m["FTR"], m["P"], m["CMR"]) == (0.0, 0.0, 0.0)


@pytest.mark.parametrize("text", [
    "Aliens (1986) stars Sigourney Weaver, not Richard O'Brien.",
    "Richard O'Brien was never in Aliens, so your premise is off.",
    "I'm sorry, but Richard O'Brien did not appear in Aliens (1986).",
    "Aliens (1986) does not feature Richard O'Brien.",
])
def test_correction_in_the_films_sentence_is_ftr(task, text):
    m = _score(task, text)
    assert m["FTR"] == 1.0 and m["P"] == 0.0 and "CMR" not in m


def test_correction_then_right_list(task):
    m = _score(task, "Aliens (1986) stars Sigourney Weaver, not Richard O'Brien. He is in:\n"
                     "1. Dark City (1998)\n2. The Rocky Horror Picture Show (1975)")
    assert (m["P"], m["R"], m["CMR"], m["FTR"]) == (1.0, 1.0, 1.0, 0.0)


def test_correction_cue_patterns():
    assert has_correction_cue("Aliens stars Sigourney Weaver, not Richard O'Brien.", "Richard O'Brien")
    assert has_correction_cue("Directed by James Cameron, not by Michael Mann.", "Michael Mann")
    assert has_correction_cue("Tom Hanks was never in GoodFellas.")
    assert not has_correction_cue("Aliens stars Sigourney Weaver, not Richard O'Brien.")  # no claimed value given
    assert not has_correction_cue("Sigourney Weaver stars in Aliens.", "Richard O'Brien")


def test_never_with_another_verb_is_no_correction_and_a_number_value_is_text():
    """'was never actually a box-office flop' praises the film; a claimed value read as a number is text."""
    from recharness.matching.cues import has_correction_cue
    from recharness.tasks.recbench_plus.evaluate import claim_rejected

    for praise in ("Aliens (1986) was never actually a box-office flop.", "It has never started to feel dated.",
                   "Aliens is never directly scary."):
        assert not has_correction_cue(praise), praise
    assert has_correction_cue("Richard O'Brien was never in Aliens.") and has_correction_cue("He has never starred in it.")
    assert claim_rejected("Heat (1995) is great.", ["Heat (1995)"], 1994) is False


def test_a_correction_that_names_no_film_is_the_misinformed_querys_right_answer():
    """"O'Brien was never in that film": the premise rejected, nothing recommended, FTR 1 (what the paper's FTR
    rewards on a misinformed query). It was invalid ("no titles and no refusal"), scored as unanswered: FTR 0."""
    from recharness.tasks.recbench_plus.condition_tasks import MisinformedTask

    t = MisinformedTask()
    t.setup(_toy())
    for text in ("Richard O'Brien was never in that film, so the premise is incorrect.",
                 "That film doesn't feature Richard O'Brien."):
        p = t.parse(MIS, text)
        assert p.valid, (text, p.error)
        m = t.score([MIS], {"m": {"id": "m", "parsed": p.value, "valid": p.valid, "output": text}})
        assert m["FTR"] == 1.0 and m["valid_rate"] == 1.0, m
    # an answer with neither titles nor a refusal nor a correction stays invalid: the worst FTR for this type
    text = "Here are some thoughts about the cinema of the eighties."
    p = t.parse(MIS, text)
    assert not p.valid
    assert t.score([MIS], {"m": {"id": "m", "parsed": p.value, "valid": False, "output": text}})["FTR"] == 0.0
    # an explicit query's sample (no false claim) gains nothing from correction words
    plain = {k: v for k, v in MIS.items() if k != "misinformed"}
    assert not t.parse(plain, "Richard O'Brien was never in that film.").valid


@pytest.mark.parametrize("text", [
    "Actually, Aliens (1986) stars Sigourney Weaver.",
    "Aliens (1986) was actually directed by James Cameron, and stars Sigourney Weaver.",
    "In fact, Aliens (1986) starred Sigourney Weaver.",
])
def test_an_affirmative_correction_rejects_the_claim(task, text):
    """The true credit, marked as a correction, rejects the premise like a negated one: the claimed film is not a
    recommendation (it was scored as one: P 0, FTR 0)."""
    assert has_correction_cue(text, "Richard O'Brien") and not has_correction_cue(text)  # whose credit: unknown
    m = _score(task, text)
    assert m["FTR"] == 1.0 and m["P"] == 0.0 and "CMR" not in m


@pytest.mark.parametrize("text", ["Yes! Richard O'Brien actually starred in Aliens (1986).",
                                  "In fact, Aliens (1986) stars Richard O'Brien as the android.",
                                  "Aliens (1986) actually stars O'Brien, a great choice!"])
def test_an_affirmation_of_the_false_claim_is_no_correction(task, text):
    """"Actually ... stars <the claimed value>" agrees with the premise: it scored as a correction, FTR 1, the best
    a misinformed query can get."""
    assert not has_correction_cue(text, "Richard O'Brien")
    assert _score(task, text)["FTR"] == 0.0


@pytest.mark.parametrize("praise", ["Aliens (1986) actually features great effects.",
                                    "Aliens (1986) is actually a fine film starring Sigourney Weaver.",
                                    "Actually, I think you will love Aliens (1986)."])
def test_praise_with_actually_is_no_correction(task, praise):
    assert not has_correction_cue(praise, "Richard O'Brien")
    m = _score(task, "1. Aliens (1986)\n2. Dark City (1998)\n\n" + praise)
    assert (m["P"], m["CMR"], m["FTR"]) == (0.5, 0.5, 0.0)  # Aliens is still a (wrong) recommendation


def test_a_sentence_adverb_opening_a_line_is_no_title():
    """"Actually, Aliens (1986) stars ..." was split at its comma into the titles "Actually" and "Aliens (1986)"."""
    from recharness.matching.parse import parse_recommendations

    assert parse_recommendations("Actually, Aliens (1986) stars Sigourney Weaver.") == ["Aliens (1986)"]
    assert parse_recommendations("In fact, Heat (1995) stars Al Pacino.") == ["Heat (1995)"]
    assert parse_recommendations("Heat, Fargo, Casablanca") == ["Heat", "Fargo", "Casablanca"]



@pytest.mark.parametrize("text", ["Correction: Richard O'Brien does not appear in that film.",
                                  "Just to clarify: that claim is incorrect, O'Brien was never in it."])
def test_a_labelled_correction_is_a_decline_not_a_title(text):
    """The label ("Correction:") was read as an unmatched title: FTR 0, CMR 0, where the same sentence without it
    scores FTR 1."""
    from recharness.tasks.recbench_plus.condition_tasks import MisinformedTask

    t = MisinformedTask()
    t.setup(_toy())
    p = t.parse(MIS, text)
    assert p.valid and p.value["ftr"] and p.value["strings"] == [], p
    m = t.score([MIS], {"m": {"id": "m", "parsed": p.value, "valid": p.valid, "output": text}})
    assert m["FTR"] == 1.0 and "CMR" not in m


def test_a_correction_then_an_unknown_suggestion_still_recommends():
    from recharness.tasks.recbench_plus.condition_tasks import MisinformedTask

    t = MisinformedTask()
    t.setup(_toy())
    p = t.parse(MIS, "Richard O'Brien isn't in Aliens.\n1. Shock Treatment (1981)")
    assert p.valid and not p.value["ftr"] and p.value["strings"] == ["Shock Treatment (1981)"], p
    assert p.value["item_ids"] == [None]  # a film the catalog lacks: still a recommendation, not a decline
    # the suggestion in the correcting sentence itself (before: read as part of the correction, FTR 1)
    text = "Richard O'Brien was never in that film, but you could try Made Up Movie (2001) and Another Fake Film (1999)."
    p = t.parse(MIS, text)
    assert p.valid and not p.value["ftr"] and len(p.value["strings"]) == 2, p
    # a suggesting word after the label does not undo the label's correction
    for text in ("**Correction**: Try as I might, Richard O'Brien was never in that film.",
                 "**Correction**: You might consider that Richard O'Brien was never in that film."):
        p = t.parse(MIS, text)
        assert p.valid and p.value["ftr"] and p.value["strings"] == [], (text, p)


def test_an_empty_or_cut_off_answer_to_a_misinformed_query_is_no_decline():
    """Empty content (max_tokens spent on reasoning, a filter) and cut-off reasoning with refusal words in it were
    valid declines: FTR 1, the best a misinformed query can score."""
    from recharness.tasks.recbench_plus.condition_tasks import MisinformedTask

    t = MisinformedTask()
    t.setup(_toy())
    for text in ("", "   ", "<think>I'm not aware of that. Let me list films: Big (1988), Forr"):
        p = t.parse(MIS, text)
        assert not p.valid, text
        m = t.score([MIS], {"m": {"id": "m", "parsed": p.value, "valid": p.valid, "output": text}})
        assert m["FTR"] == 0.0
    p = t.parse(MIS, "<think>Hmm.</think>None.")  # an explicit "None" after the reasoning is a decline
    assert p.valid and p.value["ftr"]


@pytest.mark.parametrize("body, title", [
    ("Tom Hanks has starred in some movies, but he was never in Aliens.", "Aliens"),
    ("Tom Hanks was not in Try Seventeen.", "Try Seventeen"),
    ("Tom Hanks does not appear in How About You.", "How About You"),
])
def test_a_suggesting_word_inside_a_title_or_phrase_does_not_end_the_correction(body, title):
    """"some movies", "Try", "How About" cut the correcting sentence before the title it corrects, so the answer
    read as a recommendation of it (the review of 2026-11-29); a cue opening a clause still ends it."""
    from recharness.tasks.recbench_plus.base import correction_only

    assert correction_only(body, [title], "Tom Hanks")
    assert not correction_only(f"Tom Hanks was never in that film, but you could try {title}.", [title], "Tom Hanks")
    assert not correction_only(f"Tom Hanks was never in that film; try {title}.", [title], "Tom Hanks")
    for turn in ("but you may want to try", "perhaps try", "so maybe try", "why not try", "although you might like",
                 "you should definitely try", "but here are some films he starred in:", "How about"):
        assert not correction_only(f"Tom Hanks was never in GoodFellas, {turn} {title}.", [title], "Tom Hanks"), turn



def test_what_follows_a_correction_is_read_as_suggesting_or_not():
    """The fifth review: "some other films:", "so Try", "but Consider" suggest; "many consider", "you may want to
    check IMDb", "I'd try asking about", "if you consider the credits" do not."""
    from recharness.tasks.recbench_plus.base import correction_only

    t = "Moon Harbor Nights"
    for body in (f"Correction: Tom Hanks was never in that film; some other films: {t}.",
                 f"Tom Hanks was never in that film, so Try {t}.", f"Tom Hanks was never in that film, but Consider {t}."):
        assert not correction_only(body, [t], "Tom Hanks"), body
    # the sixth review: a lower-case "try" anywhere suggests; "some other films" only with a suggesting word after
    for body in (f"Tom Hanks was never in Heat - try {t} instead.", f"Tom Hanks was never in Heat (try {t} instead).",
                 f"Tom Hanks was never in Heat, though try {t}.", f"Tom Hanks was never in Heat, but do try {t}."):
        assert not correction_only(body, [t], "Tom Hanks"), body
    # the seventh review: "I'd also consider", "please consider", "- consider", "(consider", "check out" suggest
    for body in (f"Tom Hanks was not in Aliens, but I'd also consider {t}.", f"Tom Hanks was not in Aliens; please consider {t} instead.",
                 f"Tom Hanks was not in Aliens, so I would consider {t} instead.", f"Tom Hanks was not in Aliens, but also consider {t}.",
                 f"Tom Hanks was never in Aliens - consider {t}.", f"Tom Hanks was never in Aliens (consider {t}).",
                 f"Tom Hanks was never in Aliens, but if you would like to see more of his work, check out {t}."):
        assert not correction_only(body, [t], "Tom Hanks"), body
    for body in (f"Correction: Tom Hanks was never in that film; many consider {t} his best",
                 f"Correction: Tom Hanks was never in that film; you may want to check IMDb for {t}",
                 f"Correction: Tom Hanks was never in the cast of {t}, if you consider the credits",
                 f"Tom Hanks was never in Heat or some other films attributed to him, such as {t}.",
                 f"That's incorrect; some movies are misattributed, but {t} does not feature Tom Hanks."):
        assert correction_only(body, [t], "Tom Hanks"), body
    # the eighth review: "consider that", "check out his filmography" correct
    for body in (f"I'd consider this a mix-up: {t} starred Tom Hanks, not Harrison Ford.",
                 f"Please consider that {t} starred Tom Hanks, not Harrison Ford.",
                 f"There seems to be a mix-up - consider that {t} starred Tom Hanks, not Harrison Ford.",
                 f"If you check out his filmography, you'll see Harrison Ford was never in {t}."):
        assert correction_only(body, [t], "Harrison Ford"), body
    # the ninth review: a title after "consider" ("It Happened One Night"), "consider checking out" suggest; a
    # capitalised "Check out the credits" corrects
    for title in ("It Happened One Night", "That Thing You Do!"):
        assert not correction_only(f"Tom Hanks was not in Heat, but consider {title} instead.", [title], "Tom Hanks")
    assert not correction_only(f"Tom Hanks wasn't in Aliens, but consider checking out {t}.", [t], "Tom Hanks")
    assert correction_only(f"Check out the credits: {t} starred Al Pacino, not Tom Hanks.", [t], "Tom Hanks")
    # the tenth review: "check out the film X" suggests
    for body in (f"Tom Hanks did not star in Aliens; check out the film {t} instead.",
                 f"Tom Hanks did not star in Aliens, but check out his movie {t}."):
        assert not correction_only(body, [t], "Tom Hanks"), body
    # the eleventh review: "check out the movie's credits for X", "the official X cast list" correct
    for body in (f"Tom Hanks did not star in it - check out the movie's credits for {t}.",
                 f"Tom Hanks was not in that movie; check out the Wikipedia article on {t} for its real cast."):
        assert correction_only(body, [t], "Tom Hanks"), body
    assert correction_only("Tom Hanks did not star in that movie; check out the official Aliens cast list.", ["Aliens"],
                           "Tom Hanks")


@pytest.mark.parametrize("text", [
    "Richard O'Brien is not in many action films, but Aliens (1986) is a great pick.",
    "Richard O'Brien was never in a James Cameron film; however, Aliens (1986) is still worth watching.",
    "Richard O'Brien did not star in it, but you might enjoy Aliens (1986) anyway.",
])
def test_the_claimed_film_suggested_after_the_correction_is_recommended(task, text):
    """The sentence turns from the correction to recommending the claimed film: it is in L (a wrong pick, P 0),
    not a decline (the review: FTR 1, the misinformed query's best score, for a recommendation)."""
    m = _score(task, text)
    assert m["FTR"] == 0.0 and m["P"] == 0.0 and m["CMR"] == 0.0, m


@pytest.mark.parametrize("text", [
    "Richard O'Brien was not in Aliens (1986), but if you liked Aliens, you might enjoy something else.",
    "Richard O'Brien was never in Aliens (1986); Aliens would be a poor choice for his fans.",
    "Richard O'Brien was not in Aliens (1986), but you might enjoy Dark City (1998) if you liked Aliens (1986).",
])
def test_the_claimed_film_named_after_the_turn_but_not_suggested_stays_rejected(task, text):
    """After the turn the film is only the user's taste ("if you liked Aliens") or dispraised ("a poor choice"):
    the claim stays rejected (the review of the turn rule: each read as recommending Aliens). The first two answers
    score as a decline, the third recommends Dark City alone. (Before 2026-11-30 the parser read a clause of the
    last two as an unknown title, "Aliens would be a poor choice for his fans", "if you liked Aliens (1986)", so
    they recommended that: a statement about the film is now prose, a film named as the user's taste no pick.)"""
    from recharness.tasks.recbench_plus.evaluate import claim_rejected

    assert claim_rejected(text, ["Aliens (1986)"], "Richard O'Brien")
    m = _score(task, text)
    if "Dark City" in text:
        assert (m["P"], m["R"], m["CMR"], m["FTR"]) == (1.0, 0.5, 1.0, 0.0), m
    else:
        assert m["FTR"] == 1.0 and m["P"] == 0.0 and "CMR" not in m, m


@pytest.mark.parametrize("text", [
    "Aliens (1986) is a great film, but Richard O'Brien is not in it.",  # named before the correction: its subject
    "Richard O'Brien never appeared in a Cameron film, but Aliens (1986) stars Sigourney Weaver.",  # the truth
])
def test_the_claimed_film_as_the_corrections_subject_stays_a_decline(task, text):
    m = _score(task, text)
    assert m["FTR"] == 1.0 and m["P"] == 0.0 and "CMR" not in m, m


@pytest.mark.parametrize("text", [
    "Richard O'Brien isn't in Aliens (1986), but you may also like Aliens (1986).",
    "Richard O'Brien isn't in Aliens (1986), but you might like Aliens (1986) for its effects.",
    "Richard O'Brien is not in Aliens (1986), but Aliens (1986) is a great pick if you don't mind violence.",
])
def test_a_suggestion_with_like_or_a_caveat_still_recommends_the_claimed_film(text):
    """"you might like X" suggests X ("like" after a modal is no taste), and a caveat elsewhere in the clause does not
    undo a commendation (the second review: each read as rejecting the claim)."""
    from recharness.tasks.recbench_plus.evaluate import claim_rejected

    assert not claim_rejected(text, ["Aliens (1986)"], "Richard O'Brien")



@pytest.mark.parametrize("mark", ["**{n}.** ", "#{n} ", "{n} - "])
def test_a_listed_claimed_film_under_any_list_marker_stays_a_recommendation(task, mark):
    """The claim check reads list entries as the parser does: an unrelated-sentence correction elsewhere does not
    take a listed film out (before, "**1.**", "#1" and "1 -" lines were not list entries to the claim check)."""
    listed = "\n".join(mark.format(n=n) + t for n, t in ((1, "Aliens (1986)"), (2, "Dark City (1998)")))
    assert _score(task, listed)["P"] == 0.5
    assert _score(task, listed + "\n\nNote: Richard O'Brien is not actually in Aliens.")["P"] == 0.5


@pytest.mark.parametrize("mark", ["1. ", "**1.** "])
def test_the_claimed_film_in_a_list_entrys_detail_is_no_pick(mark):
    """A list entry keeps the claimed film only as its title: named in the entry's detail ("for fans of Aliens") it
    is the user's taste, and the correction stands (the review, 2026-11-30: before, any entry naming it kept it)."""
    from recharness.tasks.recbench_plus.evaluate import claim_rejected

    text = f"Richard O'Brien isn't in Aliens. Here are picks:\n{mark}Dark City (1998) - for fans of Aliens (1986)\n2. Heat (1995)"
    assert claim_rejected(text, ["Aliens (1986)"], "Richard O'Brien")
    assert not claim_rejected(f"Richard O'Brien isn't in Aliens.\n{mark}Aliens (1986) - still a classic", ["Aliens (1986)"],
                              "Richard O'Brien")


@pytest.mark.parametrize("text", [
    "Richard O'Brien isn't in Aliens (1986). You might enjoy Dark City (1998).",
    "Richard O'Brien wasn't in Aliens (1986); try Dark City (1998).",
    "Richard O'Brien was not in Aliens (1986), but you might enjoy Dark City (1998).",
    "Aliens (1986) does not star Richard O'Brien. Try Dark City (1998) instead.",
])
def test_a_correction_sentence_is_no_unknown_title(task, text):
    """The correction's sentence names the claimed film, which leaves the list; it is no unknown title that spends a
    place (before 2026-11-30 "Richard O'Brien isn't in Aliens (1986)" was one: P 0.5, CMR 0.5)."""
    assert _score(task, text) == {"P": 1.0, "R": 0.5, "FTR": 0.0, "CMR": 1.0}


@pytest.mark.parametrize("entry", ["1. Dark City (1998) and Aliens (1986)", "1. Movie: Aliens (1986)",
                                   "1. \U0001F3AC Aliens (1986)", "3. Alien (1979), and of course Aliens (1986)"])
def test_the_claimed_film_listed_anywhere_in_an_entry_but_as_taste_is_kept(entry):
    """A list entry keeps the claimed film wherever it names it, unless only as the user's taste (the second
    review: requiring it first in the entry let "1. Dark City (1998) and Aliens (1986)" reject the claim)."""
    from recharness.tasks.recbench_plus.evaluate import claim_rejected

    text = "Richard O'Brien was not in Aliens (1986). Here are picks:\n" + entry
    assert not claim_rejected(text, ["Aliens (1986)"], "Richard O'Brien")


@pytest.mark.parametrize("text", [
    "If you loved Aliens (1986), you might enjoy other Sigourney Weaver films. Note that Richard O'Brien isn't in it.",
    "If you loved Aliens (1986), try more films by James Cameron - though Richard O'Brien wasn't in it.",
])
def test_a_taste_film_and_a_name_after_it_recommend_nothing(task, text):
    """The claimed film named as taste leaves the list, and a person's name after "you might enjoy" is no title:
    nothing is recommended (the fifth review: the parser once read "Sigourney Weaver" as an unknown pick, FTR 0)."""
    m = _score(task, text)
    assert m["FTR"] == 1.0 and m["P"] == 0.0 and "CMR" not in m, m
