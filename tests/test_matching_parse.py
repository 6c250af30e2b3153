"""parse_recommendations on realistic LLM answers, and on hostile input."""

import time

import pytest

from recharness.matching import parse_recommendations, strip_reasoning
from recharness.matching.parse import Candidate, clean_title, parse_candidates

# (answer, expected titles). Shapes seen from chat models asked for recommendations,
# including the RecBench+ Appendix D outputs (GPT-4o, DeepSeek-R1).
CASES = {
    "numbered with years, boilerplate around": (
        """Here are some movies you might enjoy:

1. The Shawshank Redemption (1994)
2. The Godfather (1972)
3. Pulp Fiction (1994)

Enjoy your movie night!""",
        ["The Shawshank Redemption (1994)", "The Godfather (1972)", "Pulp Fiction (1994)"],
    ),
    "bold titles with explanations": (
        """Sure! Based on your love for 80s classics, here are my recommendations:

1. **The Breakfast Club (1985)** - A timeless coming-of-age story about five teenagers in detention.
2. **Back to the Future (1985)** – Marty McFly travels back in time in a DeLorean.
3. **Ferris Bueller's Day Off (1986)**: a hilarious day of skipping school.
4. **Stand by Me (1986)** — four boys go on a journey to find a dead body.

Let me know if you'd like more suggestions!""",
        ["The Breakfast Club (1985)", "Back to the Future (1985)", "Ferris Bueller's Day Off (1986)", "Stand by Me (1986)"],
    ),
    "bullets, explanations after colon or dash, subtitles kept": (
        """- Alien: Ridley Scott's claustrophobic sci-fi horror masterpiece.
- Blade Runner (1982): a neo-noir vision of the future.
- The Terminator – James Cameron's relentless killer-robot thriller
• Star Wars: Episode IV - A New Hope
* 2001: A Space Odyssey
- Dr. Strangelove or: How I Learned to Stop Worrying and Love the Bomb""",
        [
            "Alien",
            "Blade Runner (1982)",
            "The Terminator",
            "Star Wars: Episode IV - A New Hope",
            "2001: A Space Odyssey",
            "Dr. Strangelove or: How I Learned to Stop Worrying and Love the Bomb",
        ],
    ),
    "one line, years": (
        "The Matrix (1999), Alien (1979), Blade Runner (1982), Total Recall (1990)",
        ["The Matrix (1999)", "Alien (1979)", "Blade Runner (1982)", "Total Recall (1990)"],
    ),
    "one line, commas and a final and (GPT-4o in RecBench+ D.3)": (
        "Mary Poppins, The Gnome-Mobile, and Bedknobs and Broomsticks",
        ["Mary Poppins", "The Gnome-Mobile", "Bedknobs and Broomsticks"],
    ),
    "one line, catalog-style trailing article and a lowercase title": (
        "sex, lies, and videotape, Matrix, The, Heat",
        ["sex, lies, and videotape", "Matrix, The", "Heat"],
    ),
    "one title per line (the Appendix G 'output directly' style)": (
        "Mary Poppins (1964)\nThe Gnome-Mobile (1967)\nPollyanna (1960)\n",
        ["Mary Poppins (1964)", "The Gnome-Mobile (1967)", "Pollyanna (1960)"],
    ),
    "semicolons": ("Alien (1979); Aliens (1986); Predator (1987)", ["Alien (1979)", "Aliens (1986)", "Predator (1987)"]),
    "json array in a code fence": (
        '```json\n["Heat (1995)", "Ronin (1998)", "The Usual Suspects (1995)"]\n```',
        ["Heat (1995)", "Ronin (1998)", "The Usual Suspects (1995)"],
    ),
    "json objects under a key": (
        'Here you go: {"recommendations": [{"title": "Toy Story", "year": 1995}, {"title": "Aladdin", "year": "1992"},'
        ' {"name": "The Lion King"}]}',
        ["Toy Story (1995)", "Aladdin (1992)", "The Lion King"],
    ),
    "prose with emphasised and quoted titles": (
        "If you enjoyed Heat, I'd recommend *Ronin* (1998), which has some of the best car chases ever filmed, and "
        '*The Usual Suspects* (1995) for its twisty plot. You might also like "L.A. Confidential" (1997).',
        ["Ronin (1998)", "The Usual Suspects (1995)", "L.A. Confidential (1997)"],
    ),
    "prose without markup": (
        "I recommend The Godfather (1972) and Goodfellas (1990), both are crime classics.",
        ["The Godfather (1972)", "Goodfellas (1990)"],
    ),
    "refusal, then a list anyway": (
        """I'm sorry, but I couldn't find any movies with cinematography by John Blick. However, you might enjoy:

1. Speed (1994)
2. Falling Down (1993)
3. The Devil's Advocate (1997)""",
        ["Speed (1994)", "Falling Down (1993)", "The Devil's Advocate (1997)"],
    ),
    "pure refusal (GPT-4o-mini in RecBench+ D.1)": (
        "I'm sorry, but I am unable to provide movie recommendations specifically featuring cinematography by "
        "Ellery Ryan, as I do not have data on his work.",
        [],
    ),
    "None (DeepSeek-R1 in RecBench+ D.2)": ("*None*", []),
    "reasoning block and a trailing note (DeepSeek-R1)": (
        """<think>Taps (1981) was shot by Owen Roizman. So was The French Connection. Let me list...</think>
The French Connection (1971), The Exorcist (1973), Network (1976), Three Days of the Condor (1975).

Note: The films listed above feature the cinematography of Owen Roizman, who shot Taps and Absence of Malice.""",
        ["The French Connection (1971)", "The Exorcist (1973)", "Network (1976)", "Three Days of the Condor (1975)"],
    ),
    "by-director suffixes": (
        '1. Jaws by Steven Spielberg\n2. Vertigo (1958) by Alfred Hitchcock\n3. Stand by Me\n4. "Rear Window" directed by Alfred Hitchcock\n5. Heat (dir. Michael Mann)',
        ["Jaws", "Vertigo (1958)", "Stand by Me", "Rear Window", "Heat"],
    ),
    "markdown headings with descriptions under them": (
        """### 1. *Casablanca* (1942)
A timeless romance set during World War II.

### 2. *Roman Holiday* (1953)
Audrey Hepburn shines as a runaway princess.""",
        ["Casablanca (1942)", "Roman Holiday (1953)"],
    ),
    "numbered categories with titles nested under them": (
        "1. **Sci-fi**\n   - The Matrix (1999)\n   - Alien (1979)\n2. **Drama:**\n   - Magnolia (1999)",
        ["The Matrix (1999)", "Alien (1979)", "Magnolia (1999)"],
    ),
    "numbered titles with metadata bullets under them": (
        "1. **Inception**\n   - Director: Christopher Nolan\n   - Why: dreams within dreams\n2. **Memento**\n   - Director: Christopher Nolan",
        ["Inception", "Memento"],
    ),
    "catalog format echoed back": (
        "1. Usual Suspects, The (1995)\n2. Matrix, The (1999)\n3. Boot, Das (1981)",
        ["Usual Suspects, The (1995)", "Matrix, The (1999)", "Boot, Das (1981)"],
    ),
    "numbering styles": (
        "1) Toy Story\n2) A Bug's Life\n#3 Goodfellas (1990)\n#4: Casino (1995)\n5 - Heat (1995)\n(6) Ronin",
        ["Toy Story", "A Bug's Life", "Goodfellas (1990)", "Casino (1995)", "Heat (1995)", "Ronin"],
    ),
    "year written in other ways": (
        "1. The Searchers (Director: John Ford, 1956)\n2. Heat - 1995 - Crime\n3. Ronin, 1998\n4. Rio Bravo (1959 film)\n5. Tron [1982]",
        ["The Searchers (1956)", "Heat (1995)", "Ronin (1998)", "Rio Bravo (1959)", "Tron (1982)"],
    ),
    "labels and links": (
        "Recommended movies: Heat, Ronin, Collateral\n",
        ["Heat", "Ronin", "Collateral"],
    ),
    "markdown links and title labels in a list": (
        "1. Title: [Heat](https://www.imdb.com/title/tt0113277/) (1995)\n2. Movie: `Ronin` (1998)",
        ["Heat (1995)", "Ronin (1998)"],
    ),
    "duplicates and repeats": (
        "1. Heat (1995)\n2. Ronin\n3. HEAT (1995)\n4. ronin",
        ["Heat (1995)", "Ronin"],
    ),
    "amazon-style product titles keep their qualifiers": (
        "1. Mario Kart 8 Deluxe - Nintendo Switch\n2. The Legend of Zelda: Breath of the Wild - Nintendo Switch\n"
        "3. Super Smash Bros. Ultimate – a brawler with every Nintendo character",
        [
            "Mario Kart 8 Deluxe - Nintendo Switch",
            "The Legend of Zelda: Breath of the Wild - Nintendo Switch",
            "Super Smash Bros. Ultimate",
        ],
    ),
    "titles that start like boilerplate": (
        "1. Happy Gilmore (1996)\n2. Hope Floats\n3. They Live (1988)\n4. Great Expectations\n5. Next Friday (2000)\n"
        "6. And God Created Woman (1956)\n7. Thank You for Smoking",
        ["Happy Gilmore (1996)", "Hope Floats", "They Live (1988)", "Great Expectations", "Next Friday (2000)",
         "And God Created Woman (1956)", "Thank You for Smoking"],
    ),
    "numbers that belong to titles, three-digit numbering": (
        "2001: A Space Odyssey\n300: Rise of an Empire\n101 Dalmatians\n9 to 5",
        ["2001: A Space Odyssey", "300: Rise of an Empire", "101 Dalmatians", "9 to 5"],
    ),
    "long list": ("\n".join(f"{k}. Film {k}" for k in range(1, 121)), [f"Film {k}" for k in range(1, 101)]),
    "html entities": ("1. Gem Box &ndash; Video Game Console\n2. Tom &amp; Jerry", ["Gem Box – Video Game Console", "Tom & Jerry"]),
    "a lone lowercase product name": (
        "Nintendo GameCube dedicated controller emerald blue",
        ["Nintendo GameCube dedicated controller emerald blue"],
    ),
    "empty": ("   \n\t ", []),
    "nothing-answers": ("N/A", []),
    "empty json list": ("[]", []),
    "no items, only chatter": ("That's a great question! Movies are a wonderful way to relax.", []),
}


