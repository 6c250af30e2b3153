"""Interest-based and demographics-based queries as recharness tasks."""

from __future__ import annotations

import numpy as np

from recharness.core.types import BuildConfig
from recharness.tasks.recbench_plus.base import GT_UNMATCHED, RecBenchTask
from recharness.tasks.recbench_plus.context import DOMAINS
from recharness.tasks.recbench_plus.official import official_id
from recharness.tasks.recbench_plus.options import Options, parse_options
from recharness.tasks.recbench_plus.phrasing import (
    TEMPLATE,
    demographics_prompt,
    interest_prompt,
    parse_subset_queries,
    run_prompts,
    template_demographics_query,
    template_interest_query,
)
from recharness.tasks.recbench_plus.profiles import (
    common_interest_sets,
    demographic_groups,
    group_summary,
    quintiles,
)
from recharness.tasks.recbench_plus.prompts import test_messages


def _seeded_subset(n: int, limit: int | None, seed: int) -> list[int]:
    if limit is None or limit >= n:
        return list(range(n))
    return sorted(np.random.default_rng(seed).choice(n, size=limit, replace=False).tolist())


class ProfileTask(RecBenchTask):
    """Shared by interest and demographics: records hold `query & ground true` lists."""

    def _ground_truth(self, ctx, q: dict, allowed: list[str] | None = None) -> list[str]:
        """Catalog ids of a query's `movie subset`: given ids if present, else titles matched to the catalog."""
        if isinstance(q.get("movie subset ids"), list):
            return [str(i) for i in q["movie subset ids"]]
        out = []
        for t in q["movie subset"]:
            m = ctx.matcher().match(str(t))
            iid = m.item_id if m.item_id is not None else f"{GT_UNMATCHED}{t}"
            if iid not in out:
                out.append(iid)
        return out

    def _llm_subsets(self, records: list[dict], prompts: list, allowed_of, ctx, opts: Options) -> None:
        """Replace template queries by the LLM's (reason, query, subset) triples where they check out."""
        from recharness.matching import CatalogMatcher

        texts, label = run_prompts(opts.phrase_model, prompts, opts.phrase_max_tokens)
        one = DOMAINS[ctx.domain][0]
        for rec, text in zip(records, texts):
            allowed = allowed_of(rec)
            m = CatalogMatcher([(i, ctx.title(i)) for i in allowed])
            qs, leaked = [], 0
            for q in parse_subset_queries(text, one):
                ids = []
                for t in q["subset"]:
                    iid = m.match(t).item_id
                    if iid is not None and iid not in ids:
                        ids.append(iid)
                if ids and names_its_answer(q["query"], [ctx.title(i) for i in ids] + [ctx.shown(i) for i in ids]):
                    leaked += 1  # Appendix H: "do not mention the movie title of the subset in the query"
                    continue
                if ids:
                    qs.append({"reason": q["reason"], "query": q["query"], "movie subset": [ctx.shown(i) for i in ids],
                               "movie subset ids": [official_id(i) for i in ids]})
            if qs:
                rec["query & ground true"] = qs
                rec["query_phrasing"] = label
            else:
                why = f"its {leaked} quer{'y names' if leaked == 1 else 'ies name'} their own answers" if leaked \
                    else "no usable query"
                rec["query_phrasing"] = f"{TEMPLATE} ({label} output had {why})"
                rec["llm_output"] = text


def names_its_answer(query: str, titles: list[str]) -> bool:
    """True if the query names one of its answer's titles (as catalogued or shown, with or without its year)."""
    import re

    from recharness.matching.normalize import split_year

    low = query.lower()
    for t in titles:
        core = split_year(t)[0].strip().lower()
        if len(core) >= 3 and re.search(rf"(?<!\w){re.escape(core)}(?!\w)", low):
            return True
    return False


