"""Output validators: real malformed answers, the documented tolerance rules, bounded time."""

from __future__ import annotations

import time

import pytest

from recharness.tasks.validation import (
    FreeText,
    JsonField,
    JsonObject,
    NumberInRange,
    RankedList,
    clean_text,
    normalize_for_metrics,
    strip_trailing_commas,
)

RATING = NumberInRange(1, 5)
JUDGE = JsonObject({"faithfulness": JsonField("int", 1, 5), "personalization": JsonField("int", 1, 5),
                    "rationale": JsonField("str", required=False)})


# ---------------------------------------------------------------- numbers

@pytest.mark.parametrize(
    "text, value",
    [
        ("4", 4.0),
        ("  4.5\n", 4.5),
        ("Rating: 4/5", 4.0),
        ("I would rate it 4 out of 5 stars.", 4.0),
        ("**3**", 3.0),
        ("On a scale of 1 to 5, I'd say 2.", 2.0),
        ("It deserves a 5-star rating!", 5.0),
        ("(4 stars, 80%)", 4.0),  # the LLMRec paper's own output format
        ("Toy Story (1995) is great: 5", 5.0),  # years are off the scale, ignored
        ("The user rated similar items 3 and 5, so my predicted rating is 4.", 4.0),
        ("Predicted rating: 4\nConfidence: 2", 4.0),
    ],
)
def test_number_in_prose(text, value):
    p = RATING.check(text)
    assert p.valid, p.error
    assert p.value["value"] == value


def test_number_off_scale_is_clipped_and_flagged():
    p = RATING.check("6")
    assert p.valid and p.value["value"] == 5.0 and p.value["raw"] == 6.0 and p.value["clipped"]
    p = RATING.check("0 stars")
    assert p.valid and p.value["value"] == 1.0 and p.value["clipped"]
    assert not RATING.check("7").valid  # beyond the slack: not a rating answer


@pytest.mark.parametrize(
    "text, error",
    [
        ("", "empty"),
        ("   \n\t", "empty"),
        ("I cannot predict ratings.", "no number"),
        ("between 3-4", "no number"),  # a range is not one answer
        ("3 or 4", "ambiguous"),
        ("-2", "no number"),
        ("It is 50% likely.", "no number"),
        ("B08J6LZQZ6", "no number"),
        ("5/10", "no number"),  # another scale: it read 5 (of 5) before
        ("Rating: 8 / 10", "no number"),
        # "out of N" is a scale as "/N" is: it read 5 (clipped from 6), 4 and 3.5 on a 1-5 scale
        ("I'd rate it 6 out of 10.", "no number"),
        ("Rating: 4 out of 10", "no number"),
        ("3.5 out of 10", "no number"),
        # a list of ratings, one per line on labels: no single answer
        ("- Rating: 4\n- Rating: 3", "a list"),
        ("1. Heat - I'd rate it 5\n2. Casino - I'd rate it 3", "a list"),
    ],
)
def test_number_invalid(text, error):
    p = RATING.check(text)
    assert not p.valid
    assert error in p.error


@pytest.mark.parametrize("text, value", [
    ("Predicted rating: 4\nThe user gave a rating of 5 to Heat", 4.0),  # before: 5, the history's rating
    ("My prediction is 4. (The user's average rating is 3.8)", 4.0),  # before: 3.8
    ("The user rated Heat 5. Rating: 3", 3.0),  # two weak anchors: the last, as before
])
def test_a_number_naming_the_answer_wins_over_a_rating_talked_about(text, value):
    p = RATING.check(text)
    assert p.valid and p.value["value"] == value


def test_number_10k_answer_is_bounded():
    text = "The user seems to like many products and " * 250  # ~10,000 characters, no rating
    assert len(text) >= 10_000
    t0 = time.perf_counter()
    p = RATING.check(text)
    assert time.perf_counter() - t0 < 2.0
    assert not p.valid
    p = RATING.check("4\n" + "blah " * 2000)
    assert p.valid and p.value["value"] == 4.0
    # a huge answer is cut at MAX_SCAN: a number after that is never seen
    p = RATING.check("x" * 30_000 + " 4")
    assert not p.valid and p.value["truncated"]