@pytest.mark.parametrize("name", list(CASES))
def test_realistic_answers(name):
    text, expected = CASES[name]
    assert parse_recommendations(text) == expected


def test_at_least_fifteen_realistic_cases():
    assert len(CASES) >= 15


def test_none_input():
    assert parse_recommendations(None) == []
    assert parse_recommendations("") == []


def test_candidates_keep_the_raw_entry():
    assert parse_candidates("1. **Heat** (1995) - a heist film\n2. Exist Archive: The other side of the sky") == [
        Candidate("Heat (1995)", "Heat (1995) - a heist film"),
        Candidate("Exist Archive", "Exist Archive: The other side of the sky"),
    ]


def test_strip_reasoning():
    assert strip_reasoning("<think>Heat (1995)?</think>Ronin") == "Ronin"
    assert strip_reasoning("Ronin<think>still thinking about Heat") == "Ronin"
    assert strip_reasoning("reasoning without an opening tag</think>\nRonin") == "\nRonin"


@pytest.mark.parametrize(
    "raw, title",
    [
        ("**The Matrix** (1999) - a hacker learns the truth", "The Matrix (1999)"),
        ('"Heat" – Michael Mann\'s crime epic', "Heat"),
        ("_Ronin_", "Ronin"),
        ("'Til There Was You (1997) - a romantic comedy", "'Til There Was You (1997)"),
        ("Star Wars: Episode V - The Empire Strikes Back (1980) - the best sequel", "Star Wars: Episode V - The Empire Strikes Back (1980)"),
        ("Mission: Impossible", "Mission: Impossible"),
        ("The Matrix, a mind-bending sci-fi film", "The Matrix"),
        ("Good, the Bad and the Ugly, The", "Good, the Bad and the Ugly, The"),
        ("Airplane!", "Airplane!"),
        ("Monsters, Inc.", "Monsters, Inc"),
        ("Recommendations", None),
        ("etc.", None),
    ],
)
def test_clean_title(raw, title):
    assert clean_title(raw) == title


