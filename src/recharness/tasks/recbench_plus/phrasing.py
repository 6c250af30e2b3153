"""Query text: deterministic templates (default, no LLM) or an LLM with the
paper's generation prompts (RecBench+ Appendix H, Table 6).

Templates read as plain requests ("Can you recommend some war movies
starring Tom Hanks?") and every record says how its text was made
(`query_phrasing`: "template" or "llm:<backend>:<model>"), so results on
template queries are never mistaken for results on the paper's LLM-written
ones. The Appendix H prompts are printed in the paper only up to "..."; the
text after it here (the input block and the output instruction) is ours.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from recharness.tasks.recbench_plus.context import DOMAINS

TEMPLATE = "template"

# ---------------------------------------------------------------- templates

_VERB = {"movie": "watch", "book": "read", "product": "buy"}


def _join(parts: list[str]) -> str:
    parts = [p for p in parts if p]
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def _genre_word(g: str) -> str:
    return g if g.isupper() else g.lower()


def _titles(titles: list[str]) -> str:
    return _join(list(titles))


# relation -> (explicit clause, implicit clause with one reference, with several ({b} = "both " for two),
#              misinformed claim as a sentence of its own)
_CLAUSES = {
    "Directed_by": ("directed by {v}", "directed by the director of {r}", "directed by the person who directed {b}{r}",
                    "I really liked {r}, which {v} directed."),
    "Starring": ("starring {v}", "starring the actor from {r}", "starring the actor who appears in {b}{r}",
                 "I loved {v} in {r}."),
    "Genre": ("in the {v} genre", "in the same genre as {r}", "in the genre that {b}{r} have in common",
              "I enjoyed {r}, which is a {lv} film."),
    "Language": ("in {v}", "in the language of {r}", "in the language that {b}{r} share", "I enjoyed {r}, which is in {v}."),
    "Certificate": ("rated {v}", "with the same rating as {r}", "with the rating that {b}{r} share",
                    "I enjoyed {r}, which is rated {v}."),
    "Release_decade": ("released in the {v}", "released in the same decade as {r}", "released in the decade of {b}{r}",
                       "I enjoyed {r}, which came out in the {v}."),
    "Store": ("from {v}", "from the same brand as {r}", "from the brand behind {b}{r}", "I liked {r} from {v}."),
    "Author": ("written by {v}", "written by the author of {r}", "written by the author of {b}{r}", "I loved {r} by {v}."),
    "Category": ("in the {v} category", "in the same category as {r}", "in the category that {b}{r} share",
                 "I liked {r} from the {v} category."),
}
_DEFAULT_CLAUSES = ("with {k} {v}", "with the same {k} as {r}", "with the {k} that {b}{r} share", "I liked {r}, with {k} {v}.")


@dataclass(frozen=True)
class ConditionText:
    """One condition as the query should state it."""

    relation: str
    value: str
    mode: str = "explicit"  # explicit | implicit | misinformed
    refs: tuple[str, ...] = ()  # display titles: implicit references or misinformed claims


def clause(c: ConditionText) -> str:
    """The condition as a clause ("directed by X"); a misinformed condition's false claim is `claim(c)`."""
    forms = _CLAUSES.get(c.relation, _DEFAULT_CLAUSES)
    if c.mode in ("explicit", "misinformed"):
        form = forms[0]
    elif c.mode == "implicit":
        form = forms[1] if len(c.refs) == 1 else forms[2]
    else:
        raise ValueError(f"unknown condition mode {c.mode!r}")
    return _fill(form, c)


def claim(c: ConditionText) -> str:
    """The false claim of a misinformed condition, as a sentence ("I loved X in <a film X is not in>.")."""
    return _fill(_CLAUSES.get(c.relation, _DEFAULT_CLAUSES)[3], c)


def _fill(form: str, c: ConditionText) -> str:
    return form.format(v=c.value, lv=_genre_word(c.value), r=_titles(list(c.refs)), k=c.relation.replace("_", " ").lower(),
                       b="both " if len(c.refs) == 2 else "")


