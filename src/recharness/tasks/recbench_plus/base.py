"""What the five RecBench+ tasks share: parsing answers, scoring, breakdowns, references."""

from __future__ import annotations

import re
from typing import TypedDict

import numpy as np

from recharness.core.types import BuildConfig, GenerationParams, Parsed, reference_record
from recharness.matching.cues import correcting_part
from recharness.tasks.base import Task
from recharness.tasks.recbench_plus.context import Context, make_context
from recharness.tasks.recbench_plus.evaluate import (
    aggregate,
    group_members,
    group_metrics,
    named_in_query,
    query_metrics,
    resolve_answer,
    suggestion_start,
    top_lists,
    unrecognised,
)
from recharness.tasks.recbench_plus.evaluate import recommended as scored_list
from recharness.tasks.recbench_plus.official import find_file, read_records, write_records
from recharness.tasks.recbench_plus.options import Options, parse_options

GT_UNMATCHED = "\x00gt:"  # placeholder id for a ground-truth title the catalog lacks
#: the list length of the beyond-accuracy metrics (coverage@10, Gini@10, ARP@10, novelty@10)
TOP_K = 10

#: where a sentence turns from correcting the premise to suggesting films: a phrase that suggests anywhere ("you
#: may want to try", "you might like", "I'd recommend", "here are some films"); "try", "consider", "how about",
#: "some (other) films:" opening the sentence or a clause, or after "maybe", "so", "but" ...; a lower-case "try"
#: anywhere; not a title's "Try Seventeen" or "How About You", "has starred in some movies", "or some other films
#: attributed to him", "many consider", "you may want to check IMDb"
def unanswered(p: dict) -> bool:
    """A sample the model never answered (HTTP error, prompt too long: the runner's failure
    record) or whose answer is invalid (the parser failed, or found neither a title nor a refusal
    in it: garbled or cut-off text): it recommended nothing, yet it did not decline either."""
    return not p.get("valid", True)


def correction_only(body: str, strings: list[str], value: str | None) -> bool:
    """The answer corrects the premise (`has_correction_cue`) and every string the parser read as a title sits in
    a sentence that corrects it (a label, "Correction: ...", not a film it goes on to suggest: "O'Brien isn't in
    Aliens. Try Shock Treatment" recommends)."""
    from recharness.matching.cues import has_correction_cue

    if not has_correction_cue(body, value):
        return False
    # a sentence's correction ends where it turns to suggesting ("... was never in that film, but you could try
    # X"): a title after that is a recommendation (before 2026-11-29 it read as part of the correction, and the
    # answer as a decline)
    sentences = [x for x in re.split(r"(?<=[.!?])\s+|\n+", body) if x.strip()]
    return all(any(s.casefold() in _correction_of(x, value).casefold() and has_correction_cue(x, value)
                   for x in sentences) for s in strings)


def _correction_of(sentence: str, value: str | None) -> str:
    """The sentence up to where it turns to suggesting: a suggesting phrase (`correcting_part`), or a clause after
    the correction that commends a film ("...; however, Aliens (1986) is still worth watching": `suggestion_start`)."""
    from recharness.matching.cues import has_correction_cue

    part = correcting_part(sentence)
    turn = suggestion_start(sentence, lambda c: has_correction_cue(c, value))
    return part if turn is None else part[:turn]


def recommended(sid: str, ids: list[str], ctx) -> dict:
    """A reference method's answer: these items, by title (none: it declines)."""
    titles = [ctx.title(i) for i in ids]
    return reference_record(sid, {"strings": titles, "item_ids": list(ids), "ftr": not ids}, output="\n".join(titles))


def query_of(sample: dict) -> str:
    """The query a sample asks: its id without the with/without-history suffix (`-h` / `-n`)."""
    sid = str(sample["id"])
    return sid[:-2] if "with_history" in sample and sid[-2:] in ("-h", "-n") else sid


def unit_of(sample: dict) -> str:
    """The independent unit a sample's scores resample with: its source user when it has one (a user's
    queries share the user's history and the pool their ground truth comes from, and interest records and
    `per_user` > 1 give a user several), else its record (`data_idx`: one demographic group's queries),
    else its query (with and without history: one query, two correlated answers)."""
    if sample.get("source_user") is not None:
        return f"user {sample['source_user']}"
    if sample.get("data_idx") is not None:
        return f"record {sample['data_idx']}"
    return f"query {query_of(sample)}"


class ListedTitles(TypedDict):
    """An assistant's answer: the titles it recommends, in order, each one's catalog item (None: no item
    recognised), and whether it declined (`ftr`)."""

    strings: list[str]
    item_ids: list[str | None]
    ftr: bool