# ---------------------------------------------------------------- JSON

def test_json_trailing_comma_is_repaired():
    text = 'Here is my evaluation:\n```json\n{"faithfulness": 4, "personalization": 2,}\n```'
    p = JUDGE.check(text)
    assert p.valid, p.error
    assert p.value["faithfulness"] == 4 and p.value["personalization"] == 2
    assert strip_trailing_commas('{"a": [1, 2, ], "b": "x, }",\n}') == '{"a": [1, 2 ], "b": "x, }"\n}'


@pytest.mark.parametrize(
    "text, error",
    [
        ("", "empty"),
        ("faithfulness 4, personalization 3", "no JSON object"),
        ("{'faithfulness': 4, 'personalization': 3}", "not valid JSON"),
        ('{"faithfulness": 4, "personalization": 3', "unterminated"),
        ('{"faithfulness": 4}', "missing field 'personalization'"),
        ('{"faithfulness": 6, "personalization": 3}', "outside 1..5"),
        ('{"faithfulness": 3.5, "personalization": 3}', "whole number"),
        ('{"faithfulness": NaN, "personalization": 3}', "not valid JSON"),
        ('{"faithfulness": true, "personalization": 3}', "must be a number"),
    ],
)
def test_json_invalid(text, error):
    p = JUDGE.check(text)
    assert not p.valid
    assert error in p.error


def test_json_tolerates_numeric_strings_and_takes_first_good_object():
    p = JUDGE.check('{"note": "x"} then {"faithfulness": "5", "personalization": 1, "rationale": "ok"}')
    assert p.valid and p.value["faithfulness"] == 5 and p.value["rationale"] == "ok"
    # braces inside strings do not confuse the matcher
    p = JUDGE.check('{"rationale": "uses { and } a lot", "faithfulness": 2, "personalization": 2}')
    assert p.valid and p.value["rationale"] == "uses { and } a lot"


def test_json_10k_answer_is_bounded():
    body = '{"faithfulness": 3, "personalization": 4, "rationale": "' + "very " * 2000 + '"}'
    assert len(body) > 10_000
    t0 = time.perf_counter()
    p = JUDGE.check(body)
    assert p.valid
    nested = "{" * 10_000  # pathological: unterminated, deeply nested
    assert not JUDGE.check(nested).valid
    assert time.perf_counter() - t0 < 2.0


# ---------------------------------------------------------------- free text and lists

def test_free_text_cleaning_rules():
    assert clean_text('Summary: "Great fit, runs small"') == "Great fit, runs small"
    assert clean_text("Sure! Here is a one-line summary:\n\n**Works well for the price**") == "Works well for the price"
    assert clean_text("Line one\nline two", single_line=True) == "Line one"
    assert clean_text("a<br />b &amp; c") == "a b & c"
    assert normalize_for_metrics("Great<br /><br />value &#34;really&#34;\n  ok") == 'Great value "really" ok'


def test_free_text_bounds():
    f = FreeText(min_words=1, max_words=10, single_line=True)
    assert f.check("Great product, works as described").valid
    p = f.check("")
    assert not p.valid and p.error == "empty answer"
    p = f.check("word " * 11)
    assert not p.valid and "too long: 11 words" in p.error
    long = "This explanation goes on and on. " * 320  # ~10,500 characters
    t0 = time.perf_counter()
    p = FreeText(max_words=120).check(long)
    assert time.perf_counter() - t0 < 2.0
    assert not p.valid and "too long" in p.error


def test_ranked_list():
    r = RankedList(min_items=2, max_items=3)
    p = r.check("1. Toy Story (1995)\n2. Heat (1995)\n3. Casino (1995)\n4. Fargo (1996)")
    assert p.valid and p.value["items"] == ["Toy Story (1995)", "Heat (1995)", "Casino (1995)"]
    p = r.check("Only Heat (1995)")
    assert not p.valid and "need at least 2" in p.error
    assert not r.check("").valid


