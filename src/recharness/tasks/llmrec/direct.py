"""LLMRec direct recommendation: rank a candidate list that hides the true next item.

Candidates are the held-out item plus seeded negatives the user never had,
or, where the dataset ships retriever candidate lists (LLMRank), that list
with the held-out item put in at a seeded position. The answer is parsed as
an ordered list of candidate numbers (or titles); answers that name no
candidate are invalid, answers that leave some out are partial. Both are
counted and kept: a candidate missing from the answer can't be a hit.
"""

from __future__ import annotations

import re

import numpy as np

from recharness.data.leave_last_out import leave_last_out
from recharness.errors import ConfigError
from recharness.models.base import GenerationParams
from recharness.tasks.base import BuildConfig, Parsed, Task
from recharness.tasks.llmrec.common import parts_from_options, ranking_scores, reference_predictions
from recharness.tasks.llmrec.prompts import direct_prompt, domain_of

_NUM = re.compile(r"(?<![\w.])\[?(\d{1,3})\]?(?![\w.])")


class DirectTask(Task):
    name = "direct"
    format_reminder = "Please answer only with the candidate numbers in ranked order, separated by commas."
    params = GenerationParams(max_tokens=120)
    ks = (1, 5, 10)

    def setup(self, dataset) -> None:
        return None

    def build(self, dataset, config: BuildConfig):
        opts = config.options
        n_cand = int(opts.get("n_candidates", 20))
        hist_len = int(opts.get("history_len", 10))
        retriever = opts.get("retriever")
        parts = parts_from_options(opts)
        domain = domain_of(dataset.name, dataset.meta)
        titles = dict(zip(dataset.items["item_id"].to_list(), dataset.items["title"].to_list()))
        all_items = np.array(sorted(titles))
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
        splits = leave_last_out(interactions, min_history=min_history, limit=config.limit, seed=config.seed)
        rng = np.random.default_rng(config.seed)
        for sp in splits:
            seen = set(sp.history) | {sp.target}
            if retriever:
                if sp.user_id not in retrieved:
                    continue
                negs = [i for i in retrieved[sp.user_id] if i != sp.target][: n_cand - 1]
                pos = int(rng.integers(0, len(negs) + 1))
                cand = negs[:pos] + [sp.target] + negs[pos:]
            else:
                negs: list[str] = []
                while len(negs) < n_cand - 1:
                    for i in rng.choice(len(all_items), size=2 * n_cand, replace=False):
                        it = str(all_items[i])
                        if it not in seen and it not in negs:
                            negs.append(it)
                            if len(negs) == n_cand - 1:
                                break
                cand = [str(x) for x in rng.permutation(np.array(negs + [sp.target], dtype=object))]
            shown = [{"title": titles.get(i, i), "rating": r} for i, r in zip(sp.history[-hist_len:], sp.ratings[-hist_len:])]
            yield {
                "id": f"direct-{sp.user_id}",
                "task": self.name,
                "user_id": sp.user_id,
                "messages": direct_prompt(domain, shown, [{"title": titles.get(c, c)} for c in cand], parts),
                "candidates": cand,
                "candidate_titles": [titles.get(c, c) for c in cand],
                "target": sp.target,
                "retriever": retriever or "sampled",
                "max_tokens": opts.get("max_tokens"),
                "prompt_parts": parts.to_dict(),
            }

    def parse(self, sample: dict, text: str) -> Parsed:
        cands = sample["candidates"]
        order: list[str] = []
        out_of_range = 0
        for m in _NUM.finditer(text[:20000]):
            k = int(m.group(1))
            if 1 <= k <= len(cands):
                if cands[k - 1] not in order:
                    order.append(cands[k - 1])
            else:
                out_of_range += 1
        how = "numbers"
        if not order:
            order = _titles_in_order(text, sample["candidate_titles"], cands)
            how = "titles"
        value = {"ranking": order, "how": how, "out_of_range": out_of_range, "partial": 0 < len(order) < len(cands)}
        if not order:
            return Parsed(value, valid=False, error="no candidate number or title found in the answer")
        return Parsed(value)

    def score(self, samples, predictions):
        ranked = []
        valid = partial = missing = 0
        for s in samples:
            p = predictions.get(s["id"])
            if p is None:
                missing += 1
            if p and p.get("valid", True) and p.get("parsed"):
                valid += 1
                partial += bool(p["parsed"].get("partial"))
                ranked.append(p["parsed"]["ranking"])
            else:
                ranked.append([])
        ks = tuple(k for k in self.ks if k <= max(len(s["candidates"]) for s in samples))
        m = ranking_scores(ranked, [s["target"] for s in samples], ks, ndcg_ks=tuple(k for k in (5, 10) if k in ks))
        n = max(1, len(samples))
        m.update(valid_rate=valid / n, partial_rate=partial / n, missing=float(missing))
        return m

    def references(self, dataset, samples, seed: int = 0):
        return reference_predictions(dataset, samples, seed, lambda r, s: {"ranking": r.rank(s["candidates"])})


def _titles_in_order(text: str, titles: list[str], ids: list[str]) -> list[str]:
    """Candidates named by title, in order of first mention (case-insensitive)."""
    low = text.lower()
    found = []
    for t, i in zip(titles, ids):
        pos = low.find(t.lower())
        if pos >= 0:
            found.append((pos, i))
    return [i for _, i in sorted(found)]
