"""PerRecBench prompts: the templates of the paper's Appendix E, rendered from structured samples.

Samples carry users and items as data (not finished prompts) because the
pieces are recombined per method: one user per prompt (pointwise), two in
both orders (pairwise), all of them (listwise), optionally with an
LLM-written profile and worked examples.  The only change to the paper's
wording is the domain noun ("movie recommender system" on MovieLens).
"""

from __future__ import annotations

from recharness.core.types import GenerationParams

Messages = list[dict[str, str]]

POINT_SYSTEM = (
    "Act as a personalized {domain} recommender system. Below is a list of user's rating history, shown in "
    "[User History]. Your task is to predict the user's rating for the query item, which is described in "
    "[Query Item Details]. Analyze each user's preferences for the query item based on their historical ratings "
    "to generate the prediction. Output a predicted rating ranging from 1 to 5, where 1 being not recommended and "
    "5 being highly recommended. The final answer should strictly follow this JSON structure: "
    '{{"predicted_rating": <rating>}}'
)
POINT_COT_STEPS = (
    "To predict a user's rating for a query item, follow these steps: 1. Analyze the user's preference for the "
    "query item using their history and profile. 2. Predict the user's rating for the query item: If the item is "
    "likely preferred by the user, the predicted rating should be higher than the user's average rating. If the "
    "item is unlikely to be preferred by the user, the predicted rating should be lower than the user's average "
    "rating. "
)
POINT_USER = "[User History]\n{user}\n\n[Query Item Details]\n{query}\n\nAnswer:"

PAIR_SYSTEM = (
    "Act as a personalized {domain} recommender system. Below is a pair of users, [User A] and [User B], each with "
    "their rating history. Your task is to determine which user is more likely to prefer the query item, based on "
    "its details in [Query Item Details]. Analyze each user's preferences for the query item using their "
    "historical ratings and output the user more likely to prefer the query item."
)
PAIR_USER = "[User A]\n{a}\n\n[User B]\n{b}\n\n[Query Item Details]\n{query}\n\nWhich user prefer the query item more? "
PAIR_ASK = 'Output only "[User A]" or "[User B]", do not generate anything else:'
PAIR_ASK_COT = 'First provide a short thinking step, then output your final answer in "[User A]" or "[User B]". Answer:'

LIST_SYSTEM = (
    "Act as a personalized {domain} recommender system. Below is a group of users accompanied with each user's "
    "rating history, shown in [Users]. Your task is to rank these users based on their preference of the query "
    "item, which is described in [Query Item Details]. Analyze each user's preferences for the query item based on "
    "their historical ratings to generate this ranking. Output the list of user indices (e.g., 1 for User1), ranked "
    "from highest to lowest preference for the query item. The final output should rank users from most preferred "
    "to least preferred for the query item and adhere to the JSON structure shown below: "
    '{{"predicted_ranking": <user_ranking>}}'
)
LIST_COT_STEPS = (
    "To rank user preferences, follow these steps: 1. Predict the rating of the query item for each user. "
    "2. Calculate the relative rating by subtracting each user's average rating from the predicted rating. "
    "3. Rank user preferences based on the relative ratings: users with higher relative ratings should be ranked "
    "higher, while those with lower relative ratings should be ranked lower. "
)
LIST_USER = (
    "[Users]\n{users}\n\n[Query Item Details]\n{query}\n\nThe answer ranks users from most preferred to least "
    "preferred for the query item and adhere to the following JSON format, output the list of user indices "
    "(e.g., 1 for User1){extra}: {{\"predicted_ranking\": <user_ranking>}}\nAnswer:"
)
COT_TAIL = " Let's think step by step."

PROFILE_USER = (
    "### User Behavior history\n{behaviours}\n\n### Task Instruction\nYou are given a list of user behavior history "
    "data. Your task is to analyze this data and create a user profile that describes the user's preferences, "
    "interests, and patterns of behavior. This profile should be written in a concise and coherent narrative form. "
    "Only generate user profile without any additional characters or formatting."
)

REMINDERS = {
    "point": 'Answer only with this JSON and nothing else: {{"predicted_rating": <a rating from 1 to 5>}}',
    "pair": 'Answer only with "[User A]" or "[User B]".',
    "list": 'Answer only with this JSON and nothing else: {{"predicted_ranking": [...]}}, listing each user index '
            "from 1 to {n} exactly once, most preferred first.",
}


def _fmt_rating(r: float) -> str:
    return f"{float(r):g}"


def render_card(card: list[list[str]] | list[tuple[str, str]]) -> str:
    return "\n".join(f"### {label}\n{value}" for label, value in card)