def condition_phrase(conds: list[ConditionText], domain: str) -> str:
    """"war movies starring Tom Hanks": stated genres become adjectives, the rest clauses."""
    plural = DOMAINS[domain][1]
    genres = [c for c in conds if c.relation == "Genre" and c.mode != "implicit"]
    rest = [c for c in conds if not (c.relation == "Genre" and c.mode != "implicit")]
    head = plural
    if genres:
        head = " ".join(_genre_word(g.value) for g in genres) + " " + plural
    clauses: list[str] = []
    stated: dict[str, list[str]] = {}  # relation -> values stated outright, one clause per relation
    slot: dict[str, int] = {}
    for c in rest:
        if c.mode == "implicit":
            clauses.append(clause(c))
            continue
        if c.relation not in stated:
            stated[c.relation] = []
            slot[c.relation] = len(clauses)
            clauses.append("")
        stated[c.relation].append(c.value)
    for rel, vals in stated.items():
        clauses[slot[rel]] = clause(ConditionText(rel, _join(vals)))
    return f"{head} {_join(clauses)}".strip()


def template_condition_queries(conds: list[ConditionText], domain: str) -> tuple[str, str]:
    """(direct, situational) template queries for a condition set; a false claim comes first, as context."""
    phrase = condition_phrase(conds, domain).rstrip(".")
    claims = " ".join(claim(c) for c in conds if c.mode == "misinformed")
    lead = f"{claims} " if claims else ""
    direct = f"{lead}Can you recommend some {phrase}?"
    situational = f"{lead}I'm looking for something to {_VERB[domain]}: {phrase}. What would you suggest?"
    return direct, situational


_OCCUPATIONS = {
    "other": "", "academic/educator": "academic", "clerical/admin": "clerical worker",
    "college/grad student": "college student", "customer service": "customer service worker",
    "doctor/health care": "health-care worker", "executive/managerial": "executive", "retired": "retiree",
    "sales/marketing": "salesperson", "self-employed": "self-employed professional",
    "technician/engineer": "engineer", "tradesman/craftsman": "craftsman", "unemployed": "jobseeker",
}


_AGE = {"Under 18": "under-18", "56+": "56-or-older"}


def describe_group(attrs: dict[str, str]) -> str:
    """"a 25-34-year-old male programmer", "a woman", "an executive"."""
    age, gender, occ = attrs.get("age"), attrs.get("gender"), attrs.get("occupation")
    noun = _OCCUPATIONS.get(occ, occ) if occ else ""
    words = []
    if age:
        words.append(_AGE.get(age, f"{age}-year-old"))
    if gender:
        if noun:
            words.append({"Male": "male", "Female": "female"}.get(gender, gender.lower()))
        else:
            noun = {"Male": "man", "Female": "woman"}.get(gender, "person")
    words.append(noun or "person")
    text = " ".join(words)
    return ("an " if text[:1].lower() in "aeiou" and not text.startswith("one") else "a ") + text


def template_demographics_query(attrs: dict[str, str], domain: str) -> str:
    plural = DOMAINS[domain][1]
    return f"I'm {describe_group(attrs)}. Which {plural} do people like me enjoy most? Please recommend some."


def template_interest_query(previous: list[str], domain: str) -> str:
    plural = DOMAINS[domain][1]
    return (f"I recently enjoyed {_titles(previous)}. Which {plural} would suit the same interests "
            f"for what I {_VERB[domain]} next?")


# ---------------------------------------------------------------- Appendix H prompts

EXPLICIT_PROMPT = (
    "You are given a set of attributes. Please simulate a real user and generate a natural language query covering "
    "these attributes to search or request recommendations for related {plural}. The attributes are {conditions}"
)
IMPLICIT_PROMPT = (
    "You are given a set of attributes and relevant information for [MASK] attributes. Your task is to generate a "
    "query that meets the following criteria: - Query should ask for items that share the input attributes. - Do not "
    "directly mention the [MASK] attribute that has additional relevant information (e.g., name of cinematography or "
    "starring role) in queries. Instead, describe the [MASK] attribute using the relevant information provided. "
    "The input attributes and relevant information is: {conditions}"
)
MISINFORMED_PROMPT = (
    "You are given a set of attributes and relevant information for one of the attributes. Your task is to generate "
    "query that meets the following criteria: - Imagine you are a real user, queries should ask for {plural} that "
    "share the input attributes. - One of the attributes is provided with relevant information, such as the {one} "
    "name, the relation between the {one} and the attribute, and the person's name. You should describe this "
    "attribute using the relevant information provided. - There may be factual errors between the relevant "
    "information and the corresponding attribute, but you still need to describe it based on the relevant "
    "information provided without making corrections or explanations. The input attributes and relevant information "
    "is: {conditions}"
)
_QUERY_ONLY = "\n\nWrite only the user's query, in one or two sentences, with no preamble."