def test_code_in_the_answer_is_only_text():
    evil = "1. __import__('os').system('touch /tmp/pwned')\n2. {{7*7}}\n3. Heat (1995)"
    out = parse_recommendations(evil)
    assert out[-1] == "Heat (1995)"
    assert all(isinstance(t, str) for t in out)


@pytest.mark.parametrize(
    "text",
    [
        "1. Heat (1995) - " + "a very long explanation " * 400,  # 10k characters in one entry
        "\n".join(f"{i}. Film number {i} ({1900 + i % 100}) - because it is good" for i in range(1, 400)),
        "(" * 10_000,
        "[" * 10_000,
        "*" * 10_000,
        "_a" * 5_000,
        '"' * 10_000,
        "Heat, " * 2_000,
        "a" * 10_000,
        ("**" + "x" * 50) * 200,
        "<think>" + "Heat (1995) " * 900,
        "1. " + "Title: " * 1_500,
        "- " * 5_000,
        "Heat (1995) " * 900,
        # taste phrases (the third review: a recursion per year raised RecursionError on these)
        '"fans of A"(1999)' * 2_900,
        '"Since you liked Heat" (1999) ' * 1_700,
        "Since you liked Heat (1999) and Thief (1999) and " * 1_000,
        "1. **Fans of Heat (1999)**: " * 1_800,
    ],
)
def test_bounded_work_on_long_and_hostile_answers(text):
    t0 = time.process_time()  # CPU time: a busy machine must not fail this
    out = parse_recommendations(text)
    assert time.process_time() - t0 < 0.5
    assert len(out) <= 100
    assert all(len(t) <= 310 for t in out)