def render_behaviour(beh: dict, idx: int | None = None) -> str:
    who = f"User{idx}" if idx is not None else "User"
    return f"{render_card(beh['card'])}\n### {who} Rating\n{_fmt_rating(beh['rating'])}"


def render_query(card) -> str:
    return f"<|The Start of Query Item Information|>\n{render_card(card)}\n<|The End of Query Item Information|>"


def render_user(user: dict, profile: str | None = None, idx: int | None = None) -> str:
    """One user's block: with a profile, the profile and the most common and average rating; then the retrieved
    history. As the authors' code: its "w/o profile" prompts show the history alone (no rating lines)."""
    tag = f"User{idx}" if idx is not None else "User"
    parts = [f"<|The Start of {tag} Data|>"]
    if profile is not None:
        parts.append(f"## User Profile\n{profile.strip()}\n")
        parts.append(f"## User Most Common Rating\n{user['common_rating']:.1f}\n")
        parts.append(f"## User Average Rating\n{user['avg_rating']:.1f}\n")
    parts += [render_behaviour(b, idx) + "\n" for b in user["history"]]
    parts.append(f"<|The End of {tag} Data|>")
    return "\n".join(parts)


def _system(template: str, domain: str, cot_steps: str | None) -> dict:
    return {"role": "system", "content": (cot_steps or "") + template.format(domain=domain)}


def point_user_text(user: dict, query_card, profile: str | None, cot: bool) -> str:
    return POINT_USER.format(user=render_user(user, profile), query=render_query(query_card)) + (COT_TAIL if cot else "")


def point_messages(user: dict, query_card, domain: str, *, profile: str | None = None, cot: bool = False,
                   shots: list[tuple[str, str]] = ()) -> Messages:
    msgs = [_system(POINT_SYSTEM, domain, POINT_COT_STEPS if cot else None)]
    for u, a in shots:
        msgs += [{"role": "user", "content": u}, {"role": "assistant", "content": a}]
    msgs.append({"role": "user", "content": point_user_text(user, query_card, profile, cot)})
    return msgs


def pair_user_text(a: dict, b: dict, query_card, profiles: tuple[str | None, str | None], cot: bool) -> str:
    return PAIR_USER.format(a=render_user(a, profiles[0]), b=render_user(b, profiles[1]),
                            query=render_query(query_card)) + (PAIR_ASK_COT if cot else PAIR_ASK)


def pair_messages(a: dict, b: dict, query_card, domain: str, *, profiles=(None, None), cot: bool = False,
                  shots: list[tuple[str, str]] = ()) -> Messages:
    msgs = [_system(PAIR_SYSTEM, domain, None)]
    for u, ans in shots:
        msgs += [{"role": "user", "content": u}, {"role": "assistant", "content": ans}]
    msgs.append({"role": "user", "content": pair_user_text(a, b, query_card, profiles, cot)})
    return msgs


def list_user_text(users: list[dict], query_card, profiles: list[str | None], cot: bool) -> str:
    blocks = "\n\n".join(render_user(u, p, i) for i, (u, p) in enumerate(zip(users, profiles), 1))
    extra = "" if cot else ", do not include any additional information"
    return LIST_USER.format(users=blocks, query=render_query(query_card), extra=extra) + (COT_TAIL if cot else "")


def list_messages(users: list[dict], query_card, domain: str, *, profiles: list[str | None] | None = None,
                  cot: bool = False, shots: list[tuple[str, str]] = ()) -> Messages:
    profiles = profiles or [None] * len(users)
    msgs = [_system(LIST_SYSTEM, domain, LIST_COT_STEPS if cot else None)]
    for u, a in shots:
        msgs += [{"role": "user", "content": u}, {"role": "assistant", "content": a}]
    msgs.append({"role": "user", "content": list_user_text(users, query_card, profiles, cot)})
    return msgs


def profile_messages(behaviours: list[dict]) -> Messages:
    text = "\n\n".join(render_behaviour(b) for b in behaviours)
    return [{"role": "user", "content": PROFILE_USER.format(behaviours=text)}]


def reminder(task: str, n: int) -> str:
    return REMINDERS[task].format(n=n)


def params_for(task: str, *, cot: bool, temperature: float = 0.0, seed: int = 0, max_tokens: int | None = None) -> GenerationParams:
    """Short answers unless chain-of-thought; the pairwise answer is a few tokens."""
    default = {"point": 48, "pair": 16, "list": 64, "profile": 200}[task]
    if cot and task != "profile":
        default = 384
    return GenerationParams(max_tokens=max_tokens or default, temperature=temperature, seed=seed)