class InterestTask(ProfileTask):
    name = kind = "interest"

    def make_records(self, ctx, config: BuildConfig, opts: Options) -> list[dict]:
        sets = common_interest_sets(ctx.histories, length=opts.interest_len, theta=opts.interest_support,
                                    prev_len=opts.interest_prev)
        self._made = {"users": len(ctx.histories), "sets": len(sets)}  # what `why_none_made` reports
        records = []
        for n in _seeded_subset(len(sets), config.limit, config.seed):
            s = sets[n]
            rng = np.random.default_rng([config.seed, 4, n])
            with_prev = [o for o in s.occurrences if o[1] > 0] or s.occurrences
            user, pos = with_prev[int(rng.integers(len(with_prev)))]
            # a user who had a ground-truth item before its window too (a repeat): not named by the query, which
            # would hand the answer over (as the shown history leaves it out; `names_its_answer` guards LLM phrasing)
            hidden = ctx.hidden_with(set(s.items))
            prev = [i for i in ctx.histories[user][max(0, pos - opts.interest_prev) : pos] if i not in hidden]
            query = template_interest_query([ctx.shown(i) for i in prev], ctx.domain) if prev else (
                f"What should I {'watch' if ctx.domain == 'movie' else 'try'} next?")
            records.append({
                "data_idx": len(records),
                "support": s.support,
                "popularity_quintile": s.quintile,
                "popular_movies": [official_id(i) for i in s.items],
                "popular_movie_titles": [ctx.title(i) for i in s.items],
                "previous_movie_statistics": [[[ctx.title(i) for i in p], c] for p, c in s.previous],
                "source_user": user,
                "source_position": pos,
                "query_phrasing": TEMPLATE,
                "query & ground true": [{"reason": "", "query": query,
                                         "movie subset": [ctx.shown(i) for i in s.items],
                                         "movie subset ids": [official_id(i) for i in s.items]}],
            })
        return records

    def why_none_made(self, dataset, config: BuildConfig) -> str | None:
        made = getattr(self, "_made", None)
        if made is None or made["sets"]:
            return None
        opts = parse_options(config.options)
        return (f"interest: no sequence of interest_len={opts.interest_len} items is shared by "
                f"interest_support={opts.interest_support} of the {made['users']} users: lower --option "
                "interest_support or interest_len")

    def phrase(self, records: list[dict], ctx, opts: Options) -> None:
        prompts = []
        for rec in records:
            popular = [ctx.shown(str(i)) for i in rec["popular_movies"]]
            prev = [([ctx.shown(t) if t in ctx.titles else t for t in p], c) for p, c in rec["previous_movie_statistics"]]
            prompts.append(interest_prompt(popular, prev, ctx.domain))
        self._llm_subsets(records, prompts, lambda r: [str(i) for i in r["popular_movies"]], ctx, opts)

    def samples_from_records(self, records: list[dict], ctx, opts: Options, source: str):
        supports = [r.get("support") for r in records]
        quint = quintiles(supports) if all(isinstance(x, int) for x in supports) and supports else None
        for n, rec in enumerate(records):
            q5 = rec.get("popularity_quintile") or (quint[n] if quint else None)
            user = str(rec["source_user"]) if rec.get("source_user") is not None else None
            history = ctx.histories.get(user) if user else None
            pos = rec.get("source_position")
            for j, q in enumerate(rec["query & ground true"]):
                gt = self._ground_truth(ctx, q)
                gt_set = ctx.hidden_with(set(gt))  # another edition of a ground-truth item is not shown either
                before = history[:pos] if history is not None and isinstance(pos, int) else history
                shown = [i for i in (before or []) if i not in gt_set]
                shown = shown[-opts.history_len :] if opts.history_len else []
                for wh in opts.history:
                    if wh and history is None:
                        continue
                    groups = [f"history={'with' if wh else 'without'}"]
                    if q5:
                        groups.append(f"popularity=Q{q5}")
                    yield {
                        "id": f"interest-{rec.get('data_idx', n)}.{j}-{'h' if wh else 'n'}",
                        "task": self.name,
                        "messages": test_messages(ctx.domain, q["query"], [ctx.shown(i) for i in shown] if wh else None, opts.k),
                        "query": q["query"],
                        "reason": q.get("reason", ""),
                        "query_phrasing": rec.get("query_phrasing", "official" if source != "built" else TEMPLATE),
                        "source": source,
                        "source_user": user,
                        "data_idx": rec.get("data_idx", n),
                        "support": rec.get("support"),
                        "popularity_quintile": q5,
                        "gt": gt,
                        "gt_titles": [str(t) for t in q["movie subset"]],
                        "satisfying": None,
                        "history": shown if wh else [],
                        "with_history": wh,
                        "k": opts.k,
                        "ref_k": opts.ref_k,
                        "max_tokens": opts.max_tokens,
                        "groups": groups,
                    }


