"""Reading the three answer formats; model text is untrusted, so only json.loads and regexes touch it.

Each parser returns recharness `Parsed`: an answer that does not follow the
format is `valid=False` with the reason, so it is retried and then counted.
The generic pieces (scan limit, JSON object extraction, JSON value -> number)
are the package-level ones in recharness.tasks.validation. PerRecBench reads
objects more leniently than `JsonObject` (the *last* flat object that carries
the key, wherever it sits, then a bare `predicted_rating: x` as a fallback),
as the original code's answers need; that choice stays here.
"""

from __future__ import annotations

import json
import re

from recharness.core.types import Parsed
from recharness.tasks.validation import finite_number, flat_json_objects, scan

#: a bare "predicted rating: 4" (not a range or a hedge: "4-5", "3 or 4", "2 to 5" are no single rating)
_RATING_KV = re.compile(r"predicted[_ ]rating\"?\s*[:=]\s*\"?(-?\d+(?:\.\d+)?)(?!\.?\d)(?!\s*(?:-|–|—|to\b|or\b)\s*\d)",
                        re.I)
#: a rating given as text: one number, perhaps in stars or over 5 ("4", "4.0 out of 5", "4/5", "4 stars", "+4",
#: "4,5", "4 out of 5 stars"), not "4-5", "3 or 4", "8/10" or "N/A"
_NUMBER_TEXT = re.compile(r"\s*\+?(\d+(?:[.,]\d+)?)\.?\s*(?:/\s*5(?:\.0)?|out\s+of\s+5(?:\.0)?)?\s*(?:stars?)?\s*\.?\s*",
                          re.I)
#: keys a model may put its rating under instead of the format's own: the rating itself, not a statistic
#: ("user_average_rating", "confidence_score" name other numbers)
_RATING_KEYS = frozenset({"rating", "prediction", "predicted", "predicted_score", "score", "final_rating"})
_RANKING_KV = re.compile(r"predicted[_ ]ranking\"?\s*[:=]\s*\[([^\]]*)\]", re.I)
_USER = re.compile(r"\buser\s*([ab])\b", re.I)
_INDEX = re.compile(r"^\s*(?:user\s*)?(\d{1,3})\s*$", re.I)


def _own_key(obj: dict, key: str) -> str | None:
    """The object's key that is the format's own (`key`, in any case, with a space for the underscore)."""
    return next((k for k in obj if k.lower().replace(" ", "_") == key), None)


def parse_rating(text: str, lo: float = 1.0, hi: float = 5.0) -> Parsed:
    """{"predicted_rating": x} (the last such object decides, as after a chain of thought); x in [lo, hi]. The
    format's own key wherever it is (an object, or a bare `predicted rating: x`) before a key that names the rating
    itself ("rating", "score"): "Step 1: {"user_average_rating": 3.8} ... predicted rating: 5" is 5. The last
    object with the format's key decides even when its value is unreadable ("N/A", null, "4-5", "3 or 4": invalid):
    an earlier draft is not the answer, nor a statistic under another key (before 2026-11-29 "user_average_rating"
    or "confidence_score" stood in for a missing rating, and a range or hedge was read as its first number)."""
    objects = flat_json_objects(text)
    value, own = None, None
    for obj in reversed(objects):
        k = _own_key(obj, "predicted_rating")
        if k is not None:
            own = obj[k]
            break
    if own is not None or any(_own_key(o, "predicted_rating") is not None for o in objects):
        value = _rating_value(own)
        if value is None:
            return Parsed(None, valid=False, error=f'the answer\'s "predicted_rating" is {json.dumps(own)[:40]}: '
                                                   "not one number")
    if value is None:
        found = _RATING_KV.findall(scan(text)[0])
        value = float(found[-1]) if found else None
    if value is None:
        for obj in reversed(objects):  # a key naming the rating itself
            k = next((k for k in obj if k.lower().replace(" ", "_") in _RATING_KEYS), None)
            if k is not None:
                value = _rating_value(obj[k])
                break
    if value is None:
        return Parsed(None, valid=False, error='no {"predicted_rating": <number>} in the answer')
    if not lo <= value <= hi:
        return Parsed(value, valid=False, error=f"rating {value:g} outside {lo:g}..{hi:g}")
    return Parsed(value)


def _rating_value(v) -> float | None:
    """A rating given as a number, or as text that is one number and nothing else; None otherwise."""
    if isinstance(v, str):
        m = _NUMBER_TEXT.fullmatch(v)
        return float(m.group(1).replace(",", ".")) if m else None
    return finite_number(v)


