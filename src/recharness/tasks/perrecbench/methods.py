"""The three ranking methods as model-call plans: pointwise, pairwise (heapsort), listwise.

Each method turns one group sample into model calls and a prediction
record.  Common machinery: a bounded retry with a format reminder after an
unparseable answer, optional self-consistency (n samples, majority of the
parsed answers), optional LLM-written profiles, and worked examples
(few-shot) as earlier chat turns.  Every call is counted and every
unparseable answer is kept in the record.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field

from recharness.core.errors import SampleError
from recharness.core.types import Prediction
from recharness.execution.ask import ask as runner_ask
from recharness.tasks.perrecbench import prompts
from recharness.tasks.perrecbench.heapsort import heapsort
from recharness.tasks.perrecbench.parsing import final_answer, majority, parse_pair, parse_ranking, parse_rating


@dataclass
class Tally:
    """Running totals over all model calls made for one sample."""

    calls: int = 0
    profile_calls: int = 0  # of `calls`, the ones that wrote a profile
    profiles_cut: int = 0  # of those, profiles the token limit cut short (used, and counted)
    retries: int = 0
    latency_s: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached: bool = True
    outputs: list[str] = field(default_factory=list)

    def add(self, c) -> None:
        self.calls += 1
        self.latency_s += c.latency_s
        self.prompt_tokens += c.prompt_tokens or 0
        self.completion_tokens += c.completion_tokens or 0
        self.cached &= bool(c.cached)
        self.outputs.append(c.text)


@dataclass
class Answer:
    value: object
    valid: bool
    error: str | None
    outputs: list[str]


async def ask(model, messages, parse, reminder: str, method: dict, tally: Tally, kind: str) -> Answer:
    """One question: n self-consistency samples, each asked through the runner's ask (retry with a reminder)."""
    n = max(1, int(method.get("sc", 1)))
    temperature = float(method.get("sc_temperature", 0.7)) if n > 1 else float(method.get("temperature", 0.0))
    max_retries = int(method.get("max_retries", 1))
    values, errors, outputs = [], [], []
    for s in range(n):
        params = prompts.params_for(kind, cot=bool(method.get("cot")), temperature=temperature, seed=s,
                                    max_tokens=method.get("max_tokens"))
        asked = await runner_ask(model, messages, params, parse, reminder=reminder, max_retries=max_retries)
        for c in asked.completions:
            tally.add(c)
        tally.retries += asked.attempts - 1
        outputs.extend(asked.outputs)
        if asked.parsed.valid and kind == "pair" and method.get("cot") and asked.completions \
                and asked.completions[-1].finish_reason == "length" and final_answer(asked.completions[-1].text) is None:
            # cut off inside its chain of thought: the last sentence read is reasoning, not the verdict
            errors.append("cut off at max_tokens before a final answer")
        elif asked.parsed.valid:
            values.append(asked.parsed.value)
        else:
            errors.append(asked.parsed.error)
    if not values:
        return Answer(None, False, errors[-1] if errors else "no answer", outputs)
    return Answer(majority(values), True, None, outputs)


async def make_profiles(model, users: list[dict], method: dict, tally: Tally) -> list[str | None]:
    """Profiles for each user: a given one, an LLM-written one (paper's profile prompt), or None if off.

    The profile is written by the model under test (cached like any call); the
    paper had one instruction-tuned LLM write all profiles -- to hold profiles
    fixed across models, build with profiles=PATH ({user_id: text}).
    """
    if not method.get("profile"):
        return [None] * len(users)
    out: list[str | None] = []
    for u in users:
        if u.get("profile") is not None:
            out.append(u["profile"])
            continue
        params = prompts.params_for("profile", cot=False, max_tokens=method.get("profile_max_tokens"))
        c = await model.generate(prompts.profile_messages(u.get("profile_history", [])), params)
        tally.add(c)
        tally.profile_calls += 1
        from recharness.matching.parse import drop_reasoning

        text = drop_reasoning(c.text).strip()  # a reasoning model's <think> is no profile (cut off inside it: none)
        if not text:  # no profile is no answer: the group's prompts would carry an empty section
            raise SampleError("empty_profile", f"the profile of user {u.get('user_id')} came back empty "
                              f"(finish_reason {c.finish_reason!r}; reasoning is not a profile): the group is not "
                              "asked without it")
        tally.profiles_cut += c.finish_reason == "length"
        out.append(text)
    return out


async def _shot_turns(model, sample: dict, task: str, method: dict, tally: Tally) -> list[tuple[str, str]]:
    """Worked examples from held-out groups, rendered like the question, with the true answer."""
    turns = []
    cot = bool(method.get("cot"))
    for shot in sample.get("shots", []):
        users = shot["users"]
        profs = await make_profiles(model, users, method, tally)
        if task == "point":
            text = prompts.point_user_text(users[0], shot["query_card"], profs[0], cot)
        elif task == "pair":
            text = prompts.pair_user_text(users[0], users[1], shot["query_card"], (profs[0], profs[1]), cot)
        else:
            text = prompts.list_user_text(users, shot["query_card"], profs, cot)
        turns.append((text, shot["answer"]))
    return turns


