"""RecBench+ metrics per query: Precision, Recall, Condition Match Rate, Fail to Recommend.

The answer is parsed into titles and matched to the catalog (recharness.matching),
keeping answer order. Per query, over the recommended list L (the first K
entries when a fixed K was asked for):

* Precision = |L ∩ GT| / |L| (open-ended) or / K (fixed K); an empty L gives 0.
* Recall = |L ∩ GT| / |GT|.
* CMR = share of L satisfying every condition in the KG; titles that match no
  catalog item count as not satisfying, and their share of L is reported
  beside it (`unmatched`). Averaged over queries with a non-empty L: a query
  without recommendations has no CMR (it counts in FTR instead).
* FTR = 1 if the answer recommends nothing (empty, "None", or a refusal that
  names no catalog item), else 0; a catalog title named in prose ("You
  should watch Fargo.") is a recommendation. For misinformed queries higher
  is better.

Unmatched titles keep their slot in L (a hallucinated title is still a
recommendation), so a model cannot gain precision by inventing titles. The
films the query itself names are not recommendations where the answer says
so: an implicit query's reference films always leave L (repeating them is no
CMR), a misinformed query's falsely claimed films when the answer corrects or
refuses in the sentence naming the film or the claimed value ("GoodFellas does
not feature Tom Hanks": the failure to recommend the paper rewards; a note
elsewhere does not count); an answer that lists the claimed film keeps it, a
wrong recommendation. They leave L before it is cut to K.
Queries without a prediction are left out and counted as `missing`.

Beyond accuracy (`metrics.beyond_accuracy`): coverage@10, Gini@10, ARP@10 and novelty@10 of the
catalog items among the first 10 entries of L (`top_lists`; unmatched titles keep their slot there
too and are not counted), against the training part's popularity (each user's last interaction
held out). No head / tail accuracy: the ground truth of a query is a set of items (every history
item meeting the conditions, the user's subset), head and tail items mixed, so there is no single
target whose popularity could split the queries.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable

import numpy as np

from recharness.matching.cues import COMMENDS, COMPARED_BEFORE, DISPRAISE, TASTE_BEFORE, correcting_part
from recharness.matching.parse import list_entry_body, parse_recommendations
from recharness.matching.twins import twins_of, with_twins
from recharness.metrics.ranking import ranking_metrics

UNMATCHED = "\x00unmatched:"  # prefix of placeholder ids; never a catalog id


def resolve_answer(text: str | None, matcher) -> dict:
    """Titles in answer order, each once, with its catalog id (None if unmatched), and the FTR flag.

    Matching is CatalogMatcher.match_answer's (titles split at commas rejoined,
    catalog titles named in prose found); an answer that names a catalog item
    is never a failure to recommend, whatever apologies surround it.
    """
    from recharness.matching import is_refusal
    from recharness.matching.normalize import title_identity

    out_s, out_i, seen, unknown = [], [], set(), set()
    for m in matcher.match_answer(text or ""):
        if m.item_id is not None:
            if m.item_id in seen:
                continue
            seen.add(m.item_id)
        else:  # L holds each recommendation once: an unknown title named twice is one wrong entry, as a known one
            identity = title_identity(m.query)
            if identity in unknown:
                continue
            unknown.add(identity)
        out_s.append(m.query)
        out_i.append(m.item_id)
    ftr = not seen and bool(is_refusal(text, matched=0))
    out = {"strings": out_s, "item_ids": out_i, "ftr": ftr}
    twins = twins_of(matcher, out_i) if hasattr(matcher, "twins") else {}
    if twins:  # a title carried by several ids names each of them: a hit on any counts once (`recommended`)
        out["twins"] = twins
    return out


def unrecognised(pred: dict) -> bool:
    """A valid answer that names titles, none of which the catalog knows (apart from format failures)."""
    parsed = pred.get("parsed") if isinstance(pred.get("parsed"), dict) else {}
    return bool(pred.get("valid", True) and parsed.get("strings")
                and not any(i is not None for i in parsed.get("item_ids") or []))


def named_in_query(sample: dict, text: str | None = None, parsed: dict | None = None) -> set[str]:
    """The catalog ids of the films the query names itself that are not recommendations in the answer `text`:
    an implicit query's reference films always, a misinformed query's falsely claimed ones when the answer
    corrects the premise or refuses in a sentence naming the film or the claimed value (named in a correction,
    they are what the answer rejects), unless a list entry names the film other than as the user's taste, or a
    line is the film alone (`claim_rejected`)."""
    imp = sample.get("implicit") if isinstance(sample.get("implicit"), dict) else {}
    mis = sample.get("misinformed") if isinstance(sample.get("misinformed"), dict) else {}
    ids = [str(i) for i in imp.get("referenceMovieIds") or []]
    if mis and text:
        err = mis.get("errorInfo") or {}
        strings = (parsed or {}).get("strings") or []
        item_ids = (parsed or {}).get("item_ids") or []
        for n, i in enumerate(err.get("movieIds") or []):
            titles = [q for q, j in zip(strings, item_ids) if j is not None and str(j) == str(i)]
            titles += [t for t in (err.get("movies") or [])[n:n + 1] if t]
            if claim_rejected(text, titles, mis.get("value")):
                ids.append(str(i))
    return set(ids)


_SENTENCE_END = re.compile(r"(?<=[.!?])(?<!\b(?:Mr|Ms|Dr|St|Jr|Sr|vs|No)\.)(?<!\bMrs\.)\s+")


def _mention_re(names: Iterable[str]) -> re.Pattern | None:
    """Any of `names` (titles; also without a trailing year, "X, The" also as "The X") as a whole phrase."""
    alts: set[str] = set()
    for t in names:
        t = " ".join(str(t).replace("\u2019", "'").split())
        base = re.sub(r"\s*\(\d{4}\)$", "", t).strip()
        m = re.match(r"^(.+), (The|A|An)$", base)
        alts.update(x for x in (t, base, f"{m.group(2)} {m.group(1)}" if m else "") if len(x) > 1)
    if not alts:
        return None
    alt = "|".join(re.escape(a) for a in sorted(alts, key=len, reverse=True))
    return re.compile(rf"(?<!\w)(?:{alt})(?!\w)", re.IGNORECASE)


def claim_rejected(text: str, titles: Iterable[str], value: str | None) -> bool:
    """True if `text` corrects or refuses the false claim: a correction / refusal cue in the same sentence (or line)
    as a mention of the claimed film (`titles`) or of the claimed `value`, and no list entry without a cue has the
    film among its titles as the parser reads them (not in its explanation, nor as the user's taste), no line
    without a cue is just the title, and no sentence turns from the correction to suggesting it. An unrelated note
    ("release years may be incorrect") elsewhere in the answer does not reject the claim."""
    from recharness.matching.cues import has_correction_cue, has_refusal_cue

    text = text[:20_000].replace("\u2019", "'")
    film = _mention_re(titles)
    who = _mention_re([value]) if value and str(value).strip() else None
    cue = lambda s: has_correction_cue(s, value) or has_refusal_cue(s)  # noqa: E731
    rejected = False
    for line in text.splitlines():
        entry = list_entry_body(line)
        body = line if entry is None else entry
        if film is not None and film.search(body) and not cue(body):
            bare = re.sub(r"[\s*_`\"'.,:;!?()\-]+", "", film.sub("", body))
            # the film listed plainly: a recommendation, kept, when the parser reads it as one of the entry's titles
            # (not in its explanation, "1. Dark City (1998) - for those who loved Aliens (1986)", nor as taste)
            if entry is not None and any(film.search(t) for t in parse_recommendations(line)) or not bare:
                return False
        for sent in _SENTENCE_END.split(body):
            turn = suggestion_start(sent, cue)
            if film is not None and turn is not None and any(
                    not _named_as_taste(sent[max(turn, m.start() - 60):m.start()])
                    for m in film.finditer(sent, turn)):
                return False  # "X is not in many crime films, but GoodFellas (1990) is a great pick": recommended
            if ((film is not None and film.search(sent)) or (who is not None and who.search(sent))) and cue(sent):
                rejected = True
    return rejected


#: where a sentence turns from one clause to the next: "but", "however", ";" or a dash
_TURN = re.compile(r"\s*(?:;|\s[\u2014\u2013]\s|\s-\s|,?\s+but\s+|,?\s+however,?\s+|^however,?\s+)\s*",
                   re.IGNORECASE)


def suggestion_start(sent: str, cue) -> int | None:
    """Where a sentence turns from correcting to recommending, in the first clause without a cue that follows a
    clause with one: the offset of its suggesting phrase ("...; however, you might enjoy GoodFellas": a film named
    before that phrase, "if you liked X, you might enjoy ...", is not suggested), or of the clause when it commends
    ("... is not in many crime films, but GoodFellas is a great pick"; not "a poor choice"); None when it never does. A film named before the
    correction ("GoodFellas is great, but Tom Hanks is not in it") is the correction's subject, and one named after
    it without a suggestion ("..., but GoodFellas stars Robert De Niro") states the truth."""
    corrected, last = False, 0
    for m in [*_TURN.finditer(sent), None]:
        end = m.start() if m is not None else len(sent)
        clause = sent[last:end]
        if clause.strip():
            if cue(clause):
                corrected = True
            elif corrected:
                part = correcting_part(clause)
                if part != clause:  # "..., but you might enjoy X": from the suggesting phrase on
                    return last + len(part)
                praise = COMMENDS.search(clause)
                if praise and not DISPRAISE.search(praise.group(0)):  # "..., but X is a great pick" (not "a poor one")
                    return last
        if m is not None:
            last = m.end()
    return None


def recommended(parsed: dict | None, k: int | None, wanted: Iterable[str] = (), drop: set[str] = frozenset()) -> list[str]:
    """The list L: catalog ids, with a unique placeholder for each unmatched title; the ids in `drop` (the
    query's own films, `named_in_query`), and any id whose title also names one of them, left out first; then an
    id whose title also names a `wanted` id (the ground truth) stands for that id, once; then the cut to `k`.
    (Before 2026-11-29 the swap came first: an implicit query's reference film that shares its title with a
    ground-truth item became that item, so naming the query's own film scored a hit.)"""
    if not parsed or parsed.get("ftr"):
        return []
    twins = parsed.get("twins") or {}
    raw = parsed.get("item_ids") or []
    kept = [(n, i) for n, i in enumerate(raw)
            if i is None or (i not in drop and not drop.intersection(twins.get(i, ())))]
    ids = with_twins([i for _, i in kept], twins, wanted)
    out = [i if i is not None else f"{UNMATCHED}{n}" for (n, _), i in zip(kept, ids)]
    return out[:k] if k else out


def top_lists(samples: list[dict], predictions: dict[str, dict], k: int = 10) -> list[list[str]]:
    """Per sample, the first `k` entries of its list L (unmatched placeholders included: they keep their
    slot and no metric counts them); [] without a prediction, for a refusal or an unreadable answer."""
    out = []
    for s in samples:
        p = predictions.get(s["id"])
        parsed = p.get("parsed") if p is not None and isinstance(p.get("parsed"), dict) else None
        out.append(recommended(parsed, s.get("k") or None, s.get("gt", []),
                               named_in_query(s, p.get("output") if p is not None else None, parsed))[:k])
    return out


def query_metrics(samples: list[dict], predictions: dict[str, dict]) -> list[dict | None]:
    """Per-sample metrics ({P, R, FTR, CMR?, unmatched?}); None where there is no prediction."""
    rows: list[dict | None] = [None] * len(samples)
    by_k: dict[int | None, list[int]] = defaultdict(list)
    lists: dict[int, list[str]] = {}
    for n, s in enumerate(samples):
        p = predictions.get(s["id"])
        if p is None:
            continue
        parsed = p.get("parsed") if isinstance(p.get("parsed"), dict) else None
        k = s.get("k") or None
        L = recommended(parsed, k, s.get("gt", []), named_in_query(s, p.get("output"), parsed))
        lists[n] = L
        row = {"FTR": 1.0 if (parsed is None or parsed.get("ftr") or not L) else 0.0}
        if L:
            row["unmatched"] = sum(x.startswith(UNMATCHED) for x in L) / len(L)
            sat = s.get("satisfying")
            if sat is not None:
                sset = set(sat)
                row["CMR"] = sum(x in sset for x in L) / len(L)
        rows[n] = row
        by_k[k].append(n)
    for k, idx in by_k.items():
        idx = [n for n in idx if samples[n].get("gt")]  # a sample with no ground truth (an older build): no P or R
        if not idx:
            continue
        rel = [set(samples[n]["gt"]) for n in idx]
        m = ranking_metrics([lists[n] for n in idx], rel, ks=(k,), per_sample=True)
        pk, rk = ("precision", "recall") if k is None else (f"precision@{k}", f"recall@{k}")
        for j, n in enumerate(idx):
            rows[n]["P"] = float(m[pk][j])
            rows[n]["R"] = float(m[rk][j])
    return rows


def aggregate(rows: list[dict | None]) -> dict[str, float]:
    """Means over scored queries (CMR and unmatched over queries that recommended something). With no query
    scored, P, R and FTR are NaN, not 0: FTR 0 would be the best score of a condition task, from no data."""
    got = [r for r in rows if r is not None]
    out: dict[str, float] = {}
    for key in ("P", "R", "CMR", "FTR", "unmatched"):
        vals = [r[key] for r in got if key in r]
        if vals or key in ("P", "R", "FTR"):
            out[key] = float(np.mean(vals)) if vals else float("nan")
    out["n_scored"] = float(len(got))
    out["missing"] = float(len(rows) - len(got))
    return out


def group_members(samples: list[dict]) -> dict[str, list[int]]:
    """{group label: indices of the samples whose `groups` list names it} (a sample may be in several)."""
    members: dict[str, list[int]] = defaultdict(list)
    for n, s in enumerate(samples):
        for g in s.get("groups", []):
            members[g].append(n)
    return dict(members)


def group_metrics(samples: list[dict], rows: list[dict | None]) -> dict[str, dict[str, float]]:
    """Metrics per group label of the samples' `groups` lists (a sample may be in several)."""
    members = group_members(samples)
    out = {}
    for g in sorted(members, key=_group_order):
        agg = aggregate([rows[n] for n in members[g]])
        if agg["n_scored"]:
            out[g] = agg
    return out


def _group_order(g: str):
    key, _, val = g.partition("=")
    return (key, val)


def _named_as_taste(before: str) -> bool:
    """The words before the claimed film name it as the user's taste or compare with it ("if you liked Aliens",
    "better than Aliens", "something like Aliens"): named, not suggested."""
    return TASTE_BEFORE.search(before) is not None or COMPARED_BEFORE.search(before) is not None