@pytest.mark.parametrize("text, titles", [
    # a line listing quoted or emphasised titles gave its first alone (the span was read as one title explained)
    ('"Fargo", "Heat", "Alien"', ["Fargo", "Heat", "Alien"]),
    ("**Fargo**, **Alien**, Heat", ["Fargo", "Alien", "Heat"]),
    ("“Fargo”, “Heat”", ["Fargo", "Heat"]),
    ("'Fargo', 'Heat'", ["Fargo", "Heat"]),
    ('"Heat" and "Fargo"', ["Heat", "Fargo"]),
    ('"Fargo (1996)", "Heat (1995)", and "Alien (1979)"', ["Fargo (1996)", "Heat (1995)", "Alien (1979)"]),
    ("**Heat** (1995), **Fargo** (1996)", ["Heat (1995)", "Fargo (1996)"]),
    # a quoted title's own comma splits nothing
    ('"Lock, Stock and Two Smoking Barrels", "Heat"', ["Lock, Stock and Two Smoking Barrels", "Heat"]),
    ('"Heat", "Fargo", and others', ["Heat", "Fargo"]),  # filler is no title
    ('"Heat", "Fargo", Gone with the Wind', ["Heat", "Fargo", "Gone with the Wind"]),  # a bare title last
    ("**Heat**, **Fargo**, Michael Mann films", ["Heat"]),  # a description last: read as before
    # "as" is a title's small word (it read "As Good as It Gets" as a description); a tail led by a lower-case
    # preposition is the list's detail, not a title (it read "with Sigourney Weaver" as a third title); "the" may
    # lead one
    ("**Heat**, **Fargo**, As Good as It Gets", ["Heat", "Fargo", "As Good as It Gets"]),
    ('"Speed", "Ronin", Cool as Ice', ["Speed", "Ronin", "Cool as Ice"]),
    ("**Alien**, **Aliens**, with Sigourney Weaver", ["Alien", "Aliens"]),
    ("**Heat**, **Fargo**, on Netflix", ["Heat", "Fargo"]),
    ("**Alien**, **Aliens**, as Ripley", ["Alien", "Aliens"]),
    ("**Heat**, **Fargo**, the Godfather", ["Heat", "Fargo", "the Godfather"]),
    # one span, explained: that title, as before
    ("**Heat**, a crime epic by Michael Mann", ["Heat"]),
    ('"Alien: Resurrection" - the fourth film, with Ripley', ["Alien: Resurrection"]),
    # a title and its details, in other marks, a label, without the title's year; a choice; a correction naming
    # the actor and the film (the review of 2026-11-30: each was split into places that pushed later titles out)
    ("**Heat** (1995), *Michael Mann*", ["Heat (1995)"]),
    ("**Heat** (1995), **Genre:** Crime", ["Heat (1995)"]),
    ("*Heat* (1995), *R*, *170 min*", ["Heat (1995)"]),
    ("**Heat** or **Collateral** (either works)", ["Heat"]),
    ('"Richard O\'Brien" and "Aliens": O\'Brien was never in that film.', ["Richard O'Brien"]),
    ("1. **Heat**, **Fargo**, and more\n2. **Alien**", ["Heat", "Alien"]),  # a list entry: its first title
    # words after the last span: a label's, a correction's (the second review: each became a title)
    ("**Heat**, **Genre**: Crime, **Year**: 1995", ["Heat"]),
    ('"Richard O\'Brien", "Aliens" - incorrect premise.', ["Richard O'Brien"]),
])
def test_a_line_of_quoted_or_emphasised_titles_is_a_list(text, titles):
    assert parse_recommendations(text) == titles


