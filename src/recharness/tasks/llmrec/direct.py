"""LLMRec direct recommendation: rank a candidate list that hides the true next item.

Candidates are the held-out item plus seeded negatives the user never had,
or, where the dataset ships retriever candidate lists (LLMRank), that list;
shown in a seeded random order with the held-out item at a seeded position. The answer is parsed as
an ordered list of candidate numbers (or titles); answers that name no
candidate are invalid, answers that leave some out are partial. Both are
counted and kept: a candidate missing from the answer can't be a hit.

Numbers in prose are not a ranking ("There are 20 candidates and 3 are
dramas" is no [20, 3]): only list lines are read, and they must be most of
the answer. A list line is
  * a numbered or bulleted line ("1. 5", "2) [17] Heat (1995)", "- Fargo
    (1996)"): its candidates are the line's list of numbers, else the
    candidate titles it starts with, else a number it starts with or a "[k]"
    in it, else the candidate titles from the first one anywhere in it. A
    bare number is no candidate when the words after it are a title with its
    year that no candidate has ("2. 2 Days in the Valley (1996)", a copied
    history line); and the answer's last line, a rank mark alone that
    continues the numbering of the line before ("7." after "6. Hackers
    (1995)": an answer cut by its token limit), names nothing. A title
    without its year at the start of a line is that candidate unless it
    goes on, with no separator, to another year ("Speed 2: Cruise Control
    (1997)", "Heat (1986)": a sequel or a remake, not the candidate).
    "Candidate titles" are a run of them with only separators between
    ("Heat (1995) - Ronin (1998)", "Cliffhanger - Die Hard 2" with only Die
    Hard 2 a candidate), in order; words other than a title end the run, so
    a title named in an explanation ("Heat (1995) - tense, like Ronin (1998)")
    is not ranked by that line;
  * a line led by a candidate number ("[5] Heat (1995)", "5 - Heat"): k, unless the title after it is
    another candidate's ("1 - Fargo (1996)" with Fargo candidate 2: the number is a rank, Fargo counts);
  * a line that is only candidate numbers and separators ("5, 17, 3",
    "[5, 17, 3]", "5 > 17 > 3", "3 1 2"), after an optional "Ranking:" lead-in.
"Most of the answer": list lines hold at least as many characters as the
lines before the last list line that could pass for part of a ranking (with
a one- to three-digit number or markup in them, and not a lead-in ending in
":"). A plain "Here is my ranking." before the list or an explanation after
it costs nothing; HTML around a few bare numbers is no ranking. An answer
with no list line is read for candidate titles in order of mention ("I would
go with Fargo (1996), then Alien (1979)."): a whole title is no accident.
"""

from __future__ import annotations

import hashlib
import re
import zlib
from typing import TypedDict

import numpy as np

from recharness.core.errors import ConfigError
from recharness.core.types import BuildConfig, GenerationParams, Parsed
from recharness.matching.parse import collapse_spaces, strip_reasoning
from recharness.tasks.base import Task
from recharness.tasks.orders import (
    aggregated,
    borda_method,
    candidate_orders,
    order_clusters,
    order_metrics,
    spread_units,
)
from recharness.tasks.llmrec.common import (
    SplitPopularity,
    beyond_accuracy,
    keep_training_part,
    parts_from_options,
    ranking_scores,
    ranking_units,
    reference_predictions,
    split_users,
    target_seen,
    training_data,
    why_empty,
)
from recharness.tasks.llmrec.prompts import direct_prompt, domain_of

_SEP = r"(?:\s*(?:[,;>|/→]|->|=>|\band\b)\s*|\s+)"
_NUMBER_LIST = re.compile(
    r"\[?\s*(?:#|candidate\s*)?[\[(]?\d{1,3}[\])]?(?:" + _SEP + r"(?:#|candidate\s*)?[\[(]?\d{1,3}[\])]?)*\s*[\]}]?[\s.,;…]*",
    re.IGNORECASE,
)
_LEAD_IN = re.compile(r"[^:\n]{0,80}:\s*")
_RANK_MARK = re.compile(r"\s*(?:[-*•+]\s+|#?\d{1,3}[.)]\s+|rank\s*#?\d{1,3}\s*[:.)-]\s*)", re.IGNORECASE)
_CAND_MARK = re.compile(r"\s*(?:[\[(](\d{1,3})[\])]|(\d{1,3})\s*[-–—:]\s|candidate\s*#?(\d{1,3})\b)", re.IGNORECASE)
_LEAD_NUM = re.compile(r"(?:#|candidate\s*)?\[?(\d{1,3})\]?(?![\w.])", re.IGNORECASE)
_BRACKET_NUM = re.compile(r"\[(\d{1,3})\]")
#: a bare number followed by a word ("2 Days in the Valley"), not by a separator ("5 - Heat") or nothing
_WORD_AFTER = re.compile(r"\s+[^\W\d_]", re.UNICODE)
#: a list line "k. entry" / "k) entry" (its rank number k), and a rank mark standing alone ("7.", "7")
_MARK_THEN_ENTRY = re.compile(r"(\d{1,3})[.)]\s+\S")
_MARK_ALONE = re.compile(r"(\d{1,3})[.)]?")
#: a year in brackets, where a written title ends ("Heat (1995)"); and the first one ahead on its line, with no
#: other bracket before it ("speed 2: cruise control (1997)")
_YEAR = r"\((1[89]\d\d|20\d\d)\)"
_YEAR_IN = re.compile(_YEAR)
_YEAR_AHEAD = re.compile(r"[^()\n]{0,80}?" + _YEAR)
#: a rank before candidate numbers: "1) 5", "1 - 5", "(1) 5", "1) [5]" (not "(1) (5)": two candidates alike)
_RANK_THEN_NUMBER = re.compile(r"\s*(?:\d{1,3}\)|\d{1,3}\s*[-–—]|\(\d{1,3}\))\s+(?=(?:#|candidate\s*)?[\[\d])",
                               re.IGNORECASE)
