"""Explicit, implicit and misinformed condition queries as recharness tasks."""

from __future__ import annotations

import numpy as np

from recharness.core.errors import ConfigError
from recharness.core.types import BuildConfig, reference_record
from recharness.matching.normalize import split_year
from recharness.tasks.recbench_plus.base import GT_UNMATCHED, RecBenchTask, recommended
from recharness.tasks.recbench_plus.conditions import CLASSES, ConditionSampler, condition_class, paper_mix
from recharness.tasks.recbench_plus.official import official_id
from recharness.tasks.recbench_plus.options import Options, parse_options
from recharness.tasks.recbench_plus.phrasing import (
    TEMPLATE,
    ConditionText,
    clean_query,
    condition_prompt,
    run_prompts,
    template_condition_queries,
)
from recharness.tasks.recbench_plus.prompts import test_messages

_KIND_CODE = {"explicit": 1, "implicit": 2, "misinformed": 3}
_CHUNK = 512  # users whose shared-pair counts are computed in one sparse product


def condition_texts(rec: dict, ctx) -> list[ConditionText]:
    """The record's conditions as the query states them (implicit / misinformed one marked)."""
    imp = rec.get("implicitCondition") or {}
    mis = rec.get("misinformedCondition") or {}
    out = []
    for r, v in rec["sharedRelationships"]:
        r, v = str(r), str(v)
        if imp and (r, v) == (imp.get("relation"), imp.get("value")):
            out.append(ConditionText(r, v, "implicit", tuple(ctx.shown(str(i)) for i in imp.get("referenceMovieIds", []))))
        elif mis and (r, v) == (mis.get("relation"), mis.get("value")):
            ids = (mis.get("errorInfo") or {}).get("movieIds", [])
            out.append(ConditionText(r, v, "misinformed", tuple(ctx.shown(str(i)) for i in ids)))
        else:
            out.append(ConditionText(r, v))
    return out


def _title_twins(ctx, kg) -> dict[int, tuple[int, ...]]:
    """{KG item index: the indices of the other items with its title} (`catalog.same_title_twins`)."""
    from recharness.matching.catalog import same_title_twins

    same = same_title_twins((i, ctx.titles[i]) for i in kg.item_ids if ctx.titles.get(i))
    at = kg.item_index
    return {at[i]: tuple(at[j] for j in js if j in at and j != i) for i, js in same.items() if i in at}