def test_list_numbers_are_not_ratings():
    # real SmolLM2-135M answer to a rating prompt (it echoed the history, cut at max_tokens)
    echo = "1. YOUNG VISION Pearl Hard Wax Beads for Hair Removal, Wax Beans 1000 g/2.2 lb/35 oz for Home Waxing, Painless Bikini&"
    p = RATING.check(echo)
    assert not p.valid and "a list" in p.error
    # real SmolLM2-135M answers on ML-1M and Amazon: the rated history echoed back, not a prediction
    for echo in ["1. Game, The (1997) (rated 3/5)\n2. Client, The (1994) (rated 3/5)\n3. Devil's Advocate, The (19",
                 '1. NYX PROFESSIONAL MAKEUP Epic Ink Liner (rated 5/5; review: "Better than the pricey stuff")\n2. Biol',
                 "1. Lloyd Mats Compatible with Ford E-Series Van - Custom Fit Carpet 1 Piece Tan Front Mat Fits All 2020-2021 E 1, 2020-"]:
        p = RATING.check(echo)
        assert not p.valid and p.error == "a list, not a single number"
    assert RATING.check("- 4").value["value"] == 4.0  # one bullet is not a list
    assert RATING.check("4.").value["value"] == 4.0
    assert RATING.check("Answer:\n- 3").value["value"] == 3.0
    assert not RATING.check("1) Heat\n2) Casino").valid
    # one value on an answer label of its own line, then a list of reasons: the answer (it was "a list")
    for text in ("Predicted rating: 4\n\nReasons:\n- loves sci-fi\n- rated similar films highly",
                 "Rating: 4\n1. The user dislikes horror.\n2. Low average of 3."):
        p = RATING.check(text)
        assert p.valid and p.value["value"] == 4.0, (text, p.error)
    assert RATING.check("4 out of 5").value["value"] == 4.0  # this scale's own "out of"


def test_free_text_real_smollm2_answers():
    # real SmolLM2-135M answers to summarization prompts (behaviour injection on)
    f = FreeText(max_words=30, single_line=True)
    echo = "Titles this reviewer gave their earlier reviews:\n- Meh too much stuffing\n- Fantastic\n- Slow go\n- Done at 30%\n\nThe review is about a book that"
    assert f.check(echo).value["text"] == "Meh too much stuffing"
    cut = '"Awesome, but not the best for babies. A good alternative would be a baby-friendly, fragrance-free, after-bathing, and fragrance-free, after-bathing'
    p = f.check(cut)
    assert p.valid and p.value["text"].startswith("Awesome, but not") and p.value["words"] == 19
    assert f.check('Toy Truck Review: "Good but smaller than what we waned"').value["text"] == 'Toy Truck Review: "Good but smaller than what we waned"'


# ---------------------------------------------------------------- numbers: context, hedges, notation (review cases)

@pytest.mark.parametrize("text, value", [
    ("Rating: 4\n\nThe user's average rating is 3.6, so this fits.", 4.0),
    ("I'd rate it 4, above their average rating of 3.8.", 4.0),
    ("I would rate it 2, even though its average score is 4.5.", 2.0),
    ("Overall rating: 4\nThe item's overall rating on the site is 4.4.", 4.0),  # a line's label names the answer
    ("I'd rate it 4. The user gave a rating of 5 to Heat.", 4.0),  # the history's rating, after the answer
    ("My guess is 3; other users' ratings average 4.2", 3.0),
    ("They usually rate comedies 5, but I would give this one a 2.", 2.0),
    ("Given their average rating, I'd rate it 4.", 4.0),  # a context phrase followed by the answer's own words
    ("Their average rating is 3.6, so my prediction is 4", 4.0),
    ("On the other hand, the rating is 4.", 4.0),  # "other" / "earlier" alone name no statistic
    ("As I said earlier, the rating is 4.", 4.0),
    ("This would be rated 4.", 4.0),  # not the past "rated" of the history
])
def test_a_number_describing_context_is_not_the_answer(text, value):
    p = RATING.check(text)
    assert p.valid, p.error
    assert p.value["value"] == value


