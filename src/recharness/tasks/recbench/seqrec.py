"""RecBench list-wise recommendation (SeqRec, §3.2): the next item after a user's positives.

Samples, the training and validation sequences beside them, and the split: `recbench.seqrec_data`
(leave-last-out per user, histories of the last 20 positives, no test or validation target in any
training sequence). The training rows are written to `<run>/recbench/seqrec_train.parquet` and
`seqrec_valid.parquet` (user_id, history, target), where the `train` stage's models read them.

Every method is judged by the target's rank over the whole catalog, with the user's history taken
out the same way for all (no sampled candidates):

* an LLM names `n_recs` titles in free text; they are matched to the catalog (`recharness.matching`),
  and the target's rank is its place among the titles as written (an unmatched title, a history item or one
  named again keeps its place: it costs the titles after it one place, and a history item is never a hit); a
  target it does not name has rank ∞ and counts 0;
* a reference model gives the rank directly (`parsed["rank"]`): SASRec scores every item, popularity
  orders every item it has counts for; a beam decoder (SID-SASRec, the title-trie LLM) ranks only
  the items of its beams, in beam order, and a target outside them has rank None (∞, counts 0).

Metrics (`metrics.full_ranking`): NDCG@10 (the paper's Table 5), HR@10, MRR, Recall@{5,10,20}, every
method's rank cut at the `n_recs` places an LLM is asked for (a whole-catalog ranker's own values beyond
them: `MRR (full)`, `Recall@20 (full)`). A failed or unanswered sample has rank ∞ and is counted in `valid_rate` /
`missing`: a model that answers little cannot look better by being judged on fewer samples.

One exception, declared by the method itself: records whose parsed answer carries `sample_cap`
(a slow method that answers only a sample of the test set on purpose, e.g. `title-cbs`) are
scored on the samples they answer only, and `n_scored` says how many; Table 5 shows that n.
Decoders that report beams (`beams`, `invalid`, `top1_invalid`: SID-SASRec) add `invalid_share`
(invalid beams / beams) and `invalid_top1_share`; a per-answer `latency_s` inside the parsed answer
(measured by the method, not by the `train` stage's timing loop) gives `answer_latency_s`.

Beyond accuracy (`metrics.beyond_accuracy`: coverage@10, Gini@10, ARP@10, novelty@10, HR@10 head /
tail), against the item popularity of the build's training sequences (their positives: what the
references learn from; the leave-last-out part of the data when the run has none). The top-10 list
of a sample (`sample_list`): the items among an LLM's first 10 listed titles (history, unmatched titles and
repeats then dropped), a reference's `parsed["top"]` (the 10 best items, history excluded, that the model gives
beside the rank: `Baseline.target_ranks_and_tops`) or, for a decoder without one, its decoded
`items`. A reference file written before `top` existed gives ranks only: its row keeps HR@10 head /
tail (they read the rank) and gets no list metrics (coverage, Gini, ARP, novelty), rather than
metrics of lists it never stored.
"""

from __future__ import annotations

import json
import math
from typing import TypedDict

import numpy as np

from recharness.baselines import TrainData
from recharness.baselines.base import SEQUENCE_PARTS
from recharness.core.errors import ConfigError
from recharness.core.io import atomic_write_parquet, atomic_write_text
from recharness.core.rundir import RunDir
from recharness.core.types import BuildConfig, GenerationParams, Parsed, sample_capped
from recharness.matching.twins import naming_target
from recharness.metrics.full_ranking import rank_metrics
from recharness.tasks.base import Task
from recharness.matching.answers import CatalogContext, listed_slots, matched_named
from recharness.tasks.wording import DOMAIN_NOUNS, domain_of
from recharness.tasks.options import check
from recharness.tasks.recbench.options import SeqrecOptions
from recharness.tasks.recbench.seqrec_data import (
    global_eligible,
    global_split,
    positive_sequences,
    split,
    split_facts,
)
from recharness.tasks.references import reference_records

SUITE = "recbench"
RECALL_KS = (5, 10, 20)
#: the list length of the beyond-accuracy metrics (coverage@10 ...) and of a reference's `top`
TOP_K = 10
NO_LIST = "no recommendation list found in the answer"