class RecommendedTitles(ListedTitles, total=False):
    """`ListedTitles`, with `twins` where a title names several catalog items."""

    twins: dict


class RecBenchTask(Task):
    """Base of the RecBench+ tasks. Subclasses implement `make_records` and `samples_from_records`."""

    headline = "P"
    answer_type = RecommendedTitles

    kind = ""
    # No format retry: a refusal is a legitimate answer here (FTR; the right one for misinformed queries).
    format_reminder = None
    params = GenerationParams(max_tokens=200)

    #: the training popularity beyond-accuracy metrics read (`prepare_scoring`)
    scoring_needs_dataset = True

    def __init__(self):
        self.ctx: Context | None = None
        self.popularity = None

    def prepare_scoring(self, dataset) -> None:
        """The training part's item popularity (each user's last interaction held out), as LLMRec's."""
        from recharness.baselines.base import training_rows
        from recharness.metrics.beyond_accuracy import Popularity

        self.popularity = Popularity.of(training_rows(dataset.interactions), dataset.items["item_id"].to_list())

    def beyond_accuracy(self, samples: list[dict], predictions: dict[str, dict]) -> dict:
        """coverage / Gini / ARP / novelty of the first 10 entries of each list, as units over samples with
        `unit_of` as cluster (`evaluate` says why there is no head / tail split); {} without a popularity."""
        from recharness.metrics.beyond_accuracy import beyond_accuracy_units

        if self.popularity is None or not samples:
            return {}
        # targets None: the ground truth is a set of items, no single target to call head or tail
        return beyond_accuracy_units([s["id"] for s in samples], top_lists(samples, predictions, TOP_K), None, None,
                                     self.popularity, k=TOP_K, clusters=[unit_of(s) for s in samples])

    def setup(self, dataset, context: Context | None = None) -> None:
        """Before run / parse / score: the build's shared context (made here when none is given)."""
        self.context(dataset, context)

    def context(self, dataset, given: Context | None = None) -> Context:
        """The suite context for `dataset`: the one passed in (the pipeline's), else the one this
        task already holds for the same dataset, else a new one; the task keeps it."""
        if given is not None:
            if given.dataset is not dataset:
                raise ValueError("the RecBench+ context was made for another dataset")
            self.ctx = given
        elif self.ctx is None or self.ctx.dataset is not dataset:
            self.ctx = make_context(dataset)
        return self.ctx

    def generation_params(self, sample: dict) -> GenerationParams:
        params = GenerationParams(max_tokens=int(sample.get("max_tokens", self.params.max_tokens)))
        return params.model_copy(update=self.overrides) if self.overrides else params

    # ------------------------------------------------------------ build

    def build(self, dataset, config: BuildConfig):
        ctx = self.context(dataset, config.context)
        opts = parse_options(config.options)
        path = find_file(config.options, self.kind)
        if path is not None:
            records = read_records(path, self.kind)
            source = str(path)
        else:
            records = self.make_records(ctx, config, opts)
            if opts.phrase_model:
                self.phrase(records, ctx, opts)
            source = "built"
            if config.out is not None and opts.write_official:
                write_records(config.out, self.kind, records)
        samples = list(self.samples_from_records(records, ctx, opts, source))
        self._seen = {"file": str(path) if path is not None else None, "records": len(records)}  # for `why_empty`
        self._notes = self._history_notes(records, ctx, opts, dataset, path)
        if path is not None and config.limit is not None and config.limit < self._n_queries(samples):
            samples = self._limit(samples, config.limit, config.seed)
        yield from samples

    def _history_notes(self, records: list[dict], ctx, opts: Options, dataset, path) -> list[str]:
        """What `build_notes` says: the queries of an official file whose user the dataset lacks (or that name
        none) get no with-history sample, as the paper's "with history" variant needs the user's history; said,
        so a with-history row is never read as covering the whole file."""
        if self.kind == "demographics" or True not in opts.history:
            return []  # a group query has no single user: it is never asked with a history
        lacking = [r for r in records if ctx.histories.get(str(r.get("source_user"))) is None
                   or r.get("source_user") is None]
        if not lacking:
            return []
        users = list(dict.fromkeys(str(r.get("source_user")) for r in lacking if r.get("source_user") is not None))
        named = (f"users {dataset.name} lacks (first: {', '.join(repr(u) for u in users[:3])})" if users
                 else "no user")
        kept = "asked without history only" if False in opts.history else "left out of the build"
        where = path if path is not None else "the built records"
        return [f"{self.name}: {len(lacking)} of the {len(records)} records of {where} name {named}: their queries "
                f"have no with-history sample ({kept}), so the with-history rows cover the other "
                f"{len(records) - len(lacking)}"]

    def build_notes(self) -> list[str]:
        """Notes on the last `build`: what it could not build as asked and left out (printed and kept in build.json)."""
        return list(getattr(self, "_notes", []))

    def why_empty(self, dataset, config: BuildConfig) -> str | None:
        """Which step left no query: the official file, the users it names, or the task's own query making
        (`why_none_made`), with its numbers."""
        seen = getattr(self, "_seen", None)
        if seen is None:
            return None
        if seen["file"] is not None:
            if not seen["records"]:
                return f"{self.name}: {seen['file']} holds no query"
            return (f"{self.name}: none of the {seen['records']} queries of {seen['file']} has a user {dataset.name} "
                    "has, and history=with shows the user's history: use --option history=both (or without), or the "
                    "dataset the file was made from")
        return None if seen["records"] else self.why_none_made(dataset, config)

    def why_none_made(self, dataset, config: BuildConfig) -> str | None:
        """Why `make_records` made no query (None: not known)."""
        return None

    @staticmethod
    def _query_key(s: dict) -> str:
        return s["id"].rsplit("-", 1)[0]  # "<task>-<query>-h" and "-n" are one query

    def _n_queries(self, samples: list[dict]) -> int:
        return len({self._query_key(s) for s in samples})

    def _limit(self, samples: list[dict], limit: int, seed: int) -> list[dict]:
        keys = list(dict.fromkeys(self._query_key(s) for s in samples))
        pick = set(np.asarray(keys, dtype=object)[np.sort(np.random.default_rng(seed).choice(len(keys), limit, replace=False))])
        return [s for s in samples if self._query_key(s) in pick]

    def make_records(self, ctx, config: BuildConfig, opts: Options) -> list[dict]:
        raise NotImplementedError

    def phrase(self, records: list[dict], ctx, opts: Options) -> None:
        raise NotImplementedError

    def samples_from_records(self, records: list[dict], ctx, opts: Options, source: str):
        raise NotImplementedError

    # ------------------------------------------------------------ answers and scores

    def parse(self, sample: dict, text: str) -> Parsed:
        if self.ctx is None:
            raise RuntimeError("call setup(dataset) before parse")
        from recharness.matching import has_refusal_cue, strip_reasoning
        from recharness.matching.refusal import is_nothing

        try:
            res = resolve_answer(text, self.ctx.matcher())
        except Exception as e:  # a parser bug must not stop a long run: kept, counted as invalid, visible
            value = {"strings": [], "item_ids": [], "ftr": True, "parse_error": repr(e)[:300]}
            return Parsed(value, valid=False, error=f"answer parser failed: {e!r}"[:300])
        body = strip_reasoning(text or "")
        if not body.strip():  # nothing, or reasoning cut off before its answer: no answer, never a decline (on a
            # misinformed query a decline is the best FTR, 1; an empty content is what max_tokens or a filter leaves)
            return Parsed(res, valid=False, error="empty answer" if not (text or "").strip()
                          else "no answer after the reasoning (cut off at max_tokens?)")
        claim = sample.get("misinformed") if isinstance(sample.get("misinformed"), dict) else None
        if claim is not None and not any(i is not None for i in res["item_ids"]) \
                and correction_only(body, res["strings"], claim.get("value")):
            # the premise rejected, nothing recommended: "O'Brien was never in that film", also after a label the
            # parser took for a title ("Correction: ..."): the answer the paper's FTR rewards on a misinformed query
            return Parsed({**res, "strings": [], "item_ids": [], "ftr": True, "correction": True})
        if res["strings"] or is_nothing(body) or has_refusal_cue(body):
            return Parsed(res)
        return Parsed(res, valid=False, error="no titles and no refusal found in the answer")

    def _rows(self, samples: list[dict], predictions: dict[str, dict]) -> list[dict | None]:
        """Per-query metrics; an unanswered sample scores the worst of everything: P = R = 0 and
        FTR on the wrong side (1, but 0 for misinformed queries, where declining is the right
        answer), so an HTTP error can never pass for a deliberate refusal."""
        rows = query_metrics(samples, predictions)
        worst_ftr = 0.0 if self.kind == "misinformed" else 1.0
        for n, s in enumerate(samples):
            p = predictions.get(s["id"])
            if p is not None and rows[n] is not None and unanswered(p):
                rows[n] = {"P": 0.0, "R": 0.0, "FTR": worst_ftr}
        return rows

    def ground_truth_hits(self, sample: dict, record: dict) -> int:
        """The ground-truth items in the list P and R score (`recommended`: cut to the sample's k, a twin title
        standing for its ground-truth item, the query's own films left out); before 2026-11-30 the report's
        examples counted the answer's matched ids as they were, and could say "hit" where the score has a miss."""
        parsed = record.get("parsed") if isinstance(record.get("parsed"), dict) else None
        listed = scored_list(parsed, sample.get("k") or None, sample.get("gt", []),
                             named_in_query(sample, record.get("output"), parsed))
        return len(set(listed) & set(sample.get("gt") or []))

    def score(self, samples: list[dict], predictions: dict[str, dict]) -> dict[str, float]:
        rows = self._rows(samples, predictions)
        m = aggregate(rows)
        preds = [predictions.get(s["id"]) for s in samples]
        got = [p for p in preds if p is not None]
        m["valid_rate"] = float(np.mean([bool(p.get("valid", True)) for p in got])) if got else 0.0
        if got:  # answered in shape, but not one named title is a catalog item (apart from invalid answers)
            m["unrecognised_rate"] = float(np.mean([unrecognised(p) for p in got]))
        errors = sum(bool((p.get("parsed") or {}).get("parse_error")) for p in got if isinstance(p.get("parsed"), dict))
        if errors:
            m["parse_errors"] = float(errors)
        failed = sum(p.get("error_kind") is not None and not p.get("valid", True) for p in got)
        if failed:
            m["failed"] = float(failed)
        gt_total = sum(len(s.get("gt", [])) for s in samples)
        gt_unmatched = sum(sum(g.startswith(GT_UNMATCHED) for g in s.get("gt", [])) for s in samples)
        if gt_unmatched or any(s.get("source", "built") != "built" for s in samples):
            # official files name the ground truth by title: how many of those titles the catalog matched
            m["gt_match_rate"] = 1.0 - gt_unmatched / gt_total if gt_total else 0.0
        conditioned = [s for s in samples if s.get("conditions")]
        unchecked = sum(s.get("satisfying") is None for s in conditioned)
        if unchecked:  # CMR skips the queries whose relations the KG lacks: said, not silent
            m["CMR_checkable"] = 1.0 - unchecked / len(conditioned)
        m.update({k: u.point() for k, u in self.beyond_accuracy(samples, predictions).items()})
        return m

    def units(self, samples: list[dict], predictions: dict[str, dict]) -> dict:
        """P, R, FTR: means over the queries with a prediction; CMR and unmatched over those that
        recommended something; valid_rate over answered queries. The unit resampled is `unit_of`: a
        source user's queries (with and without history) move together, or a demographic group's."""
        from recharness.metrics.bootstrap import mean_units

        rows = self._rows(samples, predictions)
        ids = [s["id"] for s in samples]
        units = [unit_of(s) for s in samples]
        out = {}
        for key in ("P", "R", "CMR", "FTR", "unmatched"):
            has = [r is not None and key in r for r in rows]
            if any(has):
                vals = [r[key] if h else 0.0 for r, h in zip(rows, has)]
                subset = "queries with a prediction" if key in ("P", "R", "FTR") else "queries that recommended something"
                out[key] = mean_units(ids, vals, has, how=f"mean over {subset}", clusters=units)
        got = [predictions.get(i) for i in ids]
        if any(p is not None for p in got):
            out["valid_rate"] = mean_units(ids, [bool(p is not None and p.get("valid", True)) for p in got],
                                           [p is not None for p in got], how="mean over answered queries",
                                           clusters=units)
            out["unrecognised_rate"] = mean_units(ids, [bool(p is not None and unrecognised(p)) for p in got],
                                                  [p is not None for p in got], how="mean over answered queries",
                                                  clusters=units)
        out.update(self.beyond_accuracy(samples, predictions))
        return out

    def breakdown(self, samples: list[dict], predictions: dict[str, dict]) -> dict[str, dict[str, float]]:
        return group_metrics(samples, self._rows(samples, predictions))

    def breakdown_members(self, samples: list[dict]) -> dict[str, list[int]]:
        return group_members(samples)

    def references(self, dataset, samples: list[dict], seed: int = 0) -> dict[str, dict[str, dict]]:
        """Popularity: the most-interacted catalog items not in the shown history."""
        ctx = self.context(dataset)
        pop = {}
        for s in samples:
            k = s.get("k") or s.get("ref_k", 10)
            pop[s["id"]] = recommended(s["id"], ctx.popular(set(s.get("history", [])), k), ctx)
        return {"popularity": pop}