_MARKUP = str.maketrans("", "", "*`")
#: what may stand between two titles of one line ("Heat (1995) - Ronin (1998)", "\"Heat\", \"Ronin\"", "A > B and C")
_BETWEEN_TITLES = re.compile(r"[\s\"'“”‘’_]*(?:(?:->|=>|[-–—,;>|/→&+]|and\b|then\b)[\s\"'“”‘’_]*)*")
_NUMERIC_OR_MARKUP = re.compile(r"(?<![\w.])\d{1,3}(?![\w.])|</?[a-zA-Z!][^<>]{0,200}>")  # a year is no candidate number
MAX_LINES = 1_000


def popularity_candidates(target: str, seen: set[str], all_items: np.ndarray, weights: np.ndarray, n_cand: int,
                          rng) -> list[str]:
    """The target and n_cand - 1 unseen items drawn without replacement in proportion to their training
    interactions (items never interacted with are not drawn), in a seeded random order."""
    w = weights.copy()
    w[[k for k, i in enumerate(all_items) if str(i) in seen]] = 0.0
    if np.count_nonzero(w) < n_cand - 1:
        raise ConfigError(f"--option negatives=popularity: only {np.count_nonzero(w)} unseen items with training "
                          f"interactions to draw {n_cand - 1} negatives from; ask for fewer candidates")
    negs = [str(all_items[k]) for k in rng.choice(len(all_items), size=n_cand - 1, replace=False, p=w / w.sum())]
    return [str(x) for x in rng.permutation(np.array(negs + [target], dtype=object))]


#: `--option negatives=`: besides these, "retriever:NAME" for a trained ranking reference of the task
NEGATIVES = ("uniform", "popularity")


def retrievers() -> list[str]:
    """The references whose fitted model may retrieve the candidates: the task's trained ones (`random`'s
    top items are the uniform draw)."""
    from recharness.baselines import BASELINES

    return [n for n in DirectTask.baselines if n in BASELINES and BASELINES.meta(n).get("trainable")]


def retriever_baseline(negatives: str) -> str | None:
    """"retriever:NAME" → NAME (a ConfigError naming the allowed ones for an unknown NAME or value); else None."""
    if negatives in NEGATIVES:
        return None
    name = negatives.removeprefix("retriever:") if negatives.startswith("retriever:") else None
    if name not in retrievers():
        allowed = ", ".join([*NEGATIVES, *(f"retriever:{r}" for r in retrievers())])
        raise ConfigError(f"--option negatives={negatives}: not a way to draw candidates; allowed: {allowed}")
    return name


def retrieved_candidates(model, sp, seen: set[str], n_cand: int, rng, negatives: str) -> list[str]:
    """LLMRank's retriever candidates from a trained reference (`model`, fitted on the training part):
    its top n_cand - 1 items the user never had, shown as `shown_order` puts them (seeded order and target place)."""
    negs = model.top_k(n_cand - 1, exclude=seen, user=sp.user_id, history=sp.history)
    if len(negs) < n_cand - 1:
        raise ConfigError(f"--option negatives={negatives}: {model.name} ranks only {len(negs)} items user "
                          f"{sp.user_id} never had, fewer than the {n_cand - 1} negatives asked for; ask for "
                          "fewer candidates (n_candidates)")
    return shown_order(negs, sp.target, rng)


#: the candidate draws' stream, beside the orders' own (`[seed, crc32(sample id)]`)
_CANDIDATE_STREAM = 7


def user_key(user_id) -> int:
    """A user id as 64 bits of its sha256, for a seed of their own (crc32's 32 bits give two of a million users the
    same stream about a hundred times over)."""
    return int.from_bytes(hashlib.sha256(str(user_id).encode("utf-8", "surrogatepass")).digest()[:8], "big")