def seqrec_messages(history_titles: list[str], n: int, domain: str = "movie", *, task_description: bool = True,
                    behaviour: bool = True, format_indicator: bool = True) -> list[dict[str, str]]:
    """ctr's layout (a system instruction, "User behavior sequence:" with numbered titles) asking for
    the next `n` items as a numbered list."""
    one, many, verb = DOMAIN_NOUNS[domain]
    system = (f"You are a recommender. I will provide a user behavior sequence: the {many} the user {verb}, "
              f"oldest first. Please recommend the {many} this user is most likely to interact with next.")
    parts = []
    if behaviour:
        lines = [f"({k}) {t}" for k, t in enumerate(history_titles, 1)] or ["(none)"]
        parts.append("User behavior sequence:\n" + "\n".join(lines))
    parts.append(f"Recommend the next {n} {many}.")
    if format_indicator:
        parts.append(f"Answer with a numbered list of exactly {n} {one} titles"
                     + (" with their release year" if domain == "movie" else "")
                     + ", one per line, most likely first, and nothing else. "
                     "Do not repeat titles from the sequence.")
    user = {"role": "user", "content": "\n".join(parts)}
    return [{"role": "system", "content": system}, user] if task_description else [user]


def list_rank(items: list[str], target: str, exclude: set[str], limit: int | None = None) -> float:
    """The target's 1-based place among `items` with `exclude` and repeats dropped, within the first `limit` of
    them (the list length the prompt asked for); inf when absent."""
    seen: set[str] = set()
    for i in items:
        if i in exclude or i in seen:
            continue
        seen.add(i)
        if limit is not None and len(seen) > limit:
            break
        if i == target:
            return float(len(seen))
    return math.inf


def sample_rank(sample: dict, rec: dict | None) -> float:
    """The target's rank from a prediction record: a reference model's `rank`, or the place in an
    LLM's matched items; inf for no record, no parsed answer or an unranked target."""
    parsed = (rec or {}).get("parsed")
    if not isinstance(parsed, dict):
        return math.inf
    if "rank" in parsed:
        r = parsed["rank"]
        return float(r) if r is not None and r >= 1 else math.inf
    # a title carried by several ids (`twins`) names the target too when one of them is: a hit, once
    # the titles asked for (`n_recs`), the first listed, not every one a longer answer names: Recall@20 / MRR
    # over 10 asked; an invented, repeated or history title listed among them spends its place (`listed_slots`),
    # and a history title is never a hit (a reference's list leaves the history out)
    n = sample.get("n_recs")
    slots = naming_target(listed_slots(parsed, n), parsed.get("twins"), sample["target"])
    return slot_rank(slots, sample["target"], set(sample["history"]))


def slot_rank(slots: list[str | None], target: str, exclude: set[str]) -> float:
    """The target's 1-based place in `slots` as listed (every entry holds its place), inf when absent or in
    `exclude`."""
    if target in exclude:
        return math.inf
    for k, i in enumerate(slots, 1):
        if i == target:
            return float(k)
    return math.inf