def _record(value: dict, valid: bool, error: str | None, tally: Tally, profiles) -> Prediction:
    t = tally
    return Prediction(
        output="\n---\n".join(t.outputs[-8:]), parsed=value, valid=valid, error=error, attempts=1 + t.retries,
        latency_s=t.latency_s, prompt_tokens=t.prompt_tokens, completion_tokens=t.completion_tokens, cached=t.cached,
        extra={"outputs": t.outputs, "profiles": list(profiles) if any(p is not None for p in profiles) else None,
               "calls": t.calls, "profile_calls": t.profile_calls, "retries": t.retries,
               **({"profiles_cut": t.profiles_cut} if t.profiles_cut else {})})


async def predict_point(model, sample: dict) -> Prediction:
    """One rating per user; the group is ranked by predicted rating minus the user's mean."""
    method, tally = sample["method"], Tally()
    users = sample["users"]
    profiles = await make_profiles(model, users, method, tally)
    shots = await _shot_turns(model, sample, "point", method, tally)
    ratings, errors = [], []
    for u, prof in zip(users, profiles):
        msgs = prompts.point_messages(u, sample["query_card"], sample["domain"], profile=prof,
                                      cot=bool(method.get("cot")), shots=shots)
        a = await ask(model, msgs, parse_rating, prompts.reminder("point", len(users)), method, tally, "point")
        ratings.append(a.value if a.valid else None)
        if not a.valid:
            errors.append(f"user {u['user_id']}: {a.error}")
    valid = all(r is not None for r in ratings)
    return _record({"ratings": ratings, "failed": len(errors)}, valid, "; ".join(errors) or None, tally, profiles)


async def predict_pair(model, sample: dict) -> Prediction:
    """Heapsort with a comparator asked in both orders; a > b only if both orders say so."""
    method, tally = sample["method"], Tally()
    users = sample["users"]
    profiles = await make_profiles(model, users, method, tally)
    shots = await _shot_turns(model, sample, "pair", method, tally)
    cot = bool(method.get("cot"))
    stats = {"comparisons": 0, "agree": 0, "disagree": 0, "failed": 0}
    errors: list[str] = []

    async def one(a: int, b: int) -> Answer:
        msgs = prompts.pair_messages(users[a], users[b], sample["query_card"], sample["domain"],
                                     profiles=(profiles[a], profiles[b]), cot=cot, shots=shots)
        return await ask(model, msgs, lambda t: parse_pair(t, last=cot), prompts.reminder("pair", 2), method, tally, "pair")

    async def greater(a: int, b: int) -> bool:
        first, second = await asyncio.gather(one(a, b), one(b, a))
        if not (first.valid and second.valid):
            stats["failed"] += 1
            errors.append(f"users {a + 1} vs {b + 1}: {first.error or second.error}")
            return False
        if first.value != second.value:  # "A" then "B": the same user both times
            stats["agree"] += 1
            return first.value == "A"
        stats["disagree"] += 1
        return False

    order, comparisons = await heapsort(len(users), greater)
    stats["comparisons"] = comparisons
    value = {"ordering": [i + 1 for i in order], **stats}
    # an inconsistent comparison is the model's answer "no preference" (the paper counts a preference only where
    # the two orders agree): it counts as "not preferred" and `disagree` says how many. A failed one (no usable
    # answer after the retries) is no answer: the group is invalid, as a pointwise group with one unanswered
    # user, not ordered by the heapsort's fixed order in its place. So is a group where no comparison agreed
    # in both orders: its ordering would be that fixed order of the shown users, no answer at all
    valid = stats["failed"] == 0 and (not comparisons or stats["agree"] > 0)
    error = "; ".join(errors) or None
    if not valid:
        error = (f"all {comparisons} comparisons failed: {error}" if stats["failed"] == comparisons else
                 f"{stats['failed']} of the {comparisons} comparisons failed: {error}" if stats["failed"] else
                 f"none of the {comparisons} comparisons agreed in both orders ({stats['disagree']} disagreed): "
                 "the ordering would be the heapsort's fixed order")
    return _record(value, valid, error, tally, profiles)


async def predict_list(model, sample: dict) -> Prediction:
    """All users in one prompt; the answer must be a permutation of their indices."""
    method, tally = sample["method"], Tally()
    users = sample["users"]
    profiles = await make_profiles(model, users, method, tally)
    shots = await _shot_turns(model, sample, "list", method, tally)
    msgs = prompts.list_messages(users, sample["query_card"], sample["domain"], profiles=profiles,
                                 cot=bool(method.get("cot")), shots=shots)
    n = len(users)
    a = await ask(model, msgs, lambda t: parse_ranking(t, n), prompts.reminder("list", n), method, tally, "list")
    value = {"ordering": list(a.value) if a.valid else None}
    return _record(value, a.valid, a.error, tally, profiles)


PREDICT = {"point": predict_point, "pair": predict_pair, "list": predict_list}


def shot_answer(task: str, users_truth: list[float], rating: float | None = None, pair: tuple[int, int] | None = None) -> str:
    """The true answer of a worked example, in the format the question asks for."""
    if task == "point":
        return json.dumps({"predicted_rating": rating})
    if task == "pair":
        a, b = pair
        return "[User A]" if users_truth[a] > users_truth[b] else "[User B]"
    order = sorted(range(len(users_truth)), key=lambda i: -users_truth[i])
    return json.dumps({"predicted_ranking": [i + 1 for i in order]})