_BRACKETED_USER = re.compile(r"\[\s*user\s*([ab])\s*\]", re.I)
#: where a chain of thought gives its verdict: "Final answer: [User B]", "Answer: B", "the answer is [User A]"
_FINAL_MARK = re.compile(r"\bfinal\s+answer\b\s*(?:is\b)?\s*[:=\-–—]?|\b(?:answer|verdict|conclusion)\b\s*(?:is\b\s*[:=]?|[:=])",
                         re.I)  # not "To answer this, compare [User A] and [User B]"
_SENTENCE = re.compile(r"[^.!?\n]+(?:[.!?]+|$)", re.M)
#: a user as the subject of the comparative a verdict turns on: "[User B] is more likely", "User A would be the
#: better fit", "[User A] is less likely" (the other user is the answer), "[User B] is preferred"
_SUBJECT_CMP = re.compile(
    r"(?:\[\s*user\s*([ab])\s*\]|\buser\s*([ab])\b)\s+(?:(?:is|are|would|will|should|seems?|appears?|be|been|"
    r"likely|probably|clearly|much|far|slightly|somewhat|the|a|an|definitely)\s+){0,4}"
    r"(more|better|higher|stronger|greater|likelier|most|best|preferred|prefers?|less|lower|weaker|worse|least)\b",
    re.I)
_LESS_WORDS = frozenset({"less", "lower", "weaker", "worse", "least"})


def _mentions(t: str) -> list[tuple[int, str]]:
    """(position, "A"/"B") of each user named: the format's brackets when there are any, else "User A"."""
    found = [(m.start(), m.group(1).upper()) for m in _BRACKETED_USER.finditer(t)]
    return found or [(m.start(), m.group(1).upper()) for m in _USER.finditer(t)]


def final_answer(text: str) -> str | None:
    """The user a chain of thought gives after its last "answer" marker: the one named in the sentence that follows
    (naming both: the subject of its comparative, `_verdict`, else the last named: "The answer is not [User A]; it is
    [User B]"), "Answer: B"; else None."""
    t = scan(text)[0]
    marks = list(_FINAL_MARK.finditer(t))
    if not marks:
        return None
    tail = t[marks[-1].end():]
    first = next(iter(_SENTENCE.findall(tail)), "")
    named = _mentions(first) or _mentions(tail)[:1]
    if named:
        if len({u for _, u in named}) > 1:
            return _verdict(first) or named[-1][1]
        return named[0][1]
    bare = re.match(r"\s*[\[(\"'*]*\s*([AB])\b", tail)  # "Answer: B"
    return bare.group(1) if bare else None


def _verdict(sentence: str) -> str | None:
    """The user a sentence naming both prefers: the subject of its last comparative ("[User B] is more likely to
    prefer it than [User A]" is B, also after "Compared with [User A], who rated more comedies, ..."; "[User A] is
    less likely than [User B]" is B); None without one."""
    found = list(_SUBJECT_CMP.finditer(sentence))
    if not found:
        return None
    m = found[-1]
    user = (m.group(1) or m.group(2)).upper()
    return ("B" if user == "A" else "A") if m.group(3).lower() in _LESS_WORDS else user


def parse_pair(text: str, last: bool = False) -> Parsed:
    """'A' or 'B' from "[User A]" / "[User B]" (the format's brackets first: "Comparing User A and User B, [User B]
    is more likely" is B): the first mention; after a chain of thought (`last`) the user named after its last
    "answer" marker, else its last sentence naming a user: one user, or both around a comparative ("Therefore [User
    A] is more likely to prefer the query item than [User B]" is A, where the last mention was taken). A last
    sentence that names both without saying which is preferred gives no answer."""
    t = scan(text)[0]
    given = final_answer(t) if last else None
    if given is not None:
        return Parsed(given)
    found = [u for _, u in _mentions(t)]
    if not found and t.strip().strip("[]().").upper() in ("A", "B"):
        found = [t.strip().strip("[]().").upper()]
    if not found:
        return Parsed(None, valid=False, error='neither "[User A]" nor "[User B]" in the answer')
    if not last:  # the first sentence naming a user; naming both, the subject of its comparative
        return _first_verdict(t, found)
    sentence = next((x for x in reversed(_SENTENCE.findall(t)) if _mentions(x)), None)
    if sentence is None:  # only a bare letter
        return Parsed(found[-1])
    users = {u for _, u in _mentions(sentence)}
    if len(users) == 1:
        return Parsed(users.pop())
    verdict = _verdict(sentence)
    if verdict is None:
        return Parsed(None, valid=False, error=f"no verdict: the last sentence names both users ({sentence.strip()[:80]!r})")
    return Parsed(verdict)