@pytest.mark.parametrize("text, titles", [
    ("If you liked Aliens (1986), you might enjoy Dark City (1998).", ["Dark City (1998)"]),
    ("You might enjoy Dark City (1998) if you liked Aliens (1986).", ["Dark City (1998)"]),
    ("Since you enjoyed Heat (1995), try Ronin (1998).", ["Ronin (1998)"]),
    ("Based on your love of Heat (1995), I suggest Ronin (1998) and Collateral (2004).",
     ["Ronin (1998)", "Collateral (2004)"]),
    ("Since you enjoyed Heat (1995) and Thief (1981), try Collateral (2004).", ["Collateral (2004)"]),
    ("If you liked *Heat*, try *Ronin* and *Thief*.", ["Ronin", "Thief"]),
    ("Ronin (1998) is a film similar to Heat (1995), and better than Thief (1981).", ["Ronin (1998)"]),
    ("1. Ronin (1998), similar to Heat (1995)\n2. Thief (1981)", ["Ronin (1998)", "Thief (1981)"]),
    # suggested, not the user's taste: kept
    ("If you liked Heat (1995), Ronin (1998) is a great next pick.", ["Ronin (1998)"]),
    ("If you enjoy crime, try Heat (1995) and Ronin (1998).", ["Heat (1995)", "Ronin (1998)"]),
    ("You would like Heat (1995) and Ronin (1998).", ["Heat (1995)", "Ronin (1998)"]),
    ("I think you'd really like Heat (1995) and you might also like Ronin (1998).", ["Heat (1995)", "Ronin (1998)"]),
    # the review's cases (2026-11-30): "like" after a suggestion suggests; a side remark's "and" is no taste list
    ("I'd suggest checking out films like Ronin (1998), Thief (1981), and Collateral (2004).",
     ["Ronin (1998)", "Thief (1981)", "Collateral (2004)"]),
    ("Check out movies like Ronin (1998) and Thief (1981).", ["Ronin (1998)", "Thief (1981)"]),
    ("I think you're going to like Ronin (1998) and Thief (1981).", ["Ronin (1998)", "Thief (1981)"]),
    ("You might enjoy Stranger Than Fiction (2006) and Fargo (1996).", ["Stranger Than Fiction (2006)", "Fargo (1996)"]),
    ("You might enjoy Ronin (1998), even darker than Heat (1995).", ["Ronin (1998)"]),
    ("You might enjoy *Ronin*, which is similar to *Heat*, and *Thief*.", ["Ronin", "Thief"]),
    # undated picks after a taste title are left to the catalog's lookup of the prose (test_matching_answers): the
    # parser cannot tell "Ronin" from "Sigourney Weaver" (the fifth review: an FTR 1 became 0 on a name)
    ("Since you enjoyed Heat (1995), you'll love Ronin.", []),
    ("Since you liked Heat (1995), you have great taste.", []),
    ("Since you liked Ronin (1998), GoodFellas (1990), and Casino (1995), you might enjoy Heat (1995) and Thief (1981).",
     ["Heat (1995)", "Thief (1981)"]),
    ("Given you liked Heat (1995), try Ronin (1998).", ["Ronin (1998)"]),
    # the sixth review: the list after a taste phrase read to its verb; others' taste is a pick
    ("Since you enjoyed Ronin (1998), Heat (1995) and Thief (1981) are must-sees.", ["Heat (1995)", "Thief (1981)"]),
    ("Since you liked Ronin (1998), Heat (1995), Thief (1981), and Collateral (2004) are recommended.",
     ["Heat (1995)", "Thief (1981)", "Collateral (2004)"]),
    ("Heat (1995) is similar to Ronin (1998) and Thief (1981) is similar to GoodFellas (1990).",
     ["Heat (1995)", "Thief (1981)"]),
    ("Given your love of GoodFellas (1990) and Casino (1995), Heat (1995) and Thief (1981) are great picks.",
     ["Heat (1995)", "Thief (1981)"]),
    ("Since you loved Ronin (1998), Heat (1995), and Casino (1995), Fargo (1996) is a great pick.", ["Fargo (1996)"]),
    ("Since you loved Ronin (1998), Heat (1995) and Casino (1995), Fargo (1996) and Seven (1995) are great.",
     ["Fargo (1996)", "Seven (1995)"]),
    ("Much like you enjoyed Heat (1995), you will enjoy Ronin (1998).", ["Ronin (1998)"]),
    ("You enjoyed Heat (1995), so try Ronin (1998).", ["Ronin (1998)"]),
    ("Based on your history of watching Heat (1995), Ronin (1998) and GoodFellas (1990), you might enjoy Collateral "
     "(2004).", ["Collateral (2004)"]),
    ("1. Thief (1981) - if you like it, you will love Collateral (2004)", ["Thief (1981)", "Collateral (2004)"]),
    ("Because you loved Heat (1995), check out Ronin (1998).", ["Ronin (1998)"]),
    ("Since you enjoyed *Heat*, try *Ronin* and *Thief*.", ["Ronin", "Thief"]),
    ("Fans of Heat (1995) will also enjoy Ronin (1998) and Thief (1981).", ["Ronin (1998)", "Thief (1981)"]),
    ("Similar to Heat (1995): Ronin (1998), Thief (1981).", ["Ronin (1998)", "Thief (1981)"]),
    ("If You Could See What I Hear (1982)\nHeat (1995)", ["If You Could See What I Hear (1982)", "Heat (1995)"]),
    ("Since You Went Away (1944)", ["Since You Went Away (1944)"]),
    # the second review's cases (2026-11-30)
    ("Ronin (1998) is similar to Heat (1995) and Thief (1981) is another pick.", ["Ronin (1998)", "Thief (1981)"]),
    ("If you liked *Heat* and *Thief*, try *Ronin*.", ["Ronin"]),
    ("Since you enjoyed **Heat (1995)**, you might like **Ronin (1998)** and **Thief (1981)**.",
     ["Ronin (1998)", "Thief (1981)"]),
    ("Fans of Heat (1995) and Thief (1981) will love Ronin (1998).", ["Ronin (1998)"]),
    ("Heat (1995)\nSince you enjoyed Heat (1995), try Ronin (1998).\nThief (1981)",
     ["Heat (1995)", "Ronin (1998)", "Thief (1981)"]),
    ("Collateral (2004)\nBecause you loved Heat (1995), Ronin (1998) is a must.", ["Collateral (2004)", "Ronin (1998)"]),
    ("1. Since you enjoyed Heat (1995), try Ronin (1998)\n2. Thief (1981)", ["Ronin (1998)", "Thief (1981)"]),
    ("Since you enjoyed Heat (1995), here are some similar films.\nRonin (1998)\nThief (1981)",
     ["Ronin (1998)", "Thief (1981)"]),
    ("1. Ronin (1998) - a tense thriller like Heat (1995)\n2. Thief (1981)", ["Ronin (1998)", "Thief (1981)"]),
    ("1. Ronin (1998), a successor to Heat (1995)\n2. Thief (1981)", ["Ronin (1998)", "Thief (1981)"]),
    ("1. Heat (1995), Ronin (1998)\n2. Thief (1981)", ["Heat (1995)", "Ronin (1998)", "Thief (1981)"]),
    # the fourth review: a second title with lower-case words, or words that bring in a pick, is no explanation
    ("1. Heat (1995) - Kramer vs. Kramer (1979)", ["Heat (1995)", "Kramer vs. Kramer (1979)"]),
    ("1. Heat (1995), then Ronin (1998)", ["Heat (1995)", "Ronin (1998)"]),
    ("1. Heat (1995), or maybe Ronin (1998)", ["Heat (1995)", "Ronin (1998)"]),
    ("1. Heat (1995) - A masterpiece. Also try Ronin (1998).", ["Heat (1995)", "Ronin (1998)"]),
    ("1. Heat (1995); also check out Ronin (1998)", ["Heat (1995)", "Ronin (1998)"]),
    ("1. Star Wars (1977) - The Empire Strikes Back (1980) - Return of the Jedi (1983)",
     ["Star Wars (1977)", "The Empire Strikes Back (1980)", "Return of the Jedi (1983)"]),
    ("- **Fans of Heat (1995)**: Ronin (1998), Thief (1981)", ["Ronin (1998)", "Thief (1981)"]),
    ("Considering you liked Heat (1995), Ronin (1998) is next.", ["Ronin (1998)"]),
    ("Since you gave Heat (1995) five stars, try Ronin (1998).", ["Ronin (1998)"]),
])
def test_a_title_named_as_the_users_taste_is_no_recommendation(text, titles):
    """A list entry's explanation names no pick either, whatever films it names ("1. Ronin (1998) - a tense
    thriller like Heat (1995)": before, Heat's phrase was a place of its own). Known limit: a line opening "Since
    you …" whose picks are marked (bold, quotes) or undated is prose, and among lines of bare titles prose lines
    are left out, with any pick they hold. "If you liked X", "Since you enjoyed X", "fans of X", "similar to X" name what the user liked, not a pick (before:
    each a recommendation, an unmatched one when the lead words stayed on: "Since you enjoyed Heat (1995)")."""
    assert parse_recommendations(text) == titles


