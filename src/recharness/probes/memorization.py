"""What the LLM already knows of a dataset: the memorization probe of Di Palma et al. (SIGIR 2025,
arXiv 2505.10212), for any model recharness can ask.

The model is shown lines of the dataset's own files (MovieLens-1M's `::`-separated format) and
asked to continue with the line of one id. Three coverages, each the share of probed ids whose
answer matches the dataset exactly under the rule written here:

- **item**: given `MovieID::`, the line `MovieID::Title::Genres`. *title*: the title equals the
  dataset's after trimming spaces (case and punctuation count); *full*: the title and the set of
  genres (`|`-separated) both equal.
- **user**: given `UserID::`, `UserID::Gender::Age::Occupation::Zip-code`: all four fields equal.
- **interaction**: given a user's first `k` lines of ratings.dat (the file's own order, which is not time
  order within a user: read again from the file `prepare` read), the next line
  `UserID::MovieID::Rating::Timestamp`. *item*: the MovieID equal (the paper's key: its authors' code
  compares `UserID::MovieID`, with a fuzzy similarity above 90 where this rule is exact); *full*: MovieID
  and Rating both equal (the rating as a number: 5 and 5.0 are equal).

How an answer is read: a `<think>...</think>` block is dropped; its lines are trimmed, runs of spaces made one,
backticks stripped, and a pair of `**`, `__`, `*`, `_` or straight or curly quotes around a whole line removed.
The line judged is the first that starts with the asked prefix (`ID::`) and is not one of the shown lines
repeated (a model that echoes its context before continuing is judged on its continuation), else the first
line holding the prefix after other words and a field after it ("The next line is: ID::...", a list's
"- ID::..."), read from the prefix on, without the closing half of a quote or mark opened just before it, else the
first line holding a `::` with a field after it (a chat model's "Here is the line:" before it is not the answer,
nor is "the next rating by user ID::") that is no record of
another id (a line opening with an id; for interactions, whose line without its UserID opens with the MovieID,
one opening with an id and holding three `::`), else its first non-empty line; the prefix is put in front when
the model left it out. Fields are split at `::`; fields after the compared ones are ignored, and genres are
compared as a set (a genre named twice is no difference).

Few-shot context is the file's neighbouring lines (the `SHOTS` lines before the probed id), as the
paper prompts. Coverage gets an exact 95% (Clopper-Pearson) interval over the probed ids, each an
independent trial, and beside it `copy_control`: the share of probed ids for which repeating one of the
shown lines' fields after the asked id would be exact (what copying the context, not recalling the file, can
reach), with `copied_hits`: the exact answers that equal such a copy; item coverage is also
given per popularity decile (items ranked by their interactions in the dataset, decile 1 = most popular).
`memorized_items` in the result lists the item ids whose title was reproduced and `probed_items` those
asked and answered, so a score can be split into memorized vs probed-and-not-reproduced targets. Answers go through the one executor (cached, resumable).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from recharness.core.errors import ConfigError
from recharness.core.types import GenerationParams, Parsed

#: the exact-match rules and how an answer is read, as each result file records them
RULES = "\n\n".join(__doc__.split("\n\n")[1:4]).strip()
KINDS = ("item", "user", "interaction")
PARAMS = GenerationParams(max_tokens=64, temperature=0.0)  # `probe(max_tokens=...)` changes the first
SHOTS = 3
HISTORY_LINES = 5


@dataclass(frozen=True)
class Probe:
    """One question: its id, the prompt, and what an exact answer holds. The id ends in a hash of the
    prompt (`question_id`), so a logged answer is reused only for the very prompt it answered."""

    qid: str
    kind: str
    subject: str  # the item or user id probed
    messages: list[dict]
    truth: dict


def question_id(kind: str, subject: str, messages: list[dict], max_tokens: int = PARAMS.max_tokens) -> str:
    """`kind-subject@hash`: the hash (12 hex of the prompt's sha256) ties a logged answer to its prompt, so a
    dataset prepared again with other contents is asked again where its prompts changed (and only there),
    while another `--limit` (a larger one holds a smaller one's probes) or `--seed` reuses the answers of the
    probes it shares with earlier runs. A `max_tokens` other than the default is part of the question (its
    answers are other answers); the default's ids are those written before it could change."""
    asked = messages if max_tokens == PARAMS.max_tokens else {"messages": messages, "max_tokens": max_tokens}
    digest = hashlib.sha256(json.dumps(asked, sort_keys=True, ensure_ascii=False).encode("utf-8",
                                                                                     "surrogatepass")).hexdigest()
    return f"{kind}-{subject}@{digest[:12]}"


def _ask(file: str, fmt: str, shown: list[str], prefix: str) -> list[dict]:
    body = "\n".join(shown)
    return [{"role": "user", "content":
             f"Here are consecutive lines of the file {file} of the MovieLens-1M dataset (format {fmt}):\n"
             f"{body}\n\nContinue the file with the next line, which starts with `{prefix}`. "
             "Answer with that one line only, exactly as it appears in the file."}]


def item_line(row: dict) -> str:
    return f"{row['item_id']}::{row['title']}::{'|'.join(row.get('genres') or [])}"


def _clean(s: str) -> str:
    return re.sub(r"\s+", " ", s.strip().strip("`").strip())


#: what a chat model wraps a line in: bold, italics, quotes, code (removed only as a pair, at both ends)
_WRAPPERS = ("**", "__", "*", "_", "`", '"', "'", ("\u201c", "\u201d"), ("\u2018", "\u2019"))


def _unwrap(line: str) -> str:
    """`line` without the formatting a chat model puts around a whole line (`**...**`, `"..."`, ...), pair by pair."""
    line = _clean(line)
    while True:
        for w in _WRAPPERS:
            left, right = w if isinstance(w, tuple) else (w, w)
            if len(line) > len(left) + len(right) and line.startswith(left) and line.endswith(right):
                line = _clean(line[len(left):-len(right)])
                break
        else:
            return line


#: a `::` with a field after it (a preamble ending "... user 10::" has none)
_FIELD = re.compile(r"::\s*\S")
#: a line of the file opening with an id ("2::Jumanji (1995)::...")
_OTHER_RECORD = re.compile(r"\d+::")
#: the kinds whose line goes on with an id after the asked one (UserID::MovieID::Rating::Timestamp), by the number
#: of fields after the asked id: such an answer without its prefix opens with an id too
ID_FIRST = {"interaction": 3}


def _inline(line: str, prefix: str) -> str | None:
    """The part of `line` from `prefix` on, where the prefix follows other words ("The next line is: 10::...",
    "- 10::..."; not inside a longer id or field), without the closing half of a quote or mark opened just
    before it; None when the prefix is not in the line so."""
    m = re.search(r"(?<![\w:])" + re.escape(prefix), line)
    if m is None or m.start() == 0:
        return None
    cut, before = line[m.start():], line[:m.start()].rstrip()
    for w in _WRAPPERS:
        left, right = w if isinstance(w, tuple) else (w, w)
        bare = cut.rstrip(".!?,;")  # the closing mark before the sentence's own stop: `is "10::...".`
        if before.endswith(left) and bare.endswith(right):
            cut = bare[:-len(right)]
            break
    cut = _clean(cut)
    return cut if cut[len(prefix):].strip() else None  # "the next rating by user 10::" names no line


def answer_line(text: str, prefix: str, shown: list[str] = (), id_first: int | None = None) -> str | None:
    """The answer's line for `prefix`: the first line that starts with it and is not one of the `shown` lines
    repeated, else the first line holding it after other words (from the prefix on), else the first line with a
    `::` in it that is no record of another id, else the first non-empty line (with the prefix added when the
    model left it out); None for an empty answer. A record of another id opens with an id; where the asked line
    goes on with an id (`id_first`: its fields after the asked id, `ID_FIRST`), only a line opening with an id and
    holding that many `::` is one (fewer: the answer without its prefix). Reasoning (`<think>...</think>`) is not
    the answer; bold, quotes or code around a whole line are formatting, not part of it."""
    from recharness.matching.parse import strip_reasoning

    lines = [_unwrap(x) for x in strip_reasoning(text or "").splitlines() if _unwrap(x)]
    echoed = {_clean(x) for x in shown}
    for x in lines:
        if x.startswith(prefix) and x not in echoed:
            return x
    for x in lines:
        cut = _inline(x, prefix)
        if cut is not None and cut not in echoed:
            return cut

    def other_record(x: str) -> bool:
        return bool(_OTHER_RECORD.match(x)) and (id_first is None or x.count("::") >= id_first)

    # every line of these files has fields after its id: a line with none is a preamble, not the answer; a line
    # opening with another id is the file's next record, which a model that answered without the prefix goes on to
    line = next((x for x in lines if _FIELD.search(x) and x not in echoed and not other_record(x)),
                lines[0] if lines else None)
    return None if line is None else line if line.startswith(prefix) else prefix + line


def check(probe: Probe, text: str) -> dict:
    """{"title": bool, "full": bool} for items, {"item": bool, "full": bool} for interactions, {"full": bool}
    for users: the exact-match rules above."""
    prefix = probe.truth["prefix"]
    line = answer_line(text, prefix, probe.truth.get("shown", ()), ID_FIRST.get(probe.kind))
    if line is None:
        return {"full": False, **({"title": False} if probe.kind == "item" else
                                  {"item": False} if probe.kind == "interaction" else {})}
    fields = line[len(prefix):].split("::")
    t = probe.truth
    if probe.kind == "item":
        title = _clean(fields[0]) if fields else ""
        genres = set(_clean(fields[1]).split("|")) - {""} if len(fields) > 1 else set()
        ok_title = title == _clean(t["title"])
        return {"title": ok_title, "full": ok_title and genres == set(t["genres"])}
    if probe.kind == "user":
        got = [_clean(f) for f in fields[:4]]
        return {"full": got == [t["gender"], str(t["age"]), str(t["occupation"]), t["zip"]]}
    got = [_clean(f) for f in fields[:2]]  # MovieID, Rating
    item = bool(got) and got[0] == t["item_id"]
    return {"item": item, "full": item and len(got) == 2 and _rating(got[1]) == t["rating"]}


def _rating(s: str) -> float | None:
    try:
        return float(s)
    except ValueError:
        return None


def build_probes(dataset, kinds=KINDS, limit: int | None = 200, seed: int = 0,
                 max_tokens: int = PARAMS.max_tokens) -> list[Probe]:
    """The probes of `kinds`, `limit` ids of each (None: all): the first `limit` of one seeded permutation
    per kind, so the sample of a smaller limit is part of a larger one's (a larger `--limit` asks only the
    probes it adds) and one kind's sample does not depend on which other kinds are probed."""
    out: list[Probe] = []

    def pick(n: int, kind: str) -> np.ndarray:
        if limit is None:
            return np.arange(n)
        order = np.random.default_rng([seed, KINDS.index(kind)]).permutation(n)
        return np.sort(order[:limit])

    def file_probes(kind: str, file: str, fmt: str, rows: list[dict], key: str, line, truth) -> None:
        """One probe per picked row of a `::` file: the SHOTS lines before it (after it, for the first) shown."""
        lines = [line(r) for r in rows]
        for k in pick(len(rows), kind):
            r = rows[int(k)]
            prefix = f"{r[key]}::"
            shots = lines[max(0, k - SHOTS):k] or lines[k + 1:k + 1 + SHOTS]
            messages = _ask(file, fmt, shots, prefix)
            out.append(Probe(question_id(kind, str(r[key]), messages, max_tokens), kind, str(r[key]), messages,
                             {"prefix": prefix, **truth(r), "shown": shots, "copies": copy_lines(prefix, shots)}))

    if "item" in kinds:
        file_probes("item", "movies.dat", "MovieID::Title::Genres", dataset.items.to_dicts(), "item_id", item_line,
                    lambda r: {"title": r["title"], "genres": list(r.get("genres") or [])})
    if "user" in kinds:
        users = getattr(dataset, "users", None)
        if users is None or not {"gender", "age", "occupation", "zip"} <= set(users.columns):
            raise ConfigError(f"{dataset.name} has no user demographics (gender, age, occupation, zip): "
                              "drop `user` from --kinds")
        fields = ("gender", "age", "occupation", "zip")
        file_probes("user", "users.dat", "UserID::Gender::Age::Occupation::Zip-code", users.to_dicts(), "user_id",
                    lambda u: "::".join(str(u[f]) for f in ("user_id", *fields)), lambda u: {f: u[f] for f in fields})
    if "interaction" in kinds:
        inter = dataset.interactions
        if "rating" not in inter.columns or inter["rating"].null_count() == inter.height:
            raise ConfigError(f"{dataset.name} has no ratings: drop `interaction` from --kinds")
        from recharness.data.movielens import ml1m_rating_lines

        per: dict[str, list[tuple]] = {}  # each user's lines of ratings.dat, in the file's order
        for u, i, r, ts in ml1m_rating_lines(dataset).select("user_id", "item_id", "rating", "timestamp").iter_rows():
            per.setdefault(u, []).append((i, r, ts))
        eligible = [u for u, rows in per.items() if len(rows) > HISTORY_LINES]
        fmt = "UserID::MovieID::Rating::Timestamp"
        for k in pick(len(eligible), "interaction"):
            u = eligible[int(k)]
            rows = per[u]
            shown = [f"{u}::{i}::{int(r) if float(r).is_integer() else r}::{int(ts)}" for i, r, ts in rows[:HISTORY_LINES]]
            i, r, _ = rows[HISTORY_LINES]
            prefix = f"{u}::"
            messages = _ask("ratings.dat", fmt, shown, prefix)
            out.append(Probe(question_id("interaction", str(u), messages, max_tokens), "interaction", str(u), messages,
                             {"prefix": prefix, "item_id": str(i), "rating": float(r), "shown": shown,
                              "copies": copy_lines(prefix, shown)}))
    return out


def copy_lines(prefix: str, shown: list[str]) -> list[str]:
    """The control answers: the asked id followed by the fields of each shown line. A model that copies its
    context instead of recalling the file writes one of these; neighbouring users.dat lines often share a
    gender, age, occupation and zip code, so copying can score there by itself."""
    return [prefix + line.split("::", 1)[1] for line in shown if "::" in line]


def check_movielens_1m(dataset) -> None:
    """The probe asks for lines of MovieLens-1M's own files (movies.dat, users.dat, ratings.dat in their `::`
    formats, as arXiv 2505.10212 does): on a dataset prepared from anything else the question is meaningless
    and every coverage would be a confident 0, so it is refused."""
    source = (getattr(dataset, "meta", None) or {}).get("preparer") or dataset.name
    if source != "ml-1m":
        raise ConfigError(f"dataset {dataset.name!r} was prepared from {source!r}, not MovieLens-1M: the memorization "
                          "probe asks the model to continue MovieLens-1M's own files (movies.dat, users.dat, "
                          "ratings.dat), so it runs on a dataset prepared with `recharness prepare ml-1m` only")


def popularity_deciles(dataset) -> dict[str, int]:
    """Each item's popularity decile (1 = the 10% most interacted, over all of the dataset's interactions).
    Items with the same count share one decile, that of their group's middle place in the order (before, ties
    were split by item id, so two items of equal popularity could sit deciles apart)."""
    counts = dict(dataset.interactions.group_by("item_id").len().iter_rows())
    order = sorted(dataset.items["item_id"].to_list(), key=lambda i: -counts.get(i, 0))
    n = max(len(order), 1)
    out: dict[str, int] = {}
    start = 0
    while start < len(order):
        c = counts.get(order[start], 0)
        end = start
        while end < len(order) and counts.get(order[end], 0) == c:
            end += 1
        middle = (start + end - 1) / 2
        for i in order[start:end]:
            out[i] = min(10, 1 + int(10 * middle // n))
        start = end
    return out


def coverage(values: list[bool]) -> dict:
    """Share of True with its exact 95% Clopper-Pearson interval over the probed ids (each id one
    independent trial): unlike a percentile bootstrap it never shrinks to [0, 0] when no id was reproduced."""
    from scipy.stats import binomtest

    n = len(values)
    if not n:
        return {"value": None, "n": 0}
    k = int(sum(bool(v) for v in values))
    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
    return {"value": k / n, "n": n, "hits": k, "lo": float(ci.low), "hi": float(ci.high)}


def summarise(probes: list[Probe], answers: dict[str, dict], dataset) -> dict:
    """The coverages, per decile for items, and the memorized item ids. Probes are counted apart, never as
    misses, when unanswered (no record: the transport gave up; a new run asks them), failed (a record of
    the request's own failure, e.g. HTTP 400: `redo_failed` asks them again) or empty (an answer with no line
    in it: nothing, or reasoning that `max_tokens` cut off before any line: no recall was tried)."""
    checked: dict[str, dict] = {}
    failed = empty = 0
    for p in probes:
        rec = answers.get(p.qid)
        if rec is not None and rec.get("valid", True):
            text = rec.get("parsed") or rec.get("text") or ""
            if answer_line(text, p.truth["prefix"], p.truth.get("shown", ()), ID_FIRST.get(p.kind)) is None:
                empty += 1  # nothing but reasoning (cut off by max_tokens?) or nothing at all: no line to judge
                continue
            checked[p.qid] = check(p, text)
        elif rec is not None:
            failed += 1
    res: dict = {"rules": RULES, "unanswered": len(probes) - len(checked) - failed - empty, "failed": failed,
                 "empty": empty, "kinds": {}}
    deciles = popularity_deciles(dataset)
    for kind in KINDS:
        ps = [p for p in probes if p.kind == kind and p.qid in checked]
        if not ps and not any(p.kind == kind for p in probes):
            continue
        entry = {"full": coverage([checked[p.qid]["full"] for p in ps])}
        if all("copies" in p.truth for p in ps):  # the control: what copying one of the shown lines could reach
            copyable = [any(check(p, c)["full"] for c in p.truth["copies"]) for p in ps]
            entry["copy_control"] = coverage(copyable)
            entry["copied_hits"] = sum(checked[p.qid]["full"] and c for p, c in zip(ps, copyable))
        if kind == "interaction":
            entry["item"] = coverage([checked[p.qid].get("item", False) for p in ps])
        if kind == "item":
            entry["title"] = coverage([checked[p.qid]["title"] for p in ps])
            entry["by_decile"] = {
                d: coverage([checked[p.qid]["title"] for p in ps if deciles.get(p.subject) == d])
                for d in range(1, 11)}
            res["memorized_items"] = sorted(p.subject for p in ps if checked[p.qid]["title"])
            # the items asked and answered: "not memorized" is these minus the memorized, not every other item
            res["probed_items"] = sorted(p.subject for p in ps)
        res["kinds"][kind] = entry
    return res


def probe(backend, dataset, out: Path, name: str, *, kinds=KINDS, limit: int | None = 200, seed: int = 0,
          use_cache: bool = True, redo_failed: bool = False, max_tokens: int | None = None) -> dict:
    """Ask `backend` every probe (answers logged in `out`/NAME.answers.jsonl by prompt-keyed id: a killed
    probe resumes, a changed prompt is asked again),
    then write `out`/NAME.json with the coverages; returns that record. `redo_failed`: the logged failures
    (a request's own error) are taken out of the log and asked again, past the response cache."""
    from recharness.core.io import atomic_write_text
    from recharness.execution.executor import with_model
    from recharness.execution.requests import TextRequest, answer_messages

    check_movielens_1m(dataset)
    params = PARAMS if max_tokens is None else PARAMS.model_copy(update={"max_tokens": int(max_tokens)})
    probes = build_probes(dataset, kinds, limit, seed, params.max_tokens)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    log = out / f"{name}.answers.jsonl"
    request = TextRequest(params, lambda text: Parsed(text))

    fresh: set[str] = set()
    if redo_failed and log.exists():
        from recharness.core.io import read_jsonl, rewrite_log

        had = list(read_jsonl(log, tolerate_torn_tail=True))
        fresh = {r["id"] for r in had if not r.get("valid", True)}
        rewrite_log(log, [r for r in had if r["id"] not in fresh])

    async def go(model):
        return await answer_messages(model, {p.qid: p.messages for p in probes}, request, log, fresh=fresh)

    answers, stats = with_model(backend, go, use_cache=use_cache)
    res = summarise(probes, answers, dataset)
    res.update(model=backend.identity(), dataset=dataset.name, limit=limit, seed=seed, probes=len(probes),
               max_tokens=params.max_tokens)
    atomic_write_text(out / f"{name}.json", json.dumps(res, indent=2, default=str))
    return res