@pytest.mark.parametrize("text, error", [
    ("The user's average rating is 3.6.", "no number"),  # only context: no answer given
    ("Rating: 3 or 4", "hedged"),
    ("I'd rate it 3, maybe 4", "hedged"),
    ("Rating: 3/5 or 4/5", "hedged"),
    ("My prediction: 3 (possibly 4)", "hedged"),
    ("Rating: between 3 and 4", "no number"),  # a range, like "3 to 4"
    ("3,5,4", "unreadable"),  # decimal comma or a list: no telling
    ("Rating: 3,75", "unreadable"),
    ("4, 3,5", "ambiguous"),
    # a context number is never chosen but still counts: a bare number beside it is no clear answer
    ("4\nThe user's average rating is 3.6", "ambiguous"),
    ("The user rated Heat 5 and Casino 3.", "ambiguous"),
    ("Rated 4,5 and 3", "ambiguous"),
    # a fraction in words: number words are not read, and the integer before them is not the answer (was 4)
    ("I'd rate it 4 and a half", "number words"),
    ("Rating: 3 and three quarters", "number words"),
    ("Rating: 4½", "no number"),  # glued to the ½: no number read
])
def test_hedged_ranged_or_unreadable_answers_are_invalid(text, error):
    p = RATING.check(text)
    assert not p.valid, p.value
    assert error in p.error


@pytest.mark.parametrize("text, value", [
    ("3,5 stars", 3.5),  # a decimal comma: one digit each side, on the scale, no list around it
    ("Rating: 4,5/5", 4.5),
    ("4 / 5", 4.0),  # a spaced denominator, like "4/5"
    ("It grossed $1,200,000; I'd rate it 4", 4.0),  # thousands separators make a big number, off the scale
    ("It could be 3 or 4; my final prediction is 4.", 4.0),  # a hedge settled by the answer
])
def test_number_notation(text, value):
    p = RATING.check(text)
    assert p.valid, p.error
    assert p.value["value"] == value


def test_number_context_and_hedge_rules_are_bounded():
    t0 = time.perf_counter()
    assert RATING.check("3,5 " * 6000).value["value"] == 3.5
    assert not RATING.check("their average rating is 3.6 " * 800).valid
    assert not RATING.check("Rating: 4 or 5 " * 1500).valid
    assert not RATING.check(",".join(["1"] * 9000) + "x").valid
    assert time.perf_counter() - t0 < 2.0


def test_an_int_too_large_for_a_float_is_no_number_anywhere():
    """JSON allows 10**400; float() and math.isfinite raise OverflowError on it, a traceback where an imported or
    hand-edited value must be an invalid answer or a named error."""
    from recharness.core.types import is_number
    from recharness.tasks.registry import get_task
    from recharness.tasks.validation import finite_number

    big = 10**400
    assert not is_number(big) and not is_number(-big) and not is_number(True) and not is_number(float("inf"))
    assert is_number(10**300) and is_number(-2.5) and is_number(0)
    assert finite_number(big) is None and finite_number(str(big)) is None and finite_number("4") == 4.0
    rec, why = get_task("llmrec", "rating").import_answer({"id": "r1"}, {"rating": big})
    assert why is None and not rec["valid"] and "not a number in 1..5" in rec["error"]