def list_metrics(samples: list[dict], recs: list[dict | None]) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Per-sample rank metrics on equal terms, and the ranks they read. Every method's target rank is cut at the
    list length the task asks an LLM for (`n_recs`): a ranker's target at place 15 of the catalog is a miss, as
    an LLM's unlisted target is, so MRR is over the first `n_recs` places for both and Recall@k is given only
    for k <= `n_recs`. A whole-catalog ranker's MRR and its Recall@k beyond the list stand apart, named
    `MRR (full)` and `Recall@20 (full)`: no LLM row can have them, nor a beam decoder (its ranks stop at its beams)."""
    ranks = np.array([sample_rank(s, r) for s, r in zip(samples, recs)], dtype=np.float64)
    cap = np.array([s.get("n_recs") or np.inf for s in samples], dtype=np.float64)
    capped = np.where(ranks <= cap, ranks, np.inf)
    shortest = float(cap.min()) if cap.size else np.inf
    within = [k for k in RECALL_KS if k <= shortest]
    per = rank_metrics(capped, ks=sorted({*within, 10}), per_sample=True)
    out = {"NDCG@10": per["ndcg@10"], "HR@10": per["hr@10"], "MRR": per["mrr"]}
    out.update({f"Recall@{k}": per[f"recall@{k}"] for k in within})
    # a ranker of the whole catalog: a rank and no beams (a beam decoder's rank stops at its beams: SID-SASRec,
    # title-cbs, a fine-tuned ID/SID model, whose "full" MRR would not be the catalog's)
    ranked = [isinstance((r or {}).get("parsed"), dict) and "rank" in r["parsed"] and "beams" not in r["parsed"]
              for r in recs]
    if recs and all(ranked) and (np.isfinite(cap).any()):  # what the whole catalog gives it
        full = rank_metrics(ranks, ks=RECALL_KS, per_sample=True)
        out["MRR (full)"] = full["mrr"]
        out.update({f"Recall@{k} (full)": full[f"recall@{k}"] for k in RECALL_KS if k not in within})
    return out, capped


def sample_list(sample: dict, rec: dict | None, k: int = TOP_K) -> list[str] | None:
    """A record's top-`k` list for the beyond-accuracy metrics: an LLM's first k places as written (a title
    carried by several ids standing for the target when one of them is), then unmatched titles, history items and
    repeats dropped; a reference's `top` (else a decoder's `items`), history items and repeats dropped; [] for no
    record or no parsed answer; None when the record
    gives a rank but no list (a reference file from before `top`): its list is unknown, not empty."""
    parsed = (rec or {}).get("parsed")
    if not isinstance(parsed, dict):
        return []
    if "rank" in parsed:
        items = parsed.get("top", parsed.get("items"))
        if items is None:
            return None
    else:  # an LLM's list: its first k places as written (`listed_slots`), then what names no new item dropped
        k = min(k, sample.get("n_recs") or k)
        items = naming_target(listed_slots(parsed, k), parsed.get("twins"), sample["target"])
    drop = set(sample["history"])
    return [i for i in dict.fromkeys(items) if i is not None and i not in drop][:k]


def seqrec_popularity(dataset, run_dir):
    """The item popularity beyond-accuracy metrics read: the build's training sequences' positives
    (`TrainData.of_build`), else the leave-last-out part of `dataset`."""
    from recharness.metrics.beyond_accuracy import Popularity

    train = TrainData.of_build(dataset, run_dir, SUITE)
    return Popularity.of(train.interactions, dataset.items["item_id"].to_list())


def beyond_accuracy(pop, samples: list[dict], recs: list[dict | None], ranks: np.ndarray,
                    users: list) -> dict:
    """coverage / Gini / ARP / novelty of the top-10 lists and HR@10 on head vs tail targets, as units
    over samples with users as clusters; only HR@10 head / tail when some record's list is unknown
    (`sample_list` None); {} without a popularity (scored outside the score stage)."""
    from recharness.metrics.beyond_accuracy import beyond_accuracy_units

    if pop is None or not samples:
        return {}
    lists = [sample_list(s, r) for s, r in zip(samples, recs)]
    known = all(lst is not None for lst in lists)
    hits = (np.asarray(ranks, dtype=np.float64) <= TOP_K).astype(np.float64)
    return beyond_accuracy_units([s["id"] for s in samples], lists if known else [[] for _ in samples],
                                 [s["target"] for s in samples], hits, pop, k=TOP_K, clusters=users,
                                 accuracy=f"HR@{TOP_K}")


def unrecognised(rec: dict) -> bool:
    """A valid answer (a list of titles) none of which the catalog knows."""
    parsed = rec.get("parsed") if isinstance(rec.get("parsed"), dict) else {}
    return bool(rec.get("valid", True) and parsed.get("strings") and not parsed.get("items"))


def decoder_stats(parsed: list[dict]) -> dict[str, float]:
    """Invalid beams (share of all beams, share of top-1 answers) and the mean per-answer latency,
    from the parsed answers that report them (beam decoders: SID-SASRec, title-cbs)."""
    out: dict[str, float] = {}
    beams = [p for p in parsed if "invalid" in p and p.get("beams")]
    if beams:
        out["invalid_share"] = float(sum(p["invalid"] for p in beams) / sum(p["beams"] for p in beams))
        out["invalid_top1_share"] = float(np.mean([bool(p.get("top1_invalid")) for p in beams]))
    lat = [p["latency_s"] for p in parsed if isinstance(p.get("latency_s"), (int, float))]
    if lat:
        out["answer_latency_s"] = float(np.mean(lat))
    return out


def distinct_items(df) -> int:
    """Distinct items in (history, target) rows."""
    return df["history"].explode().append(df["target"]).drop_nulls().n_unique() if df.height else 0


class TargetRank(TypedDict):
    """A ranking model's answer: the target's 1-based rank (None: never ranked)."""

    rank: int | None


class DecodedRank(TargetRank, total=False):
    """A ranking answer: the rank, with (optional keys) its top-10 list, history excluded (`top`: files
    written before beyond-accuracy metrics lack it), and what a decoder's search found."""

    top: list[str]
    items: list[str]
    beams: int
    invalid: int
    top1_invalid: bool


