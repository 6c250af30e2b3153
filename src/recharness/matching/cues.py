"""Refusal and nothing-found wording: the patterns both the answer parser and the FTR check use.

Kept apart from parse.py and refusal.py so that neither imports the other's
internals: parse.py drops refusal sentences while splitting an answer into
titles, and refusal.py parses the answer to see whether anything is left.
"""

from __future__ import annotations

import re

# Phrases that announce a refusal or an empty result. Multi-word on purpose:
# "Sorry, Wrong Number (1948)" and "I Can't Sleep (1994)" are films.
_CUES = [
    r"\b(?:i'?m|i am|we'?re|we are)\s+(?:really\s+|so\s+|very\s+)?sorry\b",
    r"\bsorry,?\s+(?:but|i|we)\b",
    r"\bi\s+apologi[sz]e\b|\bmy apologies\b",
    r"\b(?:i|we)\s+(?:can ?not|can'?t|could ?not|couldn'?t|am unable to|'?m unable to|am not able to|was unable to|was not able to|do not|don'?t|did not|didn'?t)\s+"
    r"(?:\w+\s+){0,2}?(?:help|assist|provide|recommend|suggest|find|locate|identify|comply|fulfil|fulfill|access|have|know|verify|determine|browse|offer|give|list|think of)\b",
    r"\bunable to (?:provide|find|recommend|suggest|identify|locate|verify|determine)\b",
    r"\bthere (?:are|is|were|was|seem to be|appear to be)\s+no\s+(?:\w+\s+){0,3}?(?:movies?|films?|titles?|books?|items?|products?|games?|matches|results?|records?|recommendations?|information|data|works?)\b",
    r"\bno (?:known |such |matching |specific |other )?(?:movies?|films?|titles?|books?|items?|products?|games?|records?|recommendations?|results?)\s+(?:that|which|match|matching|fit|fits|meet|meets|by|with|featuring|found|available|exist)\b",
    r"\b(?:couldn'?t|could not|can'?t|cannot|can not|did not|didn'?t|was unable to)\s+find\s+any\b",
    r"\bas an ai\b|\bas a language model\b|\bi'?m an ai\b|\bi am an ai\b",
    r"\b(?:i'?m|i am)\s+not\s+(?:aware|familiar|able)\b|\bnot aware of any\b",
    r"\b(?:does|do)\s*(?:n'?t| not)\s+(?:appear|seem)\s+to\s+(?:exist|be\s+(?:a|any)\s+(?:known|real))\b",
    r"\bno (?:record|information|data) (?:of|on|about)\b",
    r"\b(?:lack|don'?t have|do not have) (?:enough |sufficient |specific |the )?(?:information|data|knowledge|access)\b",
    r"\bbeyond my (?:knowledge|capabilities)\b",
]
REFUSAL_RE = re.compile("|".join(f"(?:{c})" for c in _CUES), re.IGNORECASE)

# A correction of a premise ("GoodFellas does not feature Tom Hanks", "Hanks wasn't in it"): what a misinformed
# query's right answer says about the films the query names.
CORRECTION_RE = re.compile(
    r"\b(?:does|do|did|is|was|were|are)\s*(?:n'?t|\s+not)\s+(?:(?:actually|really|in fact)\s+)?"
    r"(?:feature|features|star|stars|starring|include|includes|appear|appears|have|has|in\b|part of|directed|written)"
    r"|\b(?:never|not)\s+(?:starred|appeared|acted|featured)\b|\bfalse premise\b|\bincorrect\b|\bmistaken\b"
    r"|\b(?:was|is|were|are|did|does|has|have|had)\s+never\s+(?:been\s+)?(?:actually\s+)?"
    r"(?:in|appear(?:s|ed)?|star(?:s|red|ring)?|feature[sd]?|act(?:s|ed)?|cast|part of|direct(?:s|ed)?|written)\b",
    re.IGNORECASE,
)
# An affirmative correction: the true credit, marked as a correction ("Aliens actually stars Sigourney Weaver",
# "In fact, it was directed by James Cameron"); credit verbs only, no article between ("it actually features great
# effects", "it is actually a fine film starring ..." are praise). It corrects only a sentence that does not name
# the claimed value ("Richard O'Brien actually starred in Aliens" agrees with the false claim): `has_correction_cue`.
AFFIRMATIVE_RE = re.compile(
    r"\b(?:actually|in fact|in reality|in truth)\b,?\s+(?:(?!(?:a|an|one)\s)[^\s.!?]+\s+){0,4}?"
    r"(?:star(?:s|red|ring)\b|(?:directed|written|produced|composed|made)\s+by\b)",
    re.IGNORECASE,
)