@pytest.mark.parametrize("text, titles", [
    ("Some Like It Hot (1959) and Like Water for Chocolate (1992) are classics.",
     ["Some Like It Hot (1959)", "Like Water for Chocolate (1992)"]),  # before: "are classics" a third title
    ("Heat (1995), Ronin (1998), Fargo", ["Heat (1995)", "Ronin (1998)", "Fargo"]),
    ("Try *Some Like It Hot* and *Like Water for Chocolate*.", ["Some Like It Hot", "Like Water for Chocolate"]),
    ("I recommend **Heat** and **Ronin**.", ["Heat", "Ronin"]),  # before: each line one title, lead-in and all
    ("I recommend Some Like It Hot (1959) and Heat (1995).", ["Some Like It Hot (1959)", "Heat (1995)"]),
    ("Heat (1995), Ronin (1998), inFAMOUS", ["Heat (1995)", "Ronin (1998)", "inFAMOUS"]),
    ("Here are some picks:\n(500) Days of Summer (2009)\nHeat (1995)", ["(500) Days of Summer (2009)", "Heat (1995)"]),
    ("Heat (1995), Ronin (1998) and Thief", ["Heat (1995)", "Ronin (1998)", "Thief"]),
    ("1. Heat (1995), Ronin (1998), and Thief", ["Heat (1995)", "Ronin (1998)", "Thief"]),
    ("Heavy (1995)\nVie est belle, La (Life is Rosey) (1987)", ["Heavy (1995)", "Vie est belle, La (Life is Rosey) (1987)"]),
])
def test_titles_after_a_lead_in_and_words_after_the_last_year(text, titles):
    assert parse_recommendations(text) == titles


def test_others_taste_is_no_users_taste():
    """"Users like you enjoyed Heat (1995)" recommends Heat: the taste of others like the user, not the user's
    own (the sixth review: TASTE_BEFORE's "you enjoyed" dropped it, and the answer read as no answer)."""
    assert parse_recommendations("Users like you enjoyed Ronin (1998) and Heat (1995).")[-1] == "Heat (1995)"
    assert parse_recommendations("Viewers similar to you have enjoyed Heat (1995).") != []