def _first_verdict(t: str, found: list[str]) -> Parsed:
    """A direct answer's user: the first sentence that names one ("[User B]. User A rarely ..." is B); naming both,
    the subject of its comparative ("Compared to [User A], [User B] prefers it more" is B, where the first mention
    was taken), else no answer ("Both [User A] and [User B] would enjoy it"). Brackets first, as `_mentions`."""
    pattern = _BRACKETED_USER if _BRACKETED_USER.search(t) else _USER
    sentence = next((x for x in _SENTENCE.findall(t) if pattern.search(x)), None)
    if sentence is None:  # only a bare letter
        return Parsed(found[0])
    users = {m.group(1).upper() for m in pattern.finditer(sentence)}
    if len(users) == 1:
        return Parsed(users.pop())
    # a clause that is the answer first: a reason's comparative ("[User B], since [User A] prefers comedies")
    # names the other user
    verdict = _clause_verdict(sentence, pattern) or _direct_verdict(sentence) \
        or _clause_verdict(sentence, pattern, strict=False)
    if verdict is None:
        return Parsed(None, valid=False, error=f"no verdict: the answer's first sentence names both users "
                                               f"({sentence.strip()[:80]!r})")
    return Parsed(verdict)


_CLAUSE = re.compile(r"[,;:()\u2014\u2013]|\b(?:since|because|while|whereas|as|but)\b", re.I)
#: a conclusion after a clause break ("..., so [User B] is more likely"), not an intensifier ("so much more")
_CONCLUSION = re.compile(r"(?:[,;\u2014\u2013]\s*|\band\s+)(?:so|therefore|thus|hence)\b|\b(?:therefore|thus|hence)\b",
                         re.I)
_NEGATED = re.compile(r"\bnot\b|n['’]t\b", re.I)


#: a clause that says it is the answer: "The answer is [User B]", "I choose [User B]", "Probably [User B]", "[User B]
#: is my pick" (the user written as U)
_WORDED_ANSWER = re.compile(
    r"\W*(?:(?:so|then|therefore|thus|hence)\W+)?(?:(?:I\s+think|I\s+believe|probably|(?:most\s+)?likely|definitely"
    r"|clearly|surely)\W+)?(?:(?:(?:the\s+)?(?:final\s+)?answer|my\s+(?:pick|choice|answer))\s+(?:is|would\s+be)\W+"
    r"|I(?:'d|’d|\s+would)?\s+(?:choose|pick|say|select|go\s+with)\W+|it(?:'s|’s|\s+is|\s+would\s+be)\W+)?U"
    r"(?:\W+(?:it\s+is|is\s+(?:the|my)\s+(?:answer|pick|choice)|is\s+the\s+one|for\s+sure))?\W*", re.I)
_NAME_ONLY = re.compile(r"\W*U\W*")
#: what may follow a clause that is a user's name alone for it to be the answer: a reason, the other user
#: ("[User B] (not [User A])"), the sentence's end; not more about that user ("[User A], who likes comedies, is
#: less likely ...", "[User A]: 2/5, [User B]: 4/5")
_AFTER_NAME = re.compile(r"[,;(\u2014\u2013\s]*(?:$|(?P<reason>since|because|as(?!\s+well\s+as\b)|while|whereas|but|though|although)\b"
                         r"|(?:not\s+)?(?:\[\s*user\s*[ab]\s*\]|\buser\s*[ab]\b))", re.I)


_BREAK = re.compile(r"[,;:\u2014\u2013]")
#: reasons, not contrasts ("[User A] prefers comedies, while [User B] is more likely ..." puts the verdict last)
_REASON_WORD = re.compile(r"\s*(?:since|because|as|given|considering)\b", re.I)
_BREAK_OR_REASON = re.compile(r"[,;:\u2014\u2013]|\b(?P<reason>since|because|given|considering)\b", re.I)


def _direct_verdict(sentence: str) -> str | None:
    """`_verdict` for a direct answer's first sentence: after its last conclusion ("[User A] is more into comedies,
    so [User B] is more likely" is B); else its first comparative when a reason follows it ("[User B] is more
    likely, since [User A] prefers dramas" is B, where the last comparative's subject was taken); else its last
    ("Since [User A] prefers comedies more, [User B] is more likely" is B)."""
    conclusions = list(_CONCLUSION.finditer(sentence))
    if conclusions:
        after = _verdict(sentence[conclusions[-1].end():])
        if after is not None:
            return after
    first = _SUBJECT_CMP.search(sentence)
    # the first comparative is the verdict only when it opens the sentence's first clause and a reason follows
    # it; a reason first ("Since [User A] prefers comedies more, [User B] is more likely") ends in the verdict
    if first and not _BREAK.search(sentence, 0, first.start()):
        nxt = _BREAK_OR_REASON.search(sentence, first.end())  # the next clause break, or a reason word without one
        if nxt and (nxt.group("reason") or _REASON_WORD.match(sentence, nxt.end())):
            return _verdict(sentence[: first.end()])
    return _verdict(sentence)