def _value_names(value: str) -> list[str]:
    """How an answer names a claimed value: whole, or by its last word ("O'Brien" for "Richard O'Brien")."""
    words = str(value).replace("\u2019", "'").split()
    return [" ".join(words)] + ([words[-1]] if len(words) > 1 and len(words[-1]) > 2 else []) if words else []


def _not_value_re(value: str) -> re.Pattern | None:
    """", not <value>" ("stars Sigourney Weaver, not Richard O'Brien"), also with the value's last word alone."""
    alts = [re.escape(a) for a in _value_names(value)]
    if not alts:
        return None
    return re.compile(rf",\s*(?:and\s+|but\s+)?not\s+(?:by\s+|with\s+)?(?:{'|'.join(alts)})(?!\w)", re.IGNORECASE)


def has_correction_cue(text: str, value: str | None = None) -> bool:
    """True if the text corrects a premise (`CORRECTION_RE`, or ", not <value>" for the claimed `value`, or the
    true credit marked as a correction, `AFFIRMATIVE_RE`, in text that does not name the claimed value) anywhere;
    callers scope it by passing one sentence."""
    text = text[:20_000]
    if CORRECTION_RE.search(text) is not None:
        return True
    if not value or not str(value).strip():
        return False
    plain = text.replace("\u2019", "'")
    pat = _not_value_re(value)
    if pat is not None and pat.search(plain) is not None:
        return True
    return AFFIRMATIVE_RE.search(plain) is not None and not _names_value(plain, value)


def _names_value(text: str, value: str) -> bool:
    """Whether `text` names the claimed value (or its last word: "O'Brien" for "Richard O'Brien")."""
    return any(re.search(rf"(?<!\w){re.escape(a)}(?!\w)", text, re.IGNORECASE) for a in _value_names(value))

# Whole answers that mean "nothing": R1 answers "None" to a misinformed query.
_NOTHING_RE = re.compile(
    r"^\W*(?:none|nothing|n/?a|null|nil|no(?:ne)?\s+(?:recommendations?|results?|matches|movies|films|books|items)(?:\s+found)?|"
    r"no\s+(?:such\s+)?(?:movies?|films?|books?|items?)\s+(?:exist|found)|empty|no)\W*$",
    re.IGNORECASE,
)


def has_refusal_cue(text: str) -> bool:
    """True if the text contains refusal / nothing-found wording anywhere."""
    return REFUSAL_RE.search(text[:20_000]) is not None


def is_nothing(text: str) -> bool:
    """True for an answer that is only "None", "N/A", "[]", "No recommendations."..."""
    t = text.strip().strip("`*_\"'[]{}()<>").strip()
    return not t or _NOTHING_RE.match(t) is not None


#: a phrase where an answer turns to suggesting ("you might enjoy", "I'd recommend", "here are some films")
SUGGESTING = re.compile(
    r"\byou\s+(?:could|might|may|can|should|would)\s+(?:\w+\s+){0,3}?"
    r"(?:try|enjoy|like(?!\s+to\b)|watch|check\s+out|consider)\b"
    r"|\bI(?:'d|’d|\s+would|\s+can)?\s+(?:recommend|suggest)\b|\bhere\s+are\s+(?:some\s+)?(?:other\s+)?(?:films?|movies?)\b"
    r"|\binstead,?\s+(?:watch|try|see)\b|\bwhy\s+not\s+try\b", re.IGNORECASE)
SUGGESTING_OPENER = re.compile(
    r"(?:^|[,;:(\u2014\u2013]|\s-\s|\b(?:maybe|perhaps|just|so|but|and|or|then|instead|also|please|I['’]d|I\s+would)\b)\W*"
    r"(?:(?:try|how\s+about)\b|check\s+out\b(?!\s+(?:(?-i:the|his|her|their)\s+(?:[\w'’()]+\s+){0,3}?"
    r"(?-i:credits?|cast|filmography|page|list|entry|article|details|trivia)|IMDb)\b)"
    r"|consider\b(?!\s*:|\s+(?-i:that|this|it|your|whether)\b|\s+checking\b(?!\s+out))|some\s+(?:other\s+)?(?:films?|movies?)\s*(?::|(?:you|to\s+watch|worth|starring"
    r"|featuring|with\s+(?:him|her|them))\b))", re.IGNORECASE)
#: a lower-case "try" / "how about" anywhere ("- try Cast Away instead", "but do try"): a title's is capitalised
SUGGESTING_WORD = re.compile(r"\b(?:try|how\s+about)\b")