def test_a_number_inside_the_rated_object_is_not_the_rating():
    """"I'd rate these 3 books a 4": the object's number took the anchor and was read as the rating (review case:
    the Amazon fixture's "toy for 3 year olds"); and a rating given on another scale is no answer on this one."""
    f = NumberInRange(1, 5)
    cases = {"I would rate these 3 books a 4": 4.0, "I'd rate the CENOVE toy for 3 year olds a 5": 5.0,
             "Rating for 2 Days: 3": 3.0, "I'd rate Kill Bill Vol. 2 a 4": 4.0, "The rating for Season 2 is 4": 4.0,
             "I'd rate Rocky 2 a 3": 3.0, "I'd rate this 2-pack 4": 4.0, "a 5-star movie": 5.0,
             # unchanged: the first answer stands against an alternative or the history
             "I'd give it a 4, not a 5": 4.0, "I'd rate it a 3 because the average is 4.2": 3.0,
             "On a scale of 1 to 5, I'd say 4": 4.0,
             # the review of the first version of this rule: a later number after a sentence end, a reason or the
             # object's own rating is no answer for an object; a word joined to a rating keeps it a rating
             "I'd rate it 4. It would be a 5 if it were cheaper.": 4.0, "I'd rate it 4 because it is a 5-star brand": 4.0,
             "I would rate this 4 since the previous one is 5": 4.0, "I would give this a 4 because the sequel is a 2": 4.0,
             "I'd give it 4 stars. The user rated 2 items a 5.": 4.0,
             "I predict 4. The user's rating for similar item 2 is 5.": 4.0,
             "I would rate this product a 4. The 2 reviews above are a 5 and a 3.": 4.0,
             "Rating: 4-out-of-5": 4.0, "Rating: 5-Excellent": 5.0, "Predicted rating: 3-average": 3.0,
             "Score for the 2-disc set: 5": 5.0,
             # another scale named beside a 1-5 rating: the rating stands
             "Prediction: 4 (8 on a 10-point scale)": 4.0, "Rating: 4 (1-5 scale, not the 1-10 scale)": 4.0,
             "4\n\nNote: on a scale of 1 to 10 this would be about 8.": 4.0,
             "I would give it a 8/10, which is 4 on a 1-5 scale": 4.0,
             # the second review: "as a 4", an opening clause or label word before "rating for", a unit after a
             # number, "Mr.", a decimal in the sentence, an unrelated "out of 10"
             "I'd rate Toy Story 2 as a 4.": 4.0, "Overall, the rating for Shrek 2 is 4.": 4.0,
             "Therefore, the predicted rating for Alien 3 is 2.": 2.0, "Final rating for Toy Story 2: 4": 4.0,
             "So my prediction for Toy Story 3 is 4.": 4.0, "I'd rate the 2-disc set 4 stars.": 4.0,
             "I'd rate the 3-hour epic 4.": 4.0, "I'd rate Mr. Holland's Opus 2 a 4.": 4.0,
             "Critics average 7.5 out of 10, so I'd give it 4.": 4.0,
             "I'd give it 2 since only one out of 10 of their dramas scored well.": 2.0,
             # the third review: a number where the answer stands is no object's ("it a 4 on a 5-point scale" read
             # 5), and a statistic's "rating for X" opens no rated object ("the highest rating for Toy Story 2 is 5")
             "I'd give it a 4 on a 5-point scale.": 4.0, "I'd rate it 4 - a 2 is too harsh": 4.0,
             "I'd give it 4 stars: a 5 would be too generous": 4.0, "I'd rate this 4 - a 2 is too harsh": 4.0,
             "I'd rate it a 4 out of 5 based on a 5 star scale": 4.0,
             "Prediction: 3. The highest rating for Toy Story 2 is 5.": 3.0,
             "I predict 3, since the average score for Toy Story 2 is 5": 3.0,
             # the fourth review: "the rating for X" after an opening clause is still the rated object, a unit
             # after a space is a quantity; "a rating of", "as" and a bold label close the object too
             "I think the rating for Toy Story 2 is 4.": 4.0, "I predict the rating for Toy Story 2 is 4.": 4.0,
             "Given the history, I believe the rating for Toy Story 2 would be 4.": 4.0,
             "In my view the predicted rating for Toy Story 2 is 4.": 4.0, "- Rating for Toy Story 2: 4": 4.0,
             "I'd give this 2 hour film a 4.": 4.0, "I'd rate this 2 disc set a 4.": 4.0,
             "I would give a 2 hour movie a 4.": 4.0, "The highest rating for Toy Story 2 is 5, so I'd say 4": 4.0,
             "Since the average score for Rocky 2 is 3, I predict 4": 4.0, "I'd give Rocky 3 a rating of 4": 4.0,
             "I would give Toy Story 2 a score of 5": 5.0, "I'd rate Rocky 2 as 4": 4.0,
             "**Rating for Toy Story 2:** 4": 4.0,
             # the fifth review: a bare "the rating for X" in a reason is weaker than the answer's own words, and a
             # rating before "as" is no object ("I'd give 4 stars as 5 would be too much")
             "I predict 4, because the rating for Toy Story 2 is 5.": 4.0,
             "I'd predict 4 since your rating for Toy Story 2 is 5.": 4.0,
             "Rating: 4. Note that the rating for Rocky 3 is a 3 in your history.": 4.0,
             "Prediction: 4 (the rating for Toy Story 2 is a 5, and this is similar)": 4.0,
             "I'd say 4, as your score for Apollo 13 is 5.": 4.0,
             "My prediction is 4, given that the rating for 101 Dalmatians is 5.": 4.0,
             "I'd give 4 stars as 5 would be too much.": 4.0, "I'd give 3 stars as 4 is too high.": 3.0,
             "I'd rate 4 as 5 is reserved for classics.": 4.0, "I'd give 4/5 as 5/5 is too generous.": 4.0,
             "I'd rate 12 Monkeys a 4": 4.0, "I'd rate 2 Fast 2 Furious as 3": 3.0,
             # the sixth review: a bare "the rating for X" outside a reason still states the answer; a rating-like
             # number must end the object to stand for an answer in it ("the 5 Star Spiral Notebook")
             "The rating for Toy Story 2 is 4. Toy Story got a rating of 5 from this user.": 4.0,
             "Rating for Apollo 13: 4. Cast Away got a rating of 3.": 4.0,
             "The rating for Apollo 13 is 4, whereas Cast Away received a rating of 3.": 4.0,
             "I predict the rating for Toy Story 2 is 4, since the rating for Toy Story is 5.": 4.0,
             "I'd rate the 5 Star Spiral Notebook a 4.": 4.0, "I'd rate Naked Gun 2 1/2 a 4.": 4.0,
             "The rating for Touch Detective 2 1/2 is 4.": 4.0, "I'd give the 3 Point Hitch Kit a 4.": 4.0,
             # the seventh review: a reason earlier in the sentence does not weaken the final clause's statement
             "I'd rate it 3 at first, but since they love Pixar, the rating for Toy Story 2 is 4.": 4.0,
             "I'd give the original 5. Given the user's taste, the rating for Toy Story 2 is 4.": 4.0,
             "I'd rate it 5, but as the user dislikes sequels, the rating for Shrek 2 should be 4.": 4.0,
             "I'd rate it 5 at most, though compared with the original, the rating for Cars 2 is 3.": 3.0,
             # the eighth review: a reason still open over later commas keeps the phrase weak
             "My prediction: 4 (the user enjoyed Toy Story, and the rating for Toy Story 2 is 5).": 4.0,
             "I predict 4 because, as we know, the rating for Toy Story 2 is 5.": 4.0,
             "My predicted rating is 4, considering that, overall, the rating for Alien 3 is 2.": 4.0,
             "I'd rate it 3, because the user disliked horror; the rating for Saw 2 is 1.": 3.0,
             "I predict 3 (the user generally dislikes sequels, and the rating for Cars 2 is 2).": 3.0}
    for text, want in cases.items():
        p = f.check(text)
        assert p.valid and p.value["value"] == want, (text, p)
    for text in ("On a scale of 1 to 10: 6", "6 (on a 10-point scale)", "Rating: 6\n(scale 1-10)",
                 "on a scale of 1-10, I'd give it 6", "On a scale of 1-10, I'd give it 4", "rate it a 4 on a 10 point scale",
                 "On a scale of 1 to 10, I'd give it 3.5.", "Rating: 3.5 (scale 1-10)"):
        p = f.check(text)
        assert not p.valid and "scale to 10" in p.error, (text, p)  # before: 6 clipped to a valid 5