def _clause_verdict(sentence: str, pattern: re.Pattern, *, strict: bool = True) -> str | None:
    """The user of the first clause that is the answer (`_WORDED_ANSWER`, or the name alone before a reason or the
    end): "[User B], since [User A] dislikes dramas", "The answer is [User B]; [User A] ...", "Comparing [User A]
    and [User B], I choose [User B]" are B. A clause about one user ("Given that [User A] mostly watches comedies,
    [User B] would enjoy it"; "[User A], who likes comedies, is less likely") is no answer; None when no clause
    is one ("Both [User A] and [User B] would enjoy it"). `strict`: a name alone before a reason only when the
    reason is about the other user ("[User B], since [User A] prefers comedies"), not when it goes on about the
    named one ("[User A], as a romance lover, would not enjoy it, so [User B] is more likely": `_verdict` reads
    that first)."""
    pieces, pos = [], 0
    for m in _CLAUSE.finditer(sentence):
        pieces.append((sentence[pos:m.start()], sentence[m.start():]))
        pos = m.end()
    pieces.append((sentence[pos:], ""))
    for clause, rest in pieces:
        users = [m.group(1).upper() for m in pattern.finditer(clause)]
        if len(users) != 1 or _NEGATED.search(clause):
            continue
        bare = pattern.sub("U", clause)
        if _NAME_ONLY.fullmatch(bare):
            tail = rest.rstrip(".!? \n")
            after = _AFTER_NAME.match(tail)
            if after is None:
                continue
            if not strict or not after.group("reason"):
                return users[0]
            # the reasons up to a conclusion ("so [User B] is more likely") must be about the other user
            reasons = _CONCLUSION.split(tail[after.end():], maxsplit=1)[0]
            if any(x.group(1).upper() != users[0] for x in pattern.finditer(reasons)):
                return users[0]
        elif _WORDED_ANSWER.fullmatch(bare):
            return users[0]
    return None


def _index(v) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str):
        m = _INDEX.match(v)
        if m:
            return int(m.group(1))
    return None


def parse_ranking(text: str, n: int) -> Parsed:
    """{"predicted_ranking": [...]} with each user index 1..n exactly once, most preferred first."""
    raw = None
    objects = flat_json_objects(text)
    for obj in reversed(objects):  # the format's own key first, wherever it is, then any "rank" key
        k = _own_key(obj, "predicted_ranking")
        if k is not None:  # the last one decides: an earlier draft is not the answer
            raw = obj[k]
            if isinstance(raw, str):
                raw = [x.strip().strip("\"'") for x in raw.strip().strip("[]").split(",") if x.strip()]
            if not isinstance(raw, list):
                return Parsed(None, valid=False, error=f'the answer\'s "predicted_ranking" is {json.dumps(raw)[:40]}: '
                                                       "not a list of user indices")
            break
    if raw is None:
        found = _RANKING_KV.findall(scan(text)[0])
        if found:
            raw = [x.strip().strip("\"'") for x in found[-1].split(",") if x.strip()]
    if raw is None:
        for obj in reversed(objects):
            keys = [k for k in obj if "rank" in k.lower()]
            if keys and isinstance(obj[keys[-1]], list):
                raw = obj[keys[-1]]
                break
    if raw is None:
        return Parsed(None, valid=False, error='no {"predicted_ranking": [...]} in the answer')
    idx = [_index(v) for v in raw]
    if any(i is None for i in idx):
        return Parsed(raw, valid=False, error=f"ranking has entries that are not user indices: {raw!r:.80}")
    if sorted(idx) != list(range(1, n + 1)):
        return Parsed(idx, valid=False, error=f"ranking {idx} is not a permutation of 1..{n}")
    return Parsed(idx)


def majority(values: list) -> object:
    """Most frequent value; among equally frequent values the one that appeared first (deterministic)."""
    counts: dict[str, int] = {}
    first: dict[str, object] = {}
    for v in values:
        key = json.dumps(v, sort_keys=True)
        counts[key] = counts.get(key, 0) + 1
        first.setdefault(key, v)
    if not counts:
        return None
    top = max(counts.values())
    return next(first[k] for k in first if counts[k] == top)