def correcting_part(sentence: str) -> str:
    """The sentence up to where it turns to suggesting (`SUGGESTING`, `SUGGESTING_OPENER`, `SUGGESTING_WORD`)."""
    cuts = [m.start() for m in (SUGGESTING.search(sentence), SUGGESTING_OPENER.search(sentence),
                                SUGGESTING_WORD.search(sentence)) if m]
    return sentence[:min(cuts)] if cuts else sentence


#: words that make a commending phrase its opposite ("a poor choice", "not a good fit")
DISPRAISE = re.compile(r"\b(?:poor|bad|wrong|odd|strange|weird|terrible|awful|questionable|unlikely|not)\b|n't\b",
                        re.IGNORECASE)
#: a clause that commends the film it names ("is a great pick", "worth watching")
COMMENDS = re.compile(r"\b(?:is|'s|would\s+be|remains)\s+(?:still\s+)?(?:a|an)\s+(?:[\w-]+\s+){0,2}?(?:pick|choice|option|"
                       r"recommendation|fit|match|bet)\b|\bworth\s+(?:watching|seeing|a\s+(?:watch|look))\b", re.IGNORECASE)


#: words that end right before a film named as the user's taste, not suggested: "If you liked Heat (1995)", "Since
#: you enjoyed", "Based on your love of", "fans of", "similar to", "in the vein of", "darker than". Read only where they
#: end at the title ("If you enjoy crime, try Heat" suggests it). Not "like": "check out films like Ronin", "you're
#: going to like Ronin" suggest; "than" only after a lower-case comparative ("Stranger than Fiction" is a title).
TASTE_BEFORE = re.compile(
    r"\b(?:(?:if|since|because|as|given\s+that|now\s+that|seeing\s+(?:as|that)|considering(?:\s+that)?)\s+"
    r"you(?:'ve|’ve|\s+have)?\s+(?:(?:really|also|already|clearly|obviously|both|once|previously)\s+)?"
    r"(?:liked|like|loved|love|enjoyed|enjoy|watched|seen|rated|gave|appreciated|appreciate|(?:are|were)\s+a\s+fan\s+of)"
    r"|(?:based\s+on|given|considering|judging\s+(?:by|from))\s+(?:how\s+much\s+you\s+(?:liked|loved|enjoyed)"
    r"|your\s+(?:\w+\s+)?(?:love|liking|enjoyment|fondness|appreciation|interest|ratings?|history)\s+(?:of|for|in))"
    r"|your\s+(?:love|liking|enjoyment|fondness|appreciation)\s+(?:of|for)|fans?\s+of|similar\s+to|reminiscent\s+of"
    r"|(?:given|considering)\s+(?:how\s+much\s+)?you(?:'ve|\s+have)?\s+(?:liked|loved|enjoyed|watched|rated)"
    r"|your\s+(?:\w+\s+)?history\s+of\s+(?:watching|viewing|enjoying|rating)"
    r"|(?<!(?<!much\s)(?<!just\s)like\s)(?<!to\s)(?<!as\s)(?<!than\s)you(?:'ve|\u2019ve|\s+have)?\s+"
    r"(?:(?:really|already|also|clearly)\s+)?(?:liked|loved|enjoyed|rated)"  # not "Users like you enjoyed Heat":
    # others' taste, a pick ("Much like you enjoyed Heat" is the user's)
    r"|in\s+the\s+(?:vein|style|spirit)\s+of|(?-i:(?:[a-z]+er|more\s+[a-z]+|less\s+[a-z]+)\s+than))"
    r"\s+(?:(?:both|the\s+(?:film|movie))\s+)?$", re.IGNORECASE)
#: the same at the start of a sentence, where the phrase's capitals make it look like part of the title
#: ("Fans of Heat (1995) will also enjoy ...", "Similar to Heat (1995): ...")
TASTE_OPENING = re.compile(r"^(?:fans?\s+of|similar\s+to|reminiscent\s+of|in\s+the\s+(?:vein|style|spirit)\s+of)\s+(?=\S)",
                           re.IGNORECASE)
#: a film the sentence compares with ("better than Aliens", "something like Aliens"): for the misinformed-claim check
#: only, where the claimed film is the one the user said they loved; the parser reads these as picks (`TASTE_BEFORE`)
COMPARED_BEFORE = re.compile(r"\b(?:than|(?<!such\s)(?<!might\s)(?<!could\s)(?<!would\s)(?<!should\s)(?<!may\s)"
                             r"(?<!can\s)(?<!will\s)(?<!also\s)(?<!'d\s)(?<!'ll\s)like)\s+$", re.IGNORECASE)