class ConditionTask(RecBenchTask):
    """One condition-query type; `kind` is explicit, implicit or misinformed."""

    def make_records(self, ctx, config: BuildConfig, opts: Options) -> list[dict]:
        if ctx.no_kg:
            raise ConfigError(f"{self.kind}: {ctx.no_kg}; the profile tasks (interest, demographics) need none")
        kg = ctx.kg
        hist = ctx.history_indices()
        users = ctx.users
        sampler = ConditionSampler(kg, ctx.popularity, min_items=opts.min_gt, max_items=opts.max_gt,
                                   require_specific=opts.specific, ref_top=opts.ref_top,
                                   misinfo_top=opts.misinfo_top, twins=_title_twins(ctx, kg))
        mix = np.asarray(opts.mix) if opts.mix is not None else paper_mix(self.kind, ctx.domain)
        order = np.random.default_rng(config.seed).permutation(len(users))
        records: list[dict] = []
        # users seen, those with a condition seed, condition sets drawn: what `why_none_made` reports
        made = self._made = {"users": len(users), "seeded": 0, "drawn": 0}
        for start in range(0, len(order), _CHUNK):
            chunk = order[start : start + _CHUNK]
            seeds = sampler.all_seeds([hist[users[u]] for u in chunk])
            for u, sd in zip(chunk.tolist(), seeds):
                if sd.size == 0:
                    continue
                made["seeded"] += 1
                user = users[u]
                # one generator per (seed, type, user): a user's queries do not depend on --limit
                rng = np.random.default_rng([config.seed, _KIND_CODE[self.kind], u])
                seen: set[tuple[int, ...]] = set()
                for _ in range(opts.per_user):
                    cls = CLASSES[int(rng.choice(3, p=mix))]
                    sr = sampler.sample_class(hist[user], cls, rng, sd)
                    if sr is None:
                        break
                    if tuple(sorted(sr.pairs)) in seen:
                        continue
                    seen.add(tuple(sorted(sr.pairs)))
                    made["drawn"] += 1
                    rec = self._record(ctx, sampler, user, sr, rng, opts, len(records))
                    if rec is not None:
                        records.append(rec)
                    if config.limit is not None and len(records) >= config.limit:
                        return records
        return records

    def why_none_made(self, dataset, config: BuildConfig) -> str | None:
        made = getattr(self, "_made", None)
        if made is None:
            return None
        opts = parse_options(config.options)
        if not made["users"]:
            return f"{self.kind}: no user of {dataset.name} has a history of items in the knowledge graph"
        if not made["seeded"]:
            specific = " of a specific relation (director, cast...)" if opts.specific else ""
            return (f"{self.kind}: none of the {made['users']} users has min_gt={opts.min_gt} history items sharing "
                    f"one knowledge-graph condition{specific}: lower --option min_gt"
                    + (", or set specific=false" if opts.specific else ""))
        if not made["drawn"]:
            return (f"{self.kind}: {made['seeded']} users have items sharing a condition, but no condition set of "
                    f"min_gt={opts.min_gt} to max_gt={opts.max_gt} items was found: raise --option max_gt")
        why = {"implicit": "no condition could be hidden behind reference items",
               "misinformed": f"no false claim of misinfo_items={opts.misinfo_items} items could be made"}
        return (f"{self.kind}: of the {made['drawn']} condition sets drawn, none could be made {self.kind} "
                f"({why.get(self.kind, 'rejected')})")

    def _record(self, ctx, sampler: ConditionSampler, user: str, sr, rng, opts: Options, idx: int) -> dict | None:
        kg = ctx.kg
        gt_set = {kg.item_ids[i] for i in sr.items}
        gt = list(dict.fromkeys(i for i in ctx.histories[user] if i in gt_set))  # history order, a repeat once
        conds = [kg.pairs[p] for p in sr.pairs]
        rec = {
            "source_user": user,
            "condition_num": len(conds),
            "movieCount": len(gt),
            "movieSubset": [ctx.title(i) for i in gt],
            "movieSubsetId": [official_id(i) for i in gt],
            "sharedRelationships": [[r, v] for r, v in conds],
            "direct_description_query": "",
            "situational_description_query": "",
            "data_idx": idx,
            "query_phrasing": TEMPLATE,
        }
        if self.kind == "implicit":
            ref = sampler.implicit(sr, rng)
            if ref is None:
                return None
            r, v = conds[ref.position]
            ids = [kg.item_ids[i] for i in ref.refs]
            rec["implicitCondition"] = {"relation": r, "value": v, "referenceMovies": [ctx.title(i) for i in ids],
                                        "referenceMovieIds": [official_id(i) for i in ids]}
        elif self.kind == "misinformed":
            mis = sampler.misinform(sr, rng, opts.misinfo_items)
            if mis is None:
                return None
            r, v = conds[mis.position]
            ids = [kg.item_ids[i] for i in mis.items]
            rec["misinformedCondition"] = {"relation": r, "value": v, "errorInfo": {
                "movies": [ctx.title(i) for i in ids], "movieIds": [official_id(i) for i in ids],
                "claim": f"{', '.join(ctx.title(i) for i in ids)} -{r}-> {v} (false in the KG)"}}
        direct, situational = template_condition_queries(condition_texts(rec, ctx), ctx.domain)
        rec["direct_description_query"] = direct
        rec["situational_description_query"] = situational
        return rec

    def phrase(self, records: list[dict], ctx, opts: Options) -> None:
        """Appendix H: the LLM writes `situational_description_query`; the direct one stays a template."""
        prompts = [condition_prompt(self.kind, condition_texts(r, ctx), ctx.domain) for r in records]
        texts, label = run_prompts(opts.phrase_model, prompts, opts.phrase_max_tokens)
        for rec, text in zip(records, texts):
            conds = condition_texts(rec, ctx)
            forbidden = [c.value for c in conds if c.mode == "implicit"]
            required = [c.value for c in conds if c.mode != "implicit" and ctx.kg.is_specific(c.relation)]
            refs = [split_year(t)[0] for c in conds if c.mode != "explicit" for t in c.refs]
            q, why = clean_query(text, forbidden, required, refs)
            if q is not None:
                rec["situational_description_query"] = q
                rec["query_phrasing"] = label
            else:
                rec["query_phrasing"] = f"{TEMPLATE} ({label} output rejected: {why})"
                rec["llm_output"] = text

    def samples_from_records(self, records: list[dict], ctx, opts: Options, source: str):
        kg = ctx.kg
        field = f"{opts.query_field}_description_query"
        other = "direct_description_query" if opts.query_field == "situational" else "situational_description_query"
        for rec in records:
            user = str(rec["source_user"])
            gt = []
            titles = rec.get("movieSubset") or []
            for j, raw in enumerate(rec["movieSubsetId"]):
                iid = str(raw)
                if iid not in ctx.titles and j < len(titles):
                    iid = ctx.matcher().match(str(titles[j])).item_id or f"{GT_UNMATCHED}{titles[j]}"
                elif iid not in ctx.titles:
                    iid = f"{GT_UNMATCHED}{raw}"
                if iid not in gt:
                    gt.append(iid)
            conds = [(str(r), str(v)) for r, v in rec["sharedRelationships"]]
            # CMR is checkable where the KG has every condition, and agrees the ground truth meets them: a value
            # spelt otherwise ("Penélope Cruz"), or facts the query's KG had and ours lacks, would score every
            # recommendation as failing, the ground truth too
            known = all(r in kg.relations and (r, v) in kg.pair_index for r, v in conds)
            satisfying = sorted(kg.satisfying(conds)) if known and conds else None
            if satisfying is not None and not {i for i in gt if not i.startswith(GT_UNMATCHED)} <= set(satisfying):
                satisfying = None
            imp = rec.get("implicitCondition")
            if self.kind == "implicit":
                # the KG baseline may use only what the query states; without the mask we cannot tell
                stated = [c for c in conds if imp and c != (imp.get("relation"), imp.get("value"))]
            else:
                stated = conds
            query = rec.get(field) or rec.get(other)
            history = ctx.histories.get(user)
            gt_set = ctx.hidden_with(set(gt))  # another edition of a ground-truth item is not shown either
            shown = [i for i in history if i not in gt_set] if history else []
            shown = shown[-opts.history_len :] if opts.history_len else []
            idx = rec.get("data_idx")
            cls = condition_class(len(conds))
            for wh in opts.history:
                if wh and history is None:
                    continue  # an official query whose user the dataset lacks: no history to show
                yield {
                    "id": f"{self.kind}-{idx}-{'h' if wh else 'n'}",
                    "task": self.name,
                    "messages": test_messages(ctx.domain, query, [ctx.shown(i) for i in shown] if wh else None, opts.k),
                    "query": query,
                    "query_phrasing": rec.get("query_phrasing", "official" if source != "built" else TEMPLATE),
                    "source": source,
                    "source_user": user,
                    "data_idx": idx,
                    "conditions": [list(c) for c in conds],
                    "condition_num": len(conds),
                    "stated_conditions": [list(c) for c in stated],
                    "gt": gt,
                    "gt_titles": [ctx.title(i) if not i.startswith(GT_UNMATCHED) else i[len(GT_UNMATCHED):] for i in gt],
                    "satisfying": satisfying,
                    "history": shown if wh else [],
                    "with_history": wh,
                    "k": opts.k,
                    "ref_k": opts.ref_k,
                    "max_tokens": opts.max_tokens,
                    "implicit": imp,
                    "misinformed": rec.get("misinformedCondition"),
                    "groups": [f"conditions={cls}", f"history={'with' if wh else 'without'}"],
                }

    def references(self, dataset, samples, seed: int = 0):
        """Popularity, and the KG baseline: the most popular items having every condition the query states. A
        query stating a condition our KG does not hold (an official file's relation or value spelt otherwise) gets
        no KG answer: invalid, not a decline (before 2026-11-29 it recommended nothing, a valid decline: FTR 1,
        the best a misinformed query can score)."""
        refs = super().references(dataset, samples, seed)
        ctx = self.context(dataset)
        kgb = {}
        for s in samples:
            k = s.get("k") or s.get("ref_k", 10)
            stated = [tuple(c) for c in s.get("stated_conditions", [])]
            unknown = [c for c in stated if c not in ctx.kg.pair_index]
            if unknown:
                rec = reference_record(s["id"], None, valid=False)
                rec["error"] = (f"the knowledge graph holds no {unknown[0][0]} = {unknown[0][1]!r}: the KG baseline "
                                "cannot answer the query as stated")
                kgb[s["id"]] = rec
                continue
            among = ctx.kg.satisfying(stated) if stated else None
            kgb[s["id"]] = recommended(s["id"], ctx.popular(set(s.get("history", [])), k, among=among), ctx)
        refs["kg-conditions"] = kgb
        return refs


class ExplicitTask(ConditionTask):
    name = kind = "explicit"


class ImplicitTask(ConditionTask):
    name = kind = "implicit"


class MisinformedTask(ConditionTask):
    name = kind = "misinformed"