class ListedItems(TypedDict):
    """A generated list's answer: the catalog items it names, in order (`CatalogContext.resolve`)."""

    items: list[str]


class SeqrecTask(Task):
    name = "seqrec"
    selects_users = True  # honours BuildConfig.users (build --users FILE)
    builds_apart_from = ("ctr",)  # its own split of the training data (recbench/*.parquet)
    #: §3.2 Group G (SASRec), Group H (SID-SASRec with / without CBS), the zero-shot title-trie LLM row
    baselines = ("popularity", "itemknn", "ease", "als", "markov", "sasrec", "sasrec-1l", "sasrec-3l", "sasrec-4l", "sid-sasrec", "sid-sasrec-free",
                 "title-cbs")
    headline = "NDCG@10"
    answer_type = DecodedRank | ListedItems
    format_reminder = "Please answer only with a numbered list of titles, one per line."
    params = GenerationParams(max_tokens=300)
    #: a ranker's records carry the target's full-catalog rank, computed for evaluation alone: the latency of its
    #: answer (the top-10 list) leaves it out (`runner.latency.timed_predict`); a decoder's rank is read off its
    #: decoded list, its answer, and stays timed
    evaluation_work = True

    #: the training popularity beyond-accuracy metrics read (`prepare_scoring`)
    scoring_needs_dataset = True

    def __init__(self):
        self.ctx: CatalogContext | None = None
        self.popularity = None

    def target_rank(self, sample: dict, record: dict | None) -> int | None:
        """As `score` reads it: the target's place in the list as written (an invented, repeated or history title
        holding its place), a title's twin ids standing for the target."""
        r = sample_rank(sample, record)
        return int(r) if math.isfinite(r) else None

    def setup(self, dataset, context=None) -> None:
        self.ctx = CatalogContext.of(dataset)

    def prepare_scoring(self, dataset) -> None:
        self.popularity = seqrec_popularity(dataset, self.run_dir)

    def build(self, dataset, config: BuildConfig):
        opts = check(SeqrecOptions, config.options, f"{SUITE}/{self.name}")
        if config.out is not None and RunDir(config.out).pairs(SUITE).exists():
            raise ConfigError(f"{RunDir(config.out).pairs(SUITE)} holds ctr training pairs of another split: build "
                              "seqrec into its own --out directory (or remove that file)")
        seqs, rule = positive_sequences(dataset.events(), opts.positives)
        sizes = dict(test_users=config.limit or (None if opts.all_users or config.users else opts.test_users),
                     only=config.users, train_sequences=None if opts.all_users else opts.train_sequences,
                     history_len=opts.history_len, min_history=opts.min_history, seed=config.seed)
        cut_t = None
        if opts.split == "global_time":
            from recharness.data.temporal_split import cut_time

            cut_t = cut_time(dataset.events(), opts.cut_quantile, dataset.meta)
            sp = global_split(seqs, cut_t, **sizes)
        else:
            sp = split(seqs, **sizes)
        titles = {i: t or i for i, t in zip(dataset.items["item_id"].to_list(), dataset.items["title"].to_list())}
        domain = domain_of(dataset)
        prompt = {"task_description": opts.task_description, "behaviour": opts.behaviour,
                  "format_indicator": opts.format_indicator}
        samples = [{
            "id": f"seqrec-{u}", "task": self.name, "user_id": u, "history": h, "target": t,
            "target_title": titles.get(t, t), "n_recs": opts.n_recs, "max_tokens": max(300, 30 * opts.n_recs),
            "messages": seqrec_messages([titles.get(x, x) for x in h], opts.n_recs, domain, **prompt),
        } for u, h, t in sp.test.iter_rows()]
        if config.out is not None:
            for part, df in (("train", sp.train), ("valid", sp.valid)):
                atomic_write_parquet(RunDir(config.out).pairs(SUITE, SEQUENCE_PARTS[part]), df)
            info = {"split": opts.split, **({"cut": opts.cut_quantile, "cut_time": cut_t} if cut_t is not None else {}),
                    **split_facts(seqs, sp),
                    "positives": rule, "eligible_users": sp.eligible_users, "history_len": opts.history_len,
                    "test_sequences": sp.test.height, "valid_sequences": sp.valid.height,
                    "train_sequences": sp.train.height,
                    "train_targets": int(sp.train["history"].list.len().sum() or 0),  # next-item positions
                    "train_items": distinct_items(sp.train)}
            atomic_write_text(RunDir(config.out).pairs(SUITE, "seqrec_split", "json"),
                              json.dumps(info, indent=2))
        yield from samples

    def why_empty(self, dataset, config: BuildConfig) -> str | None:
        """Which filter of the split (`seqrec_data.split`) removed every test user, with its numbers."""
        opts = check(SeqrecOptions, config.options, f"{SUITE}/{self.name}")
        seqs, rule = positive_sequences(dataset.events(), opts.positives)
        if seqs.is_empty():
            return (f"seqrec: positives={rule}: {dataset.name} has no positive interaction"
                    + (" (rating > 3)" if rule == "ratings" else ""))
        if opts.split == "global_time":
            from recharness.data.temporal_split import cut_time

            t = cut_time(dataset.events(), opts.cut_quantile, dataset.meta)
            if not global_eligible(seqs, t, opts.min_history)[1]:
                after = sum(1 for ts in seqs["times"].to_list() if ts and ts[-1] >= t)
                return (f"seqrec: split=global_time cut={opts.cut_quantile} (time {t}): {after} of the {seqs.height} users "
                        "with positives have one at or after the cut, and none of them has min_history="
                        f"{opts.min_history} positives before their validation target (the last before the cut): "
                        "lower --option cut or min_history")
            return None
        lengths = seqs["items"].list.len().to_numpy().astype(np.int64)
        if not (lengths - 2 >= opts.min_history).any():
            return (f"seqrec: min_history={opts.min_history} keeps 0 of the {seqs.height} users with positives (a "
                    "test user needs min_history positives before their validation target, min_history + 2 in all; "
                    f"the most here is {int(lengths.max())}): lower it with --option min_history=N")
        return None

    def parse(self, sample: dict, text: str) -> Parsed:
        assert self.ctx is not None, "call setup(dataset) first"
        res = self.ctx.resolve(text)
        if res["refusal"] or not res["strings"]:
            return Parsed(res, valid=False, error=NO_LIST)
        return Parsed(res)

    def score(self, samples: list[dict], predictions: dict[str, dict]) -> dict[str, float]:
        capped = sample_capped(predictions.values())
        if capped:  # judged on the samples it answered (module docstring)
            samples = [s for s in samples if s["id"] in predictions]
        if not samples:
            return {}
        recs = [predictions.get(s["id"]) for s in samples]
        per, ranks = list_metrics(samples, recs)
        out = {k: float(v.mean()) for k, v in per.items()}
        out["valid_rate"] = float(np.mean([bool(r and r.get("valid", True)) for r in recs]))
        out["missing"] = float(sum(r is None for r in recs))
        parsed = [r["parsed"] for r in recs if r and isinstance(r.get("parsed"), dict) and "strings" in r["parsed"]]
        counts = [matched_named(p) for p in parsed]
        named = sum(n for _, n in counts)
        if parsed:  # an LLM's answers: how much of what it named is in the catalog
            if named:  # no title named at all: the share is undefined (left out), not 0
                out["matched_share"] = float(sum(m for m, _ in counts) / named)
            # answered in shape, but not one named title is a catalog item: apart from invalid answers
            out["unrecognised_rate"] = float(np.mean([unrecognised(r) for r in recs if r is not None]))
        out.update(decoder_stats([r["parsed"] for r in recs if r and isinstance(r.get("parsed"), dict)]))
        if capped:
            out["n_scored"] = float(len(samples))
        users = [s.get("user_id", s["id"]) for s in samples]
        out.update({k: u.point() for k, u in beyond_accuracy(self.popularity, samples, recs, ranks, users).items()})
        return out

    def units(self, samples: list[dict], predictions: dict[str, dict]) -> dict:
        """`score`'s metrics as units over samples, users resampled (for confidence intervals): the rank metrics and
        valid_rate are means of per-sample values; matched_share and invalid_share pool counts over the
        answers (ratios of sums); invalid_top1_share is a mean over the answers that report beams."""
        from recharness.metrics.bootstrap import RatioUnits, mean_units

        if sample_capped(predictions.values()):
            samples = [s for s in samples if s["id"] in predictions]  # as `score`: judged on its sample
        if not samples:
            return {}
        ids = [s["id"] for s in samples]
        users = [s.get("user_id", s["id"]) for s in samples]  # a user's samples move together
        recs = [predictions.get(i) for i in ids]
        per, ranks = list_metrics(samples, recs)
        how = "mean over samples"
        out = {k: mean_units(ids, v, how=how, clusters=users) for k, v in per.items()}
        out["valid_rate"] = mean_units(ids, [bool(r and r.get("valid", True)) for r in recs], how=how, clusters=users)
        parsed = [r["parsed"] if r and isinstance(r.get("parsed"), dict) else {} for r in recs]
        counts = [matched_named(p) if "strings" in p else (0, 0) for p in parsed]
        named = [n for _, n in counts]
        if sum(named):
            out["matched_share"] = RatioUnits(ids, [m for m, _ in counts], named,
                                              how="matched / named titles, pooled over answers", clusters=users)
        if any("strings" in p for p in parsed):  # as `score`: an LLM's answers, over the answered samples
            out["unrecognised_rate"] = mean_units(ids, [bool(r is not None and unrecognised(r)) for r in recs],
                                                  [r is not None for r in recs], how="mean over answered samples",
                                                  clusters=users)
        beams = ["invalid" in p and bool(p.get("beams")) for p in parsed]
        if any(beams):
            out["invalid_share"] = RatioUnits(ids, [p["invalid"] if b else 0 for p, b in zip(parsed, beams)],
                                              [p["beams"] if b else 0 for p, b in zip(parsed, beams)],
                                              how="invalid / all beams, pooled over answers", clusters=users)
            out["invalid_top1_share"] = mean_units(ids, [bool(p.get("top1_invalid")) for p in parsed], beams,
                                                   how="mean over answers with beams", clusters=users)
        out.update(beyond_accuracy(self.popularity, samples, recs, ranks, users))
        return out

    def references(self, dataset, samples: list[dict], seed: int = 0) -> dict[str, dict[str, dict]]:
        """The registered on-the-fly baselines (popularity), fitted on the build's training sequences only."""
        if self.run_dir is None or not RunDir(self.run_dir).pairs(SUITE, SEQUENCE_PARTS["train"]).exists():
            raise ConfigError(f"no training sequences for the reference rows in {self.run_dir}: rebuild the run "
                              f"(`recharness build {SUITE} -t {self.name}` writes {SUITE}/{SEQUENCE_PARTS['train']}.parquet)")
        train = TrainData.of_build(dataset, self.run_dir, SUITE)
        return reference_records(self, dataset, samples, seed, train=train)

    def reference_answer(self, ranker, sample: dict) -> dict:
        return self.reference_answers(ranker, [sample])[0]

    def reference_answers(self, baseline, samples: list[dict]) -> list[dict]:
        """The target's rank and the top-10 list beside it (`Baseline.target_ranks_and_tops`: one batch). In a
        timed call (`answering_only`) a model with top-k lists gives those alone: the answer, not the label's rank."""
        from recharness.baselines.base import Baseline
        from recharness.runner.latency import answering_only

        if answering_only() and type(baseline).top_ks is not Baseline.top_ks:
            # no target at all: a model whose top-k shares its scoring with the target's rank (SASRec) would
            # still rank the label inside the timed call ("" is no item: no rank is computed)
            return [{"top": t} for t in baseline.top_ks([("", s["history"], s.get("user_id")) for s in samples],
                                                        TOP_K)]
        return baseline.target_ranks_and_tops([(s["target"], s["history"], s.get("user_id")) for s in samples], TOP_K)