class DemographicsTask(ProfileTask):
    name = kind = "demographics"

    def make_records(self, ctx, config: BuildConfig, opts: Options) -> list[dict]:
        ds = ctx.dataset
        self._made = {"demographics": False, "groups": 0}  # what `why_none_made` reports
        cols = set(ds.users.columns)
        if not {"age", "gender"} <= cols or not {"occupation", "occupation_name"} & cols:
            # as in the paper's book data: no demographics, no demographics-based queries (counted as 0); the
            # groups are by age, gender and occupation (`profiles.user_attributes` needs all three)
            return []
        groups = demographic_groups(ds.interactions, ds.users, max_groups=opts.demo_groups,
                                    min_users=opts.demo_min_users, top=opts.demo_top)
        self._made = {"demographics": True, "groups": len(groups)}
        plural = DOMAINS[ctx.domain][1].capitalize()
        records = []
        for n in _seeded_subset(len(groups), config.limit, config.seed):
            g = groups[n]
            ids = [i for i, _, _ in g.top]
            records.append({
                "data_idx": len(records),
                "group_type": g.group_type,
                "group": g.group,
                "group_size": g.size,
                "top_10_movies": [[official_id(i), s] for i, s, _ in g.top],
                "summary": group_summary(g, ctx.title, plural),
                "query_phrasing": TEMPLATE,
                "query & ground true": [{"reason": "", "query": template_demographics_query(g.attrs, ctx.domain),
                                         "movie subset": [ctx.shown(i) for i in ids],
                                         "movie subset ids": [official_id(i) for i in ids]}],
            })
        return records

    def why_none_made(self, dataset, config: BuildConfig) -> str | None:
        made = getattr(self, "_made", None)
        if made is None or made["groups"]:
            return None
        if not made["demographics"]:
            return (f"demographics: {dataset.name} has no age, gender and occupation of its users (as the paper's "
                    "book data): "
                    "build the other tasks (-t explicit -t implicit -t misinformed -t interest)")
        opts = parse_options(config.options)
        return (f"demographics: no age or gender group has demo_min_users={opts.demo_min_users} users who rated "
                "anything: lower it with --option demo_min_users=N")

    def phrase(self, records: list[dict], ctx, opts: Options) -> None:
        prompts = [demographics_prompt(r["summary"], ctx.domain) for r in records]
        self._llm_subsets(records, prompts, lambda r: [str(i) for i, _ in r["top_10_movies"]], ctx, opts)

    def samples_from_records(self, records: list[dict], ctx, opts: Options, source: str):
        for n, rec in enumerate(records):
            types = str(rec.get("group_type", "")).split("_")
            vals = rec.get("group")
            vals = [vals] if isinstance(vals, str) else list(vals or [])
            groups = [f"group_type={rec.get('group_type')}"] + [f"{t}={v}" for t, v in zip(types, vals)]
            groups.append("history=without")
            top = {str(i) for i, _ in rec.get("top_10_movies", [])}
            for j, q in enumerate(rec["query & ground true"]):
                gt = self._ground_truth(ctx, q)
                # a group has no single user: these queries are always asked without a history
                yield {
                    "id": f"demographics-{rec.get('data_idx', n)}.{j}-n",
                    "task": self.name,
                    "messages": test_messages(ctx.domain, q["query"], None, opts.k),
                    "query": q["query"],
                    "reason": q.get("reason", ""),
                    "query_phrasing": rec.get("query_phrasing", "official" if source != "built" else TEMPLATE),
                    "source": source,
                    "data_idx": rec.get("data_idx", n),
                    "group_type": rec.get("group_type"),
                    "group": rec.get("group"),
                    "gt": gt,
                    "gt_titles": [str(t) for t in q["movie subset"]],
                    "gt_in_group_top": sum(g in top for g in gt),
                    "satisfying": None,
                    "history": [],
                    "with_history": False,
                    "k": opts.k,
                    "ref_k": opts.ref_k,
                    "max_tokens": opts.max_tokens,
                    "groups": groups,
                }