INTEREST_PROMPT = (
    "## Input Introduction You are given a \"Popular {One} List\" and \"Previous {One} Statistics\". \"Popular {One} "
    "List\" represents {plural} collectively watched by multiple users, while \"Previous {One} Statistics\" refers to "
    "the statistics of {plural} that some users watched before watching the \"Popular {One} List\". Here is an "
    "example: - Popular {One} List: [A, D, M, ...] - Previous {One} Statistics: - [Z, V, K], count: 6 - [M, O, Z,Y], "
    "count: 5 - [Y, C, E, O, Z], count: In this example, 6 users watched [A, D, M, ...] after watching [Z, V, K] "
    "## Task Introduction 1. Step 1: Generate Reasons Please use all your knowledge about these {plural} to analyze "
    "why users watch {plural} in the Popular {One} List after watching Previous {Plural}. What is the relationship "
    "between them? Do not give reasons that are too far-fetched or broad. If you think it cannot be explained, don't "
    "force an explanation. 2. Step 2: Generate User Queries and Answers For each reason you generate: - Create "
    "realistic user queries . These queries should simulate how a real user might ask recommender systems for {one} "
    "recommendations using natural language. The query should be as complex and rich as possible, close to the "
    "reason, and specific enough not to make the recommendation system recommend {plural} other than the subset of "
    "answers. - Provide a subset of the Popular {One} List/Previous {Plural} as the answer, ensuring the "
    "recommendations align with the reason and query. This subset will serve as the answer to the query, so do not "
    "mention the {one} title of the subset in the query. ## Output Format The output must follow this JSON structured "
    "format: ['reason ': , 'query ': , '{one} subset ': , 'reason ': , 'query ': , '{one} subset ': , ...]"
)
DEMOGRAPHICS_PROMPT = (
    "You are tasked with analyzing a specific user group and their {one} preferences. Based on the provided data, you "
    "should generate structured reasons, user queries, and answers in a clear and organized format. Follow these steps "
    "to complete the task:\n\nInput Data:\n\n1. **User Group**: A description of the user group. 2. **List of "
    "{Plural}**: A ranked list of {plural} relevant to the user group, including their titles, release years, TF-IDF "
    "scores, and the percentage of users in the group who viewed them.\n\nYour Task:\n\n1. **Step 1: Generate "
    "Reasons** Analyze the user group description and the provided {one} list. Generate a structured list of reasons "
    "explaining why this user group prefers these {plural}.\n\n2. **Step 2: Generate User Queries and Answers** For "
    "each reason you generate:\n\n- Create **realistic user queries** that naturally combine the reason and user group "
    "characteristics. These queries should simulate how a real user from the group might ask recommender systems for "
    "{one} recommendations using natural language.\n\n- Provide a **subset of the {one} list** as the answer, "
    "ensuring the recommendations align with the reason and query. Use the {one} title to represent a {one}."
)
_JSON_ONLY = ('\n\nAnswer with a JSON list only, e.g. [{{"reason": "...", "query": "...", "{one} subset": '
              '["Title (Year)", ...]}}].')


def _fmt(template: str, domain: str, **kw) -> str:
    one, plural = DOMAINS[domain]
    return template.format(one=one, One=one.capitalize(), plural=plural, Plural=plural.capitalize(), **kw)


_NOUNS = {"Directed_by": "director", "Starring": "star", "Genre": "genre", "Language": "language",
          "Certificate": "rating", "Release_decade": "release decade", "Store": "brand", "Author": "author",
          "Category": "category"}


def condition_prompt(kind: str, conds: list[ConditionText], domain: str) -> list[dict]:
    """The Appendix H prompt for one explicit / implicit / misinformed condition set."""
    items = []
    for c in conds:
        if c.mode == "implicit":
            items.append(f"{c.relation}: [MASK] (relevant information: {clause(c)})")
        elif c.mode == "misinformed":
            noun = _NOUNS.get(c.relation, c.relation.replace("_", " ").lower())
            items.append(f"{c.relation}: {c.value} (relevant information: {c.value} is the {noun} of {_titles(list(c.refs))})")
        else:
            items.append(f"{c.relation}: {c.value}")
    block = "; ".join(items)
    tpl = {"explicit": EXPLICIT_PROMPT, "implicit": IMPLICIT_PROMPT, "misinformed": MISINFORMED_PROMPT}[kind]
    return [{"role": "user", "content": _fmt(tpl, domain, conditions=block) + _QUERY_ONLY}]


def interest_prompt(popular: list[str], previous: list[tuple[list[str], int]], domain: str) -> list[dict]:
    one = DOMAINS[domain][0]
    lines = [f"- Popular {one.capitalize()} List: [{', '.join(popular)}]", f"- Previous {one.capitalize()} Statistics:"]
    lines += [f"  - [{', '.join(p)}], count: {n}" for p, n in previous]
    return [{"role": "user", "content": _fmt(INTEREST_PROMPT, domain) + "\n\n" + "\n".join(lines) + _fmt(_JSON_ONLY, domain)}]