def shown_order(negs: list[str], target: str, rng) -> list[str]:
    """The candidates as the prompt shows them: the negatives in a seeded random order, the target at a seeded
    random place. A retriever's own order (best first) is not shown: a prompt listing the hardest negatives
    first would carry the retriever's ranking, and an order spread (`orders=K`) would mix sorted with shuffled."""
    pos = int(rng.integers(0, len(negs) + 1))
    negs = [negs[i] for i in rng.permutation(len(negs))]
    return negs[:pos] + [target] + negs[pos:]


def _items_of(interactions, users: list[str]) -> dict[str, set[str]]:
    """Every item each of `users` had, whenever."""
    import polars as pl

    rows = interactions.filter(pl.col("user_id").is_in(users)).group_by("user_id").agg(pl.col("item_id"))
    return {u: set(items) for u, items in rows.iter_rows()}


class CandidateRanking(TypedDict):
    """The candidates in the answer's order (those it names; `partial` when not all)."""

    ranking: list[str]


class DirectTask(Task):
    answer_type = CandidateRanking
    headline = "NDCG@10"
    name = "direct"
    selects_users = True  # honours BuildConfig.users (build --users FILE)
    baselines = ("popularity", "random", "itemknn", "ease", "als", "markov")
    format_reminder = "Please answer only with the candidate numbers in ranked order, separated by commas."
    params = GenerationParams(max_tokens=120)
    ks = (1, 5, 10)
    #: a trained reference's records carry the target's full-catalog rank, computed for evaluation alone: the
    #: latency of its answer leaves it out (`runner.latency.timed_predict`)
    evaluation_work = True

    popularity = None
    scoring_needs_dataset = True

    def setup(self, dataset, context=None) -> None:
        return None

    def prepare_scoring(self, dataset) -> None:
        self.popularity = SplitPopularity(dataset)

    def build(self, dataset, config: BuildConfig):
        opts = config.options
        n_cand = int(opts.get("n_candidates", 20))
        orders = int(opts.get("orders", 1))
        negatives = opts.get("negatives", "uniform")
        by_retriever = retriever_baseline(negatives)  # "retriever:NAME" → NAME (an unknown one: ConfigError)
        by_popularity = negatives == "popularity"
        if not 2 <= n_cand <= dataset.items.height:
            raise ConfigError(f"--option n_candidates={n_cand}: the {dataset.name} catalog has {dataset.items.height} "
                              "items; candidates are the target and n_candidates - 1 other items, so ask for 2 to "
                              f"{dataset.items.height}")
        if orders > n_cand:  # refused before any work (`candidate_orders` refuses it per sample, e.g. a short list)
            raise ConfigError(f"--option orders={orders}: a sample shows {n_cand} candidates, so at most {n_cand} "
                              "orders put its target at distinct positions: use fewer orders, or more n_candidates")
        hist_len = int(opts.get("history_len", 10))
        retriever = opts.get("retriever")
        if retriever and (by_retriever or by_popularity):
            raise ConfigError(f"--option negatives={negatives}: retriever={retriever} already gives the candidates "
                              "(a published list); leave one of the two out")
        if retriever and opts.get("split", "leave_last_out") != "leave_last_out":
            raise ConfigError(f"--option split={opts['split']}: the published candidate lists of retriever="
                              f"{retriever} go with the published leave-last-out targets; use split=leave_last_out")
        parts = parts_from_options(opts)
        domain = domain_of(dataset.name, dataset.meta)
        titles = dict(zip(dataset.items["item_id"].to_list(), dataset.items["title"].to_list()))
        all_items = np.array(sorted(titles))
        catalog = set(titles)
        interactions = dataset.interactions
        retrieved = {}
        if retriever:
            cands = dataset.extras.get("candidates")
            if cands is None:
                raise ConfigError(f"dataset {dataset.name} has no retriever candidate lists (option retriever={retriever})")
            sel = cands.filter(cands["retriever"] == retriever)
            if sel.height == 0:
                have = sorted(set(cands["retriever"].to_list()))
                raise ConfigError(f"no candidate lists for retriever {retriever!r}; have {', '.join(have)}")
            retrieved = dict(zip(sel["user_id"].to_list(), sel["item_ids"].to_list()))
            # only users with a published candidate list, however short their history
            interactions = interactions.filter(interactions["user_id"].is_in(list(retrieved)))
        min_history = int(opts.get("min_history", 1 if retriever else 5))
        splits, split = split_users(dataset, opts, config, min_history=min_history, interactions=interactions)
        keep_training_part(config.out, dataset, split)
        weights = model = None
        if by_popularity or by_retriever:
            train = training_data(dataset, split)  # what the references learn from: no test target
            if by_popularity:
                counts = dict(train.interactions.group_by("item_id").len().iter_rows())
                weights = np.array([counts.get(str(i), 0) for i in all_items], dtype=np.float64)
            else:
                from recharness.baselines import fit

                model, _ = fit(by_retriever, train, config.seed)
        # a user's items, all of them: no negative is an item the user had (before or after the target)
        had = _items_of(interactions, [sp.user_id for sp in splits]) if split["split"] != "leave_last_out" else {}
        for sp in splits:
            # the user's own stream: their candidates are the same in any build of this seed (`--users`, `--limit`
            # or another dataset filter draw others, and the users before them no longer decide their negatives)
            rng = np.random.default_rng([config.seed, _CANDIDATE_STREAM, user_key(sp.user_id)])
            seen = set(sp.history) | {sp.target} | had.get(sp.user_id, set())
            if retriever:
                if sp.user_id not in retrieved:
                    continue
                cand = shown_order([i for i in retrieved[sp.user_id] if i != sp.target][: n_cand - 1], sp.target, rng)
            elif by_retriever:
                cand = retrieved_candidates(model, sp, seen, n_cand, rng, negatives)
            elif by_popularity:
                cand = popularity_candidates(sp.target, seen, all_items, weights, n_cand, rng)
            else:
                negs: list[str] = []
                if len(all_items) - len(seen & catalog) < n_cand - 1:
                    raise ConfigError(f"--option n_candidates={n_cand}: user {sp.user_id} has only "
                                      f"{len(all_items) - len(seen & catalog)} unseen items to draw negatives "
                                      "from; ask for fewer candidates")
                while len(negs) < n_cand - 1:
                    for i in rng.choice(len(all_items), size=min(2 * n_cand, len(all_items)), replace=False):
                        it = str(all_items[i])
                        if it not in seen and it not in negs:
                            negs.append(it)
                            if len(negs) == n_cand - 1:
                                break
                cand = [str(x) for x in rng.permutation(np.array(negs + [sp.target], dtype=object))]
            shown = [{"title": titles.get(i, i), "rating": r} for i, r in zip(sp.history[-hist_len:], sp.ratings[-hist_len:])]
            sample = {
                "id": f"direct-{sp.user_id}",
                "task": self.name,
                "user_id": sp.user_id,
                "messages": direct_prompt(domain, shown, [{"title": titles.get(c, c)} for c in cand], parts),
                "candidates": cand,
                "candidate_titles": [titles.get(c, c) for c in cand],
                "target": sp.target,
                "retriever": retriever or (negatives if by_retriever else
                                           "popularity-sampled" if by_popularity else "sampled"),
                "max_tokens": opts.get("max_tokens"),
                "prompt_parts": parts.to_dict(),
                "seen": sp.history,  # what a reference's full-catalog rank leaves out (`reference_answers`)
            }
            if by_retriever:
                sample["retriever_model"] = model.identity()
            if split["split"] != "leave_last_out":
                sample["split"] = split
                # the user's items after the cut but the target: never a negative (`seen` above), so left out of
                # the full-catalog rank too (`reference_answers`), not fed to a model as history
                sample["later"] = sorted(had.get(sp.user_id, set()) - set(sp.history) - {sp.target})
            if orders == 1:
                yield sample
                continue
            # the later orders from the user's own stream: order 0 is what `orders=1` builds, and every other
            # user's candidates stay as they are
            own = np.random.default_rng([config.seed, zlib.crc32(sample["id"].encode())])
            for k, order in enumerate(candidate_orders(cand, sp.target, orders, own)):
                yield {**sample, "id": f"{sample['id']}@o{k}", "order": k, "order_of": sample["id"],
                       "target_position": order.index(sp.target) + 1, "candidates": order,
                       "candidate_titles": [titles.get(c, c) for c in order],
                       "messages": direct_prompt(domain, shown, [{"title": titles.get(c, c)} for c in order], parts)}

    def parse(self, sample: dict, text: str) -> Parsed:
        cands = sample["candidates"]
        body = collapse_spaces(strip_reasoning(text[:20000]))
        titles = _Titles(sample["candidate_titles"])
        refs, list_chars, other_chars = _list_refs(body, titles)
        order: list[str] = []
        slots: list[str | None] = []  # every listed entry in its place: None for a number no candidate has
        out_of_range = 0
        how = "titles"
        for k, by_number in refs:
            if by_number:
                how = "numbers"
            if not 1 <= k <= len(cands):
                out_of_range += 1
                slots.append(None)
                continue
            slots.append(cands[k - 1])
            if cands[k - 1] not in order:
                order.append(cands[k - 1])
        error = None
        if not refs:
            order = [cands[i] for i in titles.in_order(body.lower())]  # "I'd go with Fargo (1996), then Alien (1979)."
            slots = list(order)
            if not order:
                error = "no list of candidate numbers and no candidate title found in the answer"
        elif list_chars < other_chars:
            error = f"the list is not most of the answer ({list_chars} of {list_chars + other_chars} characters)"
        elif not order:
            error = "the list names no candidate in range"
        value = {"ranking": order, "how": how, "out_of_range": out_of_range, "partial": 0 < len(order) < len(cands)}
        if slots != order:  # a repeat or a number out of range: the list as written, which the metrics read
            value["slots"] = slots
        if error:
            return Parsed(value, valid=False, error=error)
        return Parsed(value)

    def target_rank(self, sample: dict, record: dict | None) -> int | None:
        """As `score` reads it: the target's place in the answer as written (`answer_places`)."""
        places = answer_places(record) or []
        return places.index(sample["target"]) + 1 if sample.get("target") in places else None

    @staticmethod
    def _places(samples, predictions) -> list[list[str | None]]:
        """Each sample's `answer_places` ([] unless valid): what the accuracy and beyond-accuracy metrics read."""
        return [answer_places(predictions.get(s["id"])) or [] for s in samples]

    @staticmethod
    def _validity(samples, predictions) -> tuple[list[bool], list[bool], int]:
        """Whether each sample's answer is valid, whether partial, and the missing count."""
        valid, partial = [], []
        missing = 0
        for s in samples:
            p = predictions.get(s["id"])
            if p is None:
                missing += 1
            ok = bool(p and p.get("valid", True) and p.get("parsed"))
            valid.append(ok)
            partial.append(ok and bool(p["parsed"].get("partial")))
        return valid, partial, missing

    def why_empty(self, dataset, config) -> str | None:
        opts = config.options
        if opts.get("retriever"):
            return None
        return why_empty(self.name, dataset, int(opts.get("min_history", 5)), opts)

    def derived_methods(self, samples: list[dict], recs: dict[str, dict]) -> dict[str, dict[str, dict]]:
        """With `--option orders=K`: a method's K rankings of one user's candidates aggregated (`borda`)
        into one answer, scored as its own row on the same samples (each of the user's K samples carries it).
        Only users whose K samples were all answered get it; none valid → an invalid answer."""
        return borda_method(
            samples, recs,
            # each answer as the metrics read it: a repeat or a number out of range holds its place
            ranking=lambda s, r: answer_places(r),
            candidates=lambda ss: min(ss, key=lambda s: s["order"])["candidates"],
            # a candidate no order's answer named stays unranked (it was a miss in every one of them)
            answer=lambda s, ranking: {"ranking": ranking, "out_of_range": 0,
                                       "partial": 0 < len(ranking) < len(s["candidates"])},
            error="no valid answer under any candidate order", unnamed=False)

    def _order_values(self, samples, predictions, ranked):
        """(per-sample NDCG@10, HR@1, answered) with several candidate orders, else None; none for an aggregated
        (Borda) row, one answer per user: its spread would be 0 by construction, not a finding."""
        if not samples or "order" not in samples[0] or aggregated(samples, predictions):
            return None
        from recharness.metrics.ranking import target_metrics

        per = target_metrics(ranked, [s["target"] for s in samples], ks=(1, 10), per_sample=True)
        return per["ndcg@10"], per["hr@1"], [s["id"] in predictions for s in samples]

    def _order_metrics(self, samples, predictions, ranked) -> dict[str, float]:
        """With several candidate orders: NDCG@10's order spread (mean over users of the std across a user's K
        orders) and HR@1 by the target's position, over the users who answered all K (`order_metrics`)."""
        got = self._order_values(samples, predictions, ranked)
        return order_metrics(samples, got[0], got[1], "NDCG@10", usable=got[2]) if got else {}

    def _ks(self, samples) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(HR cut-offs, NDCG cut-offs): HR@k only below the shortest candidate list (at k = its length every
        complete answer hits: it would measure completeness, not ranking); NDCG@k up to the longest list (the
        target's place still counts there)."""
        lengths = [len(s["candidates"]) for s in samples]
        return (tuple(k for k in self.ks if k < min(lengths)),
                tuple(k for k in (5, 10) if k in self.ks and k <= max(lengths)))

    def _beyond(self, samples, ids, ranked, clusters) -> dict:
        """Beyond-accuracy units of the top-k lists at the largest HR cut-off up to 10 below the shortest
        candidate list: at k >= the candidates, a complete answer's top-k is all of them, so its popularity,
        coverage and head/tail hits would describe the sampled candidates, not the method."""
        ks = [k for k in self._ks(samples)[0] if k <= 10]
        if not ks:
            return {}
        return beyond_accuracy(self._pop(samples), ids, ranked, [s["target"] for s in samples], k=max(ks),
                               clusters=clusters, orders=[int(s.get("order") or 0) for s in samples])

    def score(self, samples, predictions):
        valid, partial, missing = self._validity(samples, predictions)
        places = self._places(samples, predictions)
        ks, ndcg_ks = self._ks(samples)
        m = ranking_scores(places, [s["target"] for s in samples], ks, ndcg_ks=ndcg_ks)
        n = max(1, len(samples))
        m.update(valid_rate=sum(valid) / n, partial_rate=sum(partial) / n, missing=float(missing))
        # answers naming a number no candidate has (a 0-based ranking "0, 1, 2" reads as 1, 2): said, not silent
        outside = [((predictions.get(s["id"]) or {}).get("parsed") or {}) for s in samples]
        m["out_of_range_rate"] = sum(bool(isinstance(o, dict) and o.get("out_of_range")) for o in outside) / n
        m.update(target_seen(samples))  # here the one candidate the user had (negatives never are): a giveaway
        m.update(full_catalog_scores(samples, predictions))
        m.update({k: u.point() for k, u in self._beyond(samples, [s["id"] for s in samples], places,
                                                        order_clusters(samples)).items()})
        m.update(self._order_metrics(samples, predictions, places))
        return m

    def units(self, samples, predictions):
        """Per-sample HR/NDCG/MRR, validity and partial answers: means over samples; with several orders, the
        order spread: a mean over users (`spread_units`)."""
        from recharness.metrics.bootstrap import mean_units

        if not samples:
            return {}
        ids = [s["id"] for s in samples]
        valid, partial, _ = self._validity(samples, predictions)
        places = self._places(samples, predictions)
        ks, ndcg_ks = self._ks(samples)
        users = order_clusters(samples)
        out = ranking_units(ids, places, [s["target"] for s in samples], ks, ndcg_ks=ndcg_ks, clusters=users)
        out["valid_rate"] = mean_units(ids, valid, how="mean over samples", clusters=users)
        out["partial_rate"] = mean_units(ids, partial, how="mean over samples", clusters=users)
        ranks = full_ranks(samples, predictions)
        if ranks is not None:
            per = _full_metrics(ranks, per_sample=True)
            out.update({k: mean_units(ids, v, how="mean over samples", clusters=users) for k, v in per.items()})
        out.update(self._beyond(samples, ids, places, users))
        got = self._order_values(samples, predictions, places)
        spread = spread_units(samples, got[0], got[2], clusters=users) if got else None
        if spread is not None:
            out["NDCG@10 order spread"] = spread
        return out

    def _pop(self, samples):
        return self.popularity.of(samples) if self.popularity is not None else None

    def reference_answer(self, ranker, sample: dict) -> dict:
        return {"ranking": ranker.rank(sample["candidates"], user=sample.get("user_id"))}

    def reference_answers(self, baseline, samples: list[dict]) -> list[dict]:
        """Each sample's ranking of its candidates and, for a trained reference, the target's rank in the
        whole catalog with the user's history left out (`full_rank`, None: never ranked), from the
        batched `target_ranks`: `NDCG@10 (full)` / `HR@10 (full)` beside the sampled metrics. Under a global
        time split the user's later items (`later`) are left out too, as they are from the negatives. `random`
        gets none (its full rank is a uniform draw), nor do samples built without their history (`seen`)."""
        from recharness.baselines import BASELINES
        from recharness.runner.latency import answering_only

        answers = [self.reference_answer(baseline, s) for s in samples]
        trained = baseline.name in BASELINES and BASELINES.meta(baseline.name).get("trainable")
        if not trained or not samples or any("seen" not in s for s in samples) or answering_only():
            return answers  # (a timed call: the full rank is evaluation, not the answer)
        keys = list(dict.fromkeys((s["user_id"], s["target"]) for s in samples))  # a user's K orders: one query
        hist = {(s["user_id"], s["target"]): s["seen"] for s in samples}
        later = {(s["user_id"], s["target"]): list(s.get("later") or ()) for s in samples}
        got = baseline.target_ranks([(t, hist[(u, t)], u) for u, t in keys])
        rank = {k: r.get("rank") for k, r in zip(keys, got, strict=True)}
        # a global time split: the user's items after the cut are no negative of the sampled candidates, so none
        # counts against the target in the full catalog either: the target's rank less those ranked before it
        # (each later item's own rank in the same order, asked with the same history and user)
        asks = [(k, i) for k in keys for i in later[k] if rank[k] is not None]
        if asks:
            ahead = baseline.target_ranks([(i, hist[k], k[0]) for k, i in asks])
            own = dict(rank)  # each later item compared with the target's own rank, not one already lowered
            for (k, _), r in zip(asks, ahead, strict=True):
                if r.get("rank") is not None and r["rank"] < own[k]:
                    rank[k] -= 1
        return [{**a, "full_rank": rank[(s["user_id"], s["target"])]} for a, s in zip(answers, samples, strict=True)]

    def references(self, dataset, samples, seed: int = 0):
        return reference_predictions(self, dataset, samples, seed)


#: the full-catalog metrics of a trained reference's rows: the target's rank among every item the user never had
#: (under a global time split: never had before the cut, nor after it but the target)
FULL_KS = (10,)


def answer_places(rec: dict | None) -> list[str | None] | None:
    """A valid answer's candidates as written (`slots`: a repeat or a number no candidate has holds its place, so
    it moves no later candidate up; else its ranking, which then has neither); None for no valid answer."""
    if not rec or not rec.get("valid", True) or not rec.get("parsed"):
        return None
    return rec["parsed"].get("slots") or rec["parsed"]["ranking"]


def full_ranks(samples: list[dict], predictions: dict[str, dict]) -> list[float] | None:
    """Each sample's full-catalog target rank (inf: never ranked) when every answer carries one (a
    trained reference's, `DirectTask.reference_answers`), else None."""
    ranks = []
    for s in samples:
        p = predictions.get(s["id"])
        parsed = p.get("parsed") if p else None
        if not isinstance(parsed, dict) or "full_rank" not in parsed:
            return None
        r = parsed["full_rank"]
        ranks.append(float("inf") if r is None else float(r))
    return ranks or None


def _full_metrics(ranks: list[float], per_sample: bool = False) -> dict:
    from recharness.metrics.full_ranking import rank_metrics

    per = rank_metrics(ranks, ks=FULL_KS, per_sample=per_sample)
    out = {}
    for k in FULL_KS:
        out[f"NDCG@{k} (full)"] = per[f"ndcg@{k}"]
        out[f"HR@{k} (full)"] = per[f"hr@{k}"]
    return out


def full_catalog_scores(samples: list[dict], predictions: dict[str, dict]) -> dict[str, float]:
    """`NDCG@10 (full)` and `HR@10 (full)` where the answers carry full-catalog ranks, else {}."""
    ranks = full_ranks(samples, predictions)
    return {k: float(v) for k, v in _full_metrics(ranks).items()} if ranks is not None else {}


class _Titles:
    """The candidate titles as one case-insensitive whole-word pattern (longest
    first), so a 1,000-line answer against 100 candidates is 1,000 searches. At the
    start of a list line a title may also come without its year ("12 Angry Men" for
    "12 Angry Men (1957)", where no other candidate shares it); in prose only whole
    titles count ("a big hit" names no "Big (1988)")."""

    def __init__(self, titles: list[str]):
        from recharness.matching.normalize import split_year

        self.titles, self.identities = titles, None  # (key, year) of every candidate title: `unknown`, on demand
        split = [split_year(t) for t in titles]
        self.years = [year for _, year in split]
        self.index: dict[str, int] = {}
        for i, t in enumerate(titles):
            self.index.setdefault(t.lower(), i)
        cores: dict[str, list[int]] = {}
        for i, (t, (name, _)) in enumerate(zip(titles, split)):
            core = name.strip().lower()
            if core and core != t.lower():
                cores.setdefault(core, []).append(i)
        self.loose_index = dict(self.index)
        for core, ids in cores.items():
            if len(set(ids)) == 1:
                self.loose_index.setdefault(core, ids[0])
        self.pattern = self._compile(self.index)
        self.loose = self._compile(self.loose_index)

    @staticmethod
    def _compile(index: dict[str, int]):
        alts = sorted((re.escape(t) for t in index if t), key=len, reverse=True)
        return re.compile(r"(?<!\w)(?:" + "|".join(alts) + r")(?!\w)") if alts else None

    def unknown(self, text: str) -> bool:
        """Whether `text` starts with a title and its year ("Days in the Valley (1996) (rated 4/5)") that is no
        candidate's, article, accents and alternative titles aside ("The Matrix (1999)" is "Matrix, The (1999)").
        Text without a year: False, there is nothing to tell it by."""
        m = _YEAR_IN.search(text)
        if not m:
            return False
        from recharness.matching.normalize import normalize_title, title_identity

        if self.identities is None:
            self.identities = {(key, nt.year) for nt in map(normalize_title, self.titles) for key in nt.keys}
        return title_identity(text[: m.end()].strip()) not in self.identities

    def in_order(self, low: str) -> list[int]:
        found = (self.index[m.group(0)] for m in self.pattern.finditer(low)) if self.pattern else ()
        return list(dict.fromkeys(found))

    def run(self, low: str, at_start: bool = False) -> list[int]:
        """The candidates of the first run of titles in `low` (at its start with `at_start`, where a title may
        lack its year), in order, each once: "heat (1995) - ronin (1998), fargo (1996)" → all three; "heat
        (1995) - like ronin" → heat."""
        pattern, index = (self.loose, self.loose_index) if at_start else (self.pattern, self.index)
        m = (pattern.match if at_start else pattern.search)(low) if pattern else None
        found = []
        while m:
            after = _BETWEEN_TITLES.match(low, m.end()).end()  # past the separators to the next title, if any
            if self._other_film(low, m, after):
                break
            found.append(index[m.group(0)])
            m = pattern.match(low, after)
        return list(dict.fromkeys(found))

    def _other_film(self, low: str, m: re.Match, after: int) -> bool:
        """Whether a title matched without its year is another film's start: the title goes on (no separator
        after it) to a year that is not the candidate's ("speed 2: cruise control (1997)" or "halloween: h20
        (1998)" is not "Speed (1994)" / "Halloween (1978)", "heat (1986)" not "Heat (1995)"). `after`: where the
        separators after the match end."""
        key = m.group(0)
        if key in self.index:  # matched with its year
            return False
        if low[m.end():after].strip():  # "heat - ronin (1998)": a separator, so the year is the next title's
            return False
        year = _YEAR_AHEAD.match(low, m.end())
        return year is not None and int(year.group(1)) != self.years[self.loose_index[key]]


def _list_refs(text: str, titles: _Titles) -> tuple[list[tuple[int, bool]], int, int]:
    """(candidate number, given by number?) for each list line's candidates in
    order, the characters of list lines, and those of the other lines before
    the last list line that hold a small number or markup; see the module docstring."""
    refs: list[tuple[int, bool]] = []
    list_chars = other_chars = pending = 0
    lines = [line for line in (raw.translate(_MARKUP).strip() for raw in text.splitlines()[:MAX_LINES]) if line]
    mark = None  # the rank number of the line before when it was "k. entry"
    for at, line in enumerate(lines):
        alone = _MARK_ALONE.fullmatch(line) if at == len(lines) - 1 else None
        if alone and mark is not None and int(alone.group(1)) == mark + 1:
            # the answer's last line "7." after "6. Hackers (1995)": the next entry's rank mark with nothing after
            # it (an answer cut by its token limit), not candidate 7
            found = []
        else:
            found = _line_refs(line, titles)
            entry = _MARK_THEN_ENTRY.match(line) if found is not None else None
            mark = int(entry.group(1)) if entry else None
        if found is None:
            if not line.endswith(":") and _NUMERIC_OR_MARKUP.search(line):
                pending += len(line)
            continue
        refs.extend(found)
        list_chars += len(line)
        other_chars += pending
        pending = 0
    return refs, list_chars, other_chars


def _line_refs(line: str, titles: _Titles) -> list[tuple[int, bool]] | None:
    """The candidates one line names, or None if it is no list line."""
    r = _RANK_THEN_NUMBER.match(line)
    if r:  # the rank mark is no candidate: "1) 5" names candidate 5 alone (it was read as 1, 5)
        numbers = _number_list(line[r.end():])
        if numbers is not None:
            return [(k, True) for k in numbers]
    numbers = _number_list(line)
    if numbers is not None:
        return [(k, True) for k in numbers]
    m = _CAND_MARK.match(line)
    if m:
        k = int(next(g for g in m.groups() if g))
        # "1 - Fargo (1996)" with Fargo candidate 2: the number is the rank, the title the candidate
        run = titles.run(line[m.end():].strip().lstrip("\"'“‘_").lower(), at_start=True)
        if run and run[0] + 1 != k:
            return [(i + 1, False) for i in run]
        return [(k, True)]
    m = _RANK_MARK.match(line)
    if not m:
        return None
    content = line[m.end() :].strip()
    numbers = _number_list(content)
    if numbers is not None:
        return [(k, True) for k in numbers]
    run = titles.run(content.lstrip("\"'“‘_").lower(), at_start=True)
    if run:
        return [(i + 1, False) for i in run]  # "12 Angry Men (1957)": a title, not candidate 12
    n = _LEAD_NUM.match(content)
    if n and n.group(0).isdigit() and _WORD_AFTER.match(content, n.end()) and titles.unknown(content[n.end():]):
        # "2 Days in the Valley (1996)": the number begins a title with its year that no candidate has (a history
        # line copied), so it is no candidate number; "5 Heat (1995)", "5 is my top pick" keep 5
        n = None
    n = n or _BRACKET_NUM.search(content)
    if n:
        return [(int(n.group(1)), True)]
    return [(i + 1, False) for i in titles.run(content.lower())]  # "Cliffhanger - Die Hard 2": the candidate


def _number_list(line: str) -> list[int] | None:
    """The numbers of a line that is nothing but a list of them (after an optional "Ranking:" lead-in)."""
    for start in (0, *(m.end() for m in [_LEAD_IN.match(line)] if m)):
        if _NUMBER_LIST.fullmatch(line, start):
            return [int(x) for x in re.findall(r"\d{1,3}", line[start:])]
    return None
