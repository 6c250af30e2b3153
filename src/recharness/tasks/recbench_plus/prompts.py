"""Test prompts, verbatim from RecBench+ Appendix G (and Appendix F for a fixed K).

The paper gives the system instruction only; how the history and the query
are laid out after it is ours (a numbered list, then the query).
"""

from __future__ import annotations

from recharness.tasks.recbench_plus.context import DOMAINS

# what the user's history is called, per domain (Appendix G: "watched movies (/reading history)")
_HISTORY = {"movie": "watched movies", "book": "reading history", "product": "purchase history"}


def system_prompt(domain: str, with_history: bool, k: int | None = None) -> str:
    one, plural = DOMAINS[domain]
    out = f"Please output {k} recommended {plural} directly" if k else f"Please output the recommended {plural} directly"
    if with_history:
        return (f"You are a {one} recommender system. You are given a user's {_HISTORY[domain]} and a query from the "
                f"user. You need to recommend {plural} that satisfy the user's query and user preferences. "
                f"{out}; do not output other content.")
    return (f"You are a {one} recommender system. You are given a query from the user. You need to recommend "
            f"{plural} that satisfy the user's query. {out}; do not output other content.")


def test_messages(domain: str, query: str, history_titles: list[str] | None, k: int | None = None) -> list[dict]:
    """Chat messages for one query; `history_titles` None means the w/o-history prompt."""
    with_history = history_titles is not None
    parts = []
    if with_history:
        label = _HISTORY[domain].capitalize()
        lines = "\n".join(f"{i}. {t}" for i, t in enumerate(history_titles, 1)) or "(none)"
        parts.append(f"User's {label.lower()}:\n{lines}")
    parts.append(f"Query: {query}")
    return [
        {"role": "system", "content": system_prompt(domain, with_history, k)},
        {"role": "user", "content": "\n\n".join(parts)},
    ]