def demographics_prompt(summary: str, domain: str) -> list[dict]:
    return [{"role": "user", "content": _fmt(DEMOGRAPHICS_PROMPT, domain) + "\n\n" + summary + _fmt(_JSON_ONLY, domain)}]


# ---------------------------------------------------------------- LLM output handling

_PREAMBLE = re.compile(r"^(?:sure[,!.]?|here(?:'s| is)[^:\n]*:|query:|user query:)\s*", re.IGNORECASE)


def _plural_pattern(word: str) -> str:
    """`word` or its English plural as a regex: -s / -es, and a consonant's -y as -ies ("comedy", "comedies")."""
    w = re.escape(word)
    if len(word) > 1 and word[-1] == "y" and word[-2] not in "aeiouy":
        return rf"(?:{w}s?|{re.escape(word[:-1])}ies)"
    return rf"{w}(?:e?s)?"


def clean_query(text: str | None, forbidden: list[str] = (), required: list[str] = (),
                required_any: list[str] = ()) -> tuple[str | None, str | None]:
    """(query, None) if the LLM wrote a usable query, else (None, why not).

    Usable: a short text that names every `required` string (the people and
    brands the conditions state), at least one of `required_any` (the titles an
    implicit reference or a false claim goes through) and no `forbidden` one
    (an implicit query's hidden value)."""
    if not text or not text.strip():
        return None, "empty answer"
    t = text.strip()
    while True:
        cut = _PREAMBLE.sub("", t, count=1).strip()
        if cut == t:
            break
        t = cut
    t = t.strip('"“”').strip()
    t = t.split("\n\n")[0].strip()
    if len(t) < 10:
        return None, "answer too short"
    if len(t) > 800:
        return None, "answer too long"
    low = t.lower()
    for f in forbidden:  # as a whole word (or its plural): a hidden certificate "R" is not named by "rating", nor
        # "War" by "award"; "westerns" names "Western", "comedies" names "Comedy"
        if f and re.search(rf"(?<!\w){_plural_pattern(f.lower())}(?!\w)", low):
            return None, "the query names the hidden value"
    for r in required:
        if r and r.lower() not in low:
            return None, f"the query omits {r!r}"
    if required_any and not any(r.lower() in low for r in required_any if r):
        return None, "the query names none of the referenced titles"
    return t, None


def parse_subset_queries(text: str | None, one: str = "movie") -> list[dict]:
    """[{reason, query, subset: [titles]}] from the JSON list an Appendix H profile prompt asks for."""
    if not text:
        return []
    s = text.strip()
    i, j = s.find("["), s.rfind("]")
    if i < 0 or j <= i:
        return []
    try:
        data = json.loads(s[i : j + 1])
    except (ValueError, RecursionError):
        return []
    out = []
    for d in data if isinstance(data, list) else []:
        if not isinstance(d, dict):
            continue
        low = {str(k).strip().lower(): v for k, v in d.items()}
        q = low.get("query")
        sub = low.get(f"{one} subset", low.get("subset", low.get("movie subset")))
        if isinstance(q, str) and q.strip() and isinstance(sub, list):
            out.append({"reason": str(low.get("reason", "")), "query": q.strip(),
                        "subset": [str(x) for x in sub if isinstance(x, (str, int))]})
    return out


def run_prompts(model_spec: str, prompts: list[list[dict]], max_tokens: int = 200,
                log: Path | None = None) -> tuple[list[str | None], str]:
    """Generate one answer per prompt through the executor (`execution.requests`: bounded, cached,
    retried; `log` keeps the answers so a killed build resumes).

    Returns (texts, phrasing label). A failed call gives None, never an exception for the whole
    batch: a query then keeps its template text.
    """
    from recharness.core.types import GenerationParams
    from recharness.execution.executor import with_model
    from recharness.execution.requests import TextRequest, answer_messages
    from recharness.models.registry import resolve_model

    backend = resolve_model(model_spec)
    label = f"llm:{backend.name}"
    questions = {f"q{k}": msgs for k, msgs in enumerate(prompts)}

    async def go(model):
        answers, _ = await answer_messages(model, questions, TextRequest(GenerationParams(max_tokens=max_tokens)), log)
        return [answers[q]["output"] if q in answers and answers[q].get("valid") else None for q in questions]

    return with_model(backend, go), label
