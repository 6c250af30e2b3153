"""PerRecBench methods without a model server: answer parsing, heapsort's call count, retries.

The scripted model here stands in for an LLM only to count calls and check
the heapsort bookkeeping; the real-model path is tests/test_perrecbench_llm.py.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import re

import pytest

from recharness.core.types import Completion
from recharness.tasks.perrecbench import prompts
from recharness.tasks.perrecbench.heapsort import heapsort, max_comparisons
from recharness.tasks.perrecbench.methods import predict_list, predict_pair, predict_point
from recharness.tasks.perrecbench.parsing import majority, parse_pair, parse_ranking, parse_rating

# ---- parsing -------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, value", [
    ('{"predicted_rating": 4}', 4.0),
    ('Sure! {"predicted_rating": 3.5}', 3.5),
    ('think... {"predicted_rating": 2} then {"predicted_rating": "5"}', 5.0),  # last object wins
    ('"predicted_rating": 4.0 because', 4.0),
    ('{"Rating": 1}', 1.0),
    ('{"predicted_rating": 4, "user_score": 2}', 4.0),  # the format's key, not the last one naming a score
    ('Step 1: {"user_average_rating": 3.8}. So the predicted rating: 5', 5.0),  # the format's key wherever it is
    ('{"predicted_rating": 2} Note: {"user_average_rating": 3.8}', 2.0),
    # a single rating written as text stays one (the review of the stricter rule)
    ('{"predicted_rating": "4 stars"}', 4.0), ('{"predicted_rating": "4/5"}', 4.0),
    ('{"predicted_rating": "4.0 out of 5"}', 4.0), ('{"predicted_rating": "+4"}', 4.0), ('{"predicted_rating": "4,5"}', 4.5),
    # a sentence's full stop, a scale and stars together (the third review: both read as no rating)
    ("Predicted rating: 4.", 4.0), ("The predicted rating: 4.0.", 4.0), ('{"predicted_rating": "4 out of 5 stars"}', 4.0),
    ("predicted rating: 4.5", 4.5),
])
def test_parse_rating(text, value):
    p = parse_rating(text)
    assert p.valid and p.value == value


@pytest.mark.parametrize("text", [
    "I think 4 stars", '{"predicted_rating": 7}', '{"predicted_rating": "good"}', "",
    # the review of 2026-11-29: a statistic under another key, a null, a range or hedge, an unreadable final answer
    # after a draft, all read before as a valid rating
    '{"user_average_rating": 3.8, "predicted_rating": null}', "Step 1: {\"user_average_rating\": 3.8}. Step 2: since",
    '{"confidence_score": 3}', '{"predicted_rating": "4-5"}', '{"predicted_rating": "3 or 4"}',
    '{"predicted_rating": "2 to 5"}', "Predicted rating: 4 or 5",
    'Draft {"predicted_rating": 4}. Final: {"predicted_rating": "N/A"}',
    # a range after a decimal is no shorter number ("3.5-4" read as 3, "12 to 15" as 1 by a backtracking match)
    "predicted rating: 3.5-4", "Predicted rating: 4.5 or 5", "predicted rating: 12 to 15", '{"predicted_rating": "8/10"}',
])
def test_parse_rating_invalid(text):
    p = parse_rating(text)
    assert not p.valid and p.error


@pytest.mark.parametrize("text, last, value", [
    ("[User A]", False, "A"), ("[User B]", False, "B"), ("user b", False, "B"), ("B", False, "B"),
    ("[User A] prefers it more than [User B]", False, "A"),
    ("User A likes drama but User B loves it. Final answer: [User B]", True, "B"),
    ("Comparing User A and User B, [User B] is more likely to enjoy it.", False, "B"),  # the bracketed answer
    # a direct answer naming both: the subject of its comparative, not the first user named (the review of
    # 2026-11-29: A was read, so a model meaning "user b" in both orders was counted as agreeing on the other)
    ("Compared to [User A], [User B] prefers it more.", False, "B"),
    ("Compared to [User B], [User A] prefers it more.", False, "A"),
    ("[User A] is less likely than [User B] to enjoy it.", False, "B"),
    ("Comparing User A and User B. [User B] is more likely to enjoy it.", False, "B"),
    ("[User B]. User A rarely rates comedies.", False, "B"),
    # naming both without a comparative: the first clause naming one, not negated (the fourth review: invalid)
    ("[User B], since [User A] dislikes dramas.", False, "B"), ("The answer is [User B]; [User A] rated dramas low.", False, "B"),
    ("[User B] (not [User A])", False, "B"), ("Comparing [User A] and [User B], I choose [User B].", False, "B"),
    ("Between [User A] and [User B], [User B].", False, "B"), ("Not [User A], but [User B].", False, "B"),
    ("Since [User A] dislikes horror, [User B].", False, "B"),
    # a reason's comparative names the other user; a worded answer decides (the sixth review: A, or refused)
    ("[User B], since [User A] prefers comedies.", False, "B"), ("[User B] because [User A] prefers romance.", False, "B"),
    ("[User B], since [User A] is more into comedies.", False, "B"), ("I think [User B], since [User A] dislikes it.", False, "B"),
    ("Probably [User B], as [User A] hates horror.", False, "B"), ("[User B] is the answer, since [User A] hates it.", False, "B"),
    ("The answer would be [User B], since [User A] hates it.", False, "B"),
    ("Since [User A] dislikes horror, [User B] is the one.", False, "B"),
    ("[User A], on the other hand, dislikes horror, so [User B].", False, "B"),
    ("Considering [User A] gave Heat a 2, [User B] is my pick.", False, "B"),
    # the seventh review: a name alone, then a remark about that same user, is no answer; the verdict decides
    ("[User A], as a romance lover, would not enjoy this horror film, so [User B] is more likely to prefer it.", False, "B"),
    ("[User A] as a romance lover would probably dislike this, so [User B] is more likely.", False, "B"),
    ("[User A], while enjoying dramas, rarely watches horror, so [User B] is the better fit.", False, "B"),
    ("[User A], because they prefer light comedies, would likely skip this, so [User B] is the better choice.", False, "B"),
    ("[User A] as well as [User B] might like it, but [User B] is more likely.", False, "B"),
    ("User A, as a horror fan, would rate it lower, so User B is more likely.", False, "B"),
    # the eighth review: reasons that reach the other user later in the sentence keep the name the answer
    ("[User B], because [User B] prefers comedies, whereas [User A] prefers dramas.", False, "B"),
    ("[User B], because they rated many comedies highly, while [User A] prefers dramas.", False, "B"),
    ("[User A], since [User A] loves action, while [User B] is more into documentaries and less likely to enjoy it.",
     False, "A"),
    ("[User B], as [User B] has a stronger preference for horror, whereas [User A] prefers comedies.", False, "B"),
    # the ninth review: an intensifier "so" is no conclusion
    ("[User B], since they like horror so much more than [User A] does, and [User A] prefers comedies.", False, "B"),
    ("[User B], because they love horror so much and [User A] prefers lighter fare.", False, "B"),
    ("[User A], because they love action so much more than [User B], whereas [User B] prefers dramas.", False, "A"),
    # the verdict first, then a reason with its own comparative (read as A: the last comparative's subject)
    ("[User B] is more likely, since [User A] prefers dramas.", False, "B"),
    ("[User A] is more into comedies, so [User B] is more likely.", False, "B"),
    # the tenth review: a reason first ends in the verdict; "and so", "therefore" conclude
    ("Since [User A] prefers comedies more, [User B] is more likely to enjoy this drama.", False, "B"),
    ("While [User A] is more into thrillers, [User B] would likely prefer this romantic comedy more.", False, "B"),
    ("[User A] prefers more upbeat titles, meaning [User B] would prefer this one more.", False, "B"),
    ("[User A] prefers action and so [User B] is more likely to enjoy it.", False, "B"),
    ("[User A], as a romance lover, would not enjoy it and so [User B] is more likely.", False, "B"),
    ("[User B] is the better fit because [User A] prefers comedies and thus would be less interested.", False, "B"),
    ("[User B] is more likely since [User A] prefers sci-fi and so wouldn't like this drama.", False, "B"),
    ("[User B] is more likely to enjoy it, given that [User A] prefers comedies.", False, "B"),
    # the eleventh review: "while" / "whereas" contrast, the verdict is last
    ("[User A] prefers light comedies, while [User B] is more likely to enjoy this dark drama.", False, "B"),
    ("[User A] prefers action whereas [User B] is more likely to enjoy this romance.", False, "B"),
    ("[User A] is more likely to enjoy comedies, while [User B] is more likely to enjoy this drama.", False, "B"),
])
def test_parse_pair(text, last, value):
    assert parse_pair(text, last=last).value == value


@pytest.mark.parametrize("text", [
    "Both [User A] and [User B] would enjoy it.",
    # a reason about the other user opening the sentence is no answer (the fifth review: read as A)
    "Given that [User A] mostly watches comedies, [User B] would enjoy this thriller.",
    "Unlike [User A], [User B] enjoys sci-fi films like this.",
    # the sixth review: a name alone is the answer only before a reason, the other user or the end (read as A)
    "[User A], who likes comedies, is less likely than [User B].", "[User A]: 2/5, [User B]: 4/5",
    "[User A], compared to [User B], is less likely to enjoy it.", "[User A]: unlikely, [User B]: likely",
    "Although [User A] has rated some dramas highly, [User B] has a stronger history.",
])
def test_a_direct_answer_naming_both_without_a_verdict_is_no_answer(text):
    p = parse_pair(text)
    assert not p.valid and p.error.startswith("no verdict"), p


@pytest.mark.parametrize("text, value", [
    ("Comparing the histories, [User B] fits better. Therefore [User B] is more likely to prefer the query item "
     "than [User A].", "B"),  # the last mention is the loser: it was taken as the answer
    ("Both like drama. [User A] is less likely to enjoy it than [User B].", "B"),
    ("To answer this, compare [User A] and [User B]. [User B] loves drama, so [User B] is the better fit.", "B"),
    ("[User A] rates sci-fi highly; [User B] rarely watches it. Final answer: [User A]. [User B] might too.", "A"),
    ("User B loves drama. Answer: A", "A"),
    # the subject of the comparative, not the first user after the marker or before the comparative word
    ("Conclusion: [User A] mostly rates action films low while [User B] loves romance, so [User B] is more likely "
     "to prefer it.", "B"),
    ("The answer is not [User A]; it is [User B].", "B"),
    ("Compared with [User A], who has rated more comedies, [User B] is more likely to prefer the item.", "B"),
    ("Final answer: [User A] is preferred over [User B].", "A"),
])
def test_parse_pair_after_a_chain_of_thought(text, value):
    assert parse_pair(text, last=True).value == value


def test_a_chain_of_thought_whose_last_sentence_names_both_without_a_verdict_is_no_answer():
    p = parse_pair("[User A] likes drama. Let us compare [User A] and [User B].", last=True)
    assert not p.valid and p.error.startswith("no verdict")


def test_parse_pair_ignores_user_average_and_rejects_nonsense():
    assert not parse_pair("User Average Rating is 3").valid
    assert not parse_pair("neither").valid


@pytest.mark.parametrize("text, n, value", [
    ('{"predicted_ranking": [2, 1, 3]}', 3, [2, 1, 3]),
    ('{"predicted_ranking": ["User3", "User1", "User2"]}', 3, [3, 1, 2]),
    ('{"predicted_ranking": [2, 1, 3]} {"ranking_note": [1]}', 3, [2, 1, 3]),  # a later loose "rank" key lost
    ('{"predicted_ranking": ["2", "1"]}', 2, [2, 1]),
    ('predicted_ranking: [1, 2]', 2, [1, 2]),
])
def test_parse_ranking(text, n, value):
    p = parse_ranking(text, n)
    assert p.valid and p.value == value


@pytest.mark.parametrize("text, n", [
    ('{"predicted_ranking": [1, 1, 2]}', 3), ('{"predicted_ranking": [1, 2]}', 3),
    ('{"predicted_ranking": [0, 1]}', 2), ('{"predicted_ranking": ["x", 1]}', 2), ("1 > 2", 2),
    # the last object with the format's key decides: an earlier draft is not the answer (before: [1, 2], valid)
    ('Draft {"predicted_ranking": [1, 2]}. Final: {"predicted_ranking": "N/A"}', 2),
])
def test_parse_ranking_must_be_a_permutation(text, n):
    assert not parse_ranking(text, n).valid


def test_majority_ties_go_to_first_seen():
    assert majority([3.0, 4.0, 4.0, 3.0]) == 3.0
    assert majority(["B", "A", "A"]) == "A"
    assert majority([[1, 2], [2, 1], [1, 2]]) == [1, 2]


# ---- heapsort ------------------------------------------------------------------------------------

def test_max_comparisons_hand_counts():
    # n=2: one comparison. n=3: build 2, extract 1. n=4: build 1 + (2 + 1), extract 2 + 1.
    assert [max_comparisons(n) for n in (1, 2, 3, 4)] == [0, 1, 3, 7]
    for n in range(2, 40):
        assert n - 1 <= max_comparisons(n) <= 2 * n * math.floor(math.log2(n))


def _run(n, answers):
    """Heapsort with comparator answers taken from a bit pattern (any, even inconsistent, answers)."""
    it = iter(answers)

    async def greater(a, b):
        return next(it, False)

    return asyncio.run(heapsort(n, greater))


@pytest.mark.parametrize("n", [2, 3, 4])
def test_max_comparisons_is_the_exact_worst_case(n):
    worst = 0
    for bits in itertools.product([False, True], repeat=max_comparisons(n)):
        order, count = _run(n, bits)
        assert sorted(order) == list(range(n))
        worst = max(worst, count)
    assert worst == max_comparisons(n)


@pytest.mark.parametrize("values", [[3, 1, 2], [1, 2, 3, 4], [4, 3, 2, 1], [2, 4, 1, 3, 5]])
def test_heapsort_sorts_best_first(values):
    async def greater(a, b):
        return values[a] > values[b]

    order, _ = asyncio.run(heapsort(len(values), greater))
    assert [values[i] for i in order] == sorted(values, reverse=True)


# ---- methods with a scripted model ----------------------------------------------------------------

class Scripted:
    """Answers from hidden truth (profiles carry "ID <k>"); counts calls; may garble the first answers."""

    def __init__(self, truth, garble=0, flip_second=False):
        self.truth, self.garble, self.flip_second, self.calls = truth, garble, flip_second, 0

    async def generate(self, messages, params):
        self.calls += 1
        # the question is the last user turn naming users (a retry appends a reminder after it)
        text = next((m["content"] for m in reversed(messages) if m["role"] == "user" and "ID " in m["content"]), None)
        if text is None:  # users cannot be told apart (no profiles): a fixed answer
            return Completion(text='{"predicted_ranking": [1, 2]}')
        ids = [int(x) for x in re.findall(r"ID (\d+)", text)]
        if self.garble > 0:
            self.garble -= 1
            out = "I cannot decide."
        elif "Which user prefer" in text or "[User A]" in text:
            a, b = ids[0], ids[1]
            out = "[User A]" if self.truth[a] > self.truth[b] else "[User B]"
            if self.flip_second and b < a:  # position bias: the second ordering always says A
                out = "[User A]"
        elif "predicted_ranking" in text:
            order = sorted(range(len(ids)), key=lambda i: -self.truth[ids[i]])
            out = '{"predicted_ranking": %s}' % [i + 1 for i in order]
        else:
            out = '{"predicted_rating": %g}' % (3 + self.truth[ids[0]])
        return Completion(text=out, prompt_tokens=10, completion_tokens=3, latency_s=0.001)


def group_sample(truth, **method):
    users = [{"user_id": str(k), "avg_rating": 3.0, "common_rating": 3.0, "profile": f"ID {k}",
              "history": [{"card": [["Item Title", f"Film {k}"]], "rating": 4.0}]} for k in range(len(truth))]
    return {"id": "g", "task": "pair", "level": "hard", "domain": "movie",
            "query_card": [["Item Title", "Query"]], "users": users, "shots": [],
            "truth": {"relative_ratings": list(truth), "avg_ratings": [3.0] * len(truth), "ratings": [3.0] * len(truth)},
            "method": {"profile": True, "cot": False, "sc": 1, "max_retries": 1, **method}}


@pytest.mark.parametrize("truth", [[0.5, -1.0], [1.0, -1.0, 2.5], [0.1, 2.0, -1.0, 1.0], [-2.0, -1.0, 0.0, 1.0]])
def test_pairwise_calls_match_heapsort(truth):
    model = Scripted(truth)
    rec = asyncio.run(predict_pair(model, group_sample(truth))).to_record()
    n = len(truth)
    p = rec["parsed"]
    assert rec["calls"] == model.calls == 2 * p["comparisons"]  # both orders, one call each
    assert n - 1 <= p["comparisons"] <= max_comparisons(n)
    assert p["agree"] == p["comparisons"] and p["disagree"] == 0
    assert [truth[i - 1] for i in p["ordering"]] == sorted(truth, reverse=True)


def test_pairwise_position_bias_counts_as_no_preference():
    truth = [1.0, -1.0]
    rec = asyncio.run(predict_pair(Scripted(truth, flip_second=True), group_sample(truth))).to_record()
    # order (0, 1): "A" (= user 0); order (1, 0): "A" again (bias) -> inconsistent -> not greater
    assert rec["parsed"]["disagree"] == 1 and rec["parsed"]["ordering"] == [1, 2]
    # no comparison agreed in both orders: the ordering is only the heapsort's fixed order, so no answer (it was
    # valid and scored +-1 on an easy group, where a group whose comparisons failed was invalid and scored 0)
    assert not rec["valid"] and rec["error"].startswith("none of the 1 comparisons agreed in both orders")


def test_pairwise_retries_are_counted_calls():
    truth = [0.1, 2.0, -1.0]
    model = Scripted(truth, garble=1)  # the first answer is garbage; its retry is fine
    rec = asyncio.run(predict_pair(model, group_sample(truth))).to_record()
    p = rec["parsed"]
    assert rec["retries"] == 1 and rec["calls"] == 2 * p["comparisons"] + 1 == model.calls
    assert p["failed"] == 0 and rec["valid"]


def test_a_failed_comparison_makes_the_group_invalid():
    """Four of six comparisons unparseable used to leave the group valid, ordered by the heapsort's fixed order
    where the model gave no answer (a perfect tau by chance of the shown order)."""
    truth = [2.0, 1.0, 0.0, -1.0]

    class OneReadable(Scripted):  # answers only when users 2 and 4 are compared, garbage otherwise
        async def generate(self, messages, params):
            text = next(m["content"] for m in reversed(messages) if m["role"] == "user" and "ID " in m["content"])
            ids = {int(x) for x in re.findall(r"ID (\d+)", text)[:2]}
            if ids != {1, 3}:
                self.calls += 1
                return Completion(text="hmm", finish_reason="stop")
            return await super().generate(messages, params)

    rec = asyncio.run(predict_pair(OneReadable(truth), group_sample(truth, max_retries=0))).to_record()
    p = rec["parsed"]
    assert p["agree"] >= 1 and 0 < p["failed"] < p["comparisons"]
    assert not rec["valid"] and rec["error"].startswith(f"{p['failed']} of the {p['comparisons']} comparisons failed")


def test_pairwise_unparseable_after_retries_is_reported():
    truth = [0.1, 2.0]
    rec = asyncio.run(predict_pair(Scripted(truth, garble=10), group_sample(truth, max_retries=1))).to_record()
    assert rec["parsed"]["failed"] == 1 and rec["error"] and rec["calls"] == 4
    # its one comparison failed: the ordering is the heapsort's fixed order, no answer, so the group is invalid
    assert not rec["valid"] and rec["error"].startswith("all 1 comparisons failed")


class CotScripted(Scripted):
    """Always right, and says so as a chain of thought does: "Therefore [winner] is more likely ... than [loser]";
    `cut`: the answer stops at max_tokens inside its reasoning, before the verdict."""

    def __init__(self, truth, cut=False):
        super().__init__(truth)
        self.cut = cut

    async def generate(self, messages, params):
        self.calls += 1
        text = next(m["content"] for m in reversed(messages) if m["role"] == "user" and "ID " in m["content"])
        a, b = [int(x) for x in re.findall(r"ID (\d+)", text)][:2]
        w, lose = ("A", "B") if self.truth[a] > self.truth[b] else ("B", "A")
        if self.cut:
            return Completion(text=f"[User {lose}] has rated many similar films. [User {w}] has", finish_reason="length")
        return Completion(text=f"Comparing the histories, [User {w}] fits the item better. Therefore [User {w}] is "
                               f"more likely to prefer the query item than [User {lose}].", finish_reason="stop")


@pytest.mark.parametrize("truth", [[1.0, -1.0], [1.0, -1.0, 2.5], [0.1, 2.0, -1.0, 1.0]])
def test_a_right_chain_of_thought_ranks_right(truth):
    """Its verdicts were read from the last user named (the loser) in both orders alike, so they agreed, and the
    heapsort put every group in reverse: tau -1 for a model that was always right."""
    from recharness.tasks.perrecbench.scoring import summarize

    s = group_sample(truth, cot=True)
    rec = asyncio.run(predict_pair(CotScripted(truth), s)).to_record()
    assert [truth[i - 1] for i in rec["parsed"]["ordering"]] == sorted(truth, reverse=True)
    assert summarize([s], {"g": rec})[0]["tau"] == 1.0
    cut = asyncio.run(predict_pair(CotScripted(truth, cut=True), s)).to_record()
    assert not cut["valid"] and cut["parsed"]["failed"] == cut["parsed"]["comparisons"]


def test_point_and_list_with_scripted_model():
    truth = [0.5, -1.0, 1.5]
    s = group_sample(truth)
    rec = asyncio.run(predict_point(Scripted(truth), s)).to_record()
    assert rec["valid"] and rec["parsed"]["ratings"] == [3.5, 2.0, 4.5] and rec["calls"] == 3
    rec = asyncio.run(predict_list(Scripted(truth), s)).to_record()
    assert rec["valid"] and rec["parsed"]["ordering"] == [3, 1, 2] and rec["calls"] == 1
    bad = asyncio.run(predict_list(Scripted(truth, garble=5), s)).to_record()
    assert not bad["valid"] and bad["calls"] == 2 and bad["retries"] == 1 and bad["error"]


def test_self_consistency_takes_the_majority():
    truth = [0.5, -1.0]
    model = Scripted(truth, garble=1)  # the first of three samples is garbage (and retried once)
    rec = asyncio.run(predict_list(model, group_sample(truth, sc=3, max_retries=0))).to_record()
    assert rec["valid"] and rec["parsed"]["ordering"] == [1, 2] and rec["calls"] == 3


def test_profiles_are_generated_when_not_given():
    truth = [0.5, -1.0]
    s = group_sample(truth)
    for u in s["users"]:
        del u["profile"]
        u["profile_history"] = [{"card": [["Item Title", "Old film"]], "rating": 2.0}]

    class Prof(Scripted):
        async def generate(self, messages, params):
            if "User Behavior history" in messages[-1]["content"]:
                self.calls += 1
                return Completion(text=f"ID {self.calls - 1}")  # profile i names user i
            return await super().generate(messages, params)

    rec = asyncio.run(predict_list(Prof(truth), s)).to_record()
    assert rec["profiles"] == ["ID 0", "ID 1"] and rec["parsed"]["ordering"] == [1, 2]
    assert (rec["calls"], rec["profile_calls"]) == (3, 2)
    s["method"]["profile"] = False  # switched off: no profile calls, no profile block
    rec = asyncio.run(predict_list(Prof(truth), s)).to_record()
    assert rec["profiles"] is None and (rec["calls"], rec["profile_calls"]) == (1, 0)

    # an empty profile is no profile: the sample fails (before, an empty section went into every prompt);
    # one cut by the token limit is used and counted
    s["method"]["profile"] = True

    class Empty(Scripted):
        async def generate(self, messages, params):
            if "User Behavior history" in messages[-1]["content"]:
                return Completion(text="", finish_reason="length")
            return await super().generate(messages, params)

    from recharness.core.errors import SampleError

    with pytest.raises(SampleError, match="came back empty"):
        asyncio.run(predict_list(Empty(truth), s))

    class Cut(Scripted):
        async def generate(self, messages, params):
            if "User Behavior history" in messages[-1]["content"]:
                self.calls += 1
                return Completion(text=f"ID {self.calls - 1}", finish_reason="length")
            return await super().generate(messages, params)

    assert asyncio.run(predict_list(Cut(truth), s)).to_record()["profiles_cut"] == 2

    # a reasoning model's <think> is no profile: cut off inside it, the profile is empty (before, the reasoning went
    # into every prompt as the user's profile); after it, the profile is what follows
    class Thinking(Scripted):
        async def generate(self, messages, params):
            if "User Behavior history" in messages[-1]["content"]:
                self.calls += 1
                return Completion(text="<think>Okay, the user wants a profile. Let me look", finish_reason="length")
            return await super().generate(messages, params)

    with pytest.raises(SampleError, match="reasoning is not a profile"):
        asyncio.run(predict_list(Thinking(truth), s))

    class Thought(Scripted):
        async def generate(self, messages, params):
            if "User Behavior history" in messages[-1]["content"]:
                self.calls += 1
                return Completion(text=f"<think>hmm</think>ID {self.calls - 1}")
            return await super().generate(messages, params)

    assert asyncio.run(predict_list(Thought(truth), s)).to_record()["profiles"] == ["ID 0", "ID 1"]


def test_prompts_follow_appendix_e():
    s = group_sample([0.5, -1.0])
    msgs = prompts.pair_messages(s["users"][0], s["users"][1], s["query_card"], "product", profiles=("p1", "p2"))
    assert msgs[0]["content"].startswith("Act as a personalized product recommender system. Below is a pair of users")
    u = msgs[1]["content"]
    assert u.startswith("[User A]\n<|The Start of User Data|>\n## User Profile\np1")
    assert "## User Most Common Rating\n3.0" in u and "### User Rating\n4" in u
    assert u.endswith('Which user prefer the query item more? Output only "[User A]" or "[User B]", do not generate anything else:')
    lm = prompts.list_messages(s["users"], s["query_card"], "movie", cot=True)
    assert lm[0]["content"].startswith("To rank user preferences, follow these steps:")
    assert "<|The Start of User2 Data|>" in lm[1]["content"] and "### User2 Rating" in lm[1]["content"]
    # without a profile, the history alone, as the authors' code's "w/o profile" prompts: no rating lines
    assert "Most Common Rating" not in lm[1]["content"] and "Average Rating" not in lm[1]["content"]
    assert "<|The Start of User1 Data|>\n### Item Title" in lm[1]["content"]
    assert lm[1]["content"].endswith("Answer: Let's think step by step.")
    pm = prompts.profile_messages(s["users"][0]["history"])
    assert pm[0]["content"].startswith("### User Behavior history\n### Item Title\nFilm 0")


def test_the_builds_max_retries_holds_unless_the_run_sets_one():
    """`build -o max_retries=N` is the method's; `run --max-retries` overrides it only when given (None: not
    given). Before, the runner's default 1 replaced every build's value."""
    from recharness.tasks.perrecbench.tasks import ListTask

    truth = [0.5, -1.0, 1.5]
    task = ListTask()
    kept = asyncio.run(task.predict(Scripted(truth, garble=1), group_sample(truth, max_retries=0),
                                    max_retries=None)).to_record()
    assert not kept["valid"] and kept["calls"] == 1 and kept["retries"] == 0  # the build's 0: no re-ask
    over = asyncio.run(task.predict(Scripted(truth, garble=1), group_sample(truth, max_retries=0),
                                    max_retries=1)).to_record()
    assert over["valid"] and over["calls"] == 2 and over["retries"] == 1
    two = asyncio.run(task.predict(Scripted(truth, garble=2), group_sample(truth, max_retries=2),
                                   max_retries=None)).to_record()
    assert two["valid"] and two["calls"] == 3 and two["retries"] == 2
