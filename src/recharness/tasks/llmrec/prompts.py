"""LLMRec prompts: task description + behaviour injection + format indicator.

Each part can be switched off for ablation, as in the LLMRec paper
(arXiv 2308.12241, Sec. 3): without the behaviour injection the model sees
no history; without the format indicator it answers in its own words and
the parser has to cope.
"""

from __future__ import annotations

from dataclasses import dataclass

from recharness.tasks.wording import DOMAIN_NOUNS, domain_of, wording_domain  # noqa: F401 - re-exported


@dataclass(frozen=True)
class PromptParts:
    """Which of the three modules a prompt includes (all on by default)."""

    task_description: bool = True
    behaviour: bool = True
    format_indicator: bool = True

    def to_dict(self) -> dict:
        return {"task_description": self.task_description, "behaviour": self.behaviour, "format_indicator": self.format_indicator}


def format_history(history: list[dict], with_ratings: bool = True) -> str:
    lines = []
    for i, h in enumerate(history, 1):
        r = h.get("rating")
        suffix = f" (rated {r:g}/5)" if with_ratings and r is not None else ""
        lines.append(f"{i}. {h['title']}{suffix}")
    return "\n".join(lines)


def compose(parts: PromptParts, description: str, behaviour: str, fmt: str, work: str | None = None) -> list[dict]:
    """The prompt from the parts switched on; `work` (what the task acts on: the candidates to rank) follows
    the description and is always there: switching a part off removes an instruction, never the task's input."""
    chunks = []
    if parts.task_description:
        chunks.append(description)
    if work:
        chunks.append(work)
    if parts.behaviour and behaviour:
        chunks.append(behaviour)
    if parts.format_indicator:
        chunks.append(fmt)
    return [{"role": "user", "content": "\n\n".join(chunks)}]


def sequential_prompt(domain: str, history: list[dict], n: int, parts: PromptParts) -> list[dict]:
    one, many, verb = DOMAIN_NOUNS[domain]
    return compose(
        parts,
        f"You are a {one} recommender system. Given a user's {verb} history in chronological order, "
        f"recommend the {n} {many} the user is most likely to choose next.",
        f"The user has {verb} these {many}, oldest first:\n{format_history(history)}",
        f"Answer with a numbered list of exactly {n} {one} titles"
        + (" with their release year" if domain == "movie" else "")
        + ", one per line, most likely first, and nothing else. Do not repeat titles from the history.",
    )


def direct_prompt(domain: str, history: list[dict], candidates: list[dict], parts: PromptParts) -> list[dict]:
    one, many, verb = DOMAIN_NOUNS[domain]
    cand = "\n".join(f"[{i}] {c['title']}" for i, c in enumerate(candidates, 1))
    return compose(
        parts,
        f"You are a {one} recommender system. Rank the candidate {many} below by how likely the user "
        f"is to choose each one next.",
        f"The user has {verb} these {many}, oldest first:\n{format_history(history)}",
        f"Answer with the candidate numbers only, in ranked order, most likely first, separated by commas "
        f"(for example: 3, 1, 2). Include all {len(candidates)} candidates.",
        work=f"Candidates:\n{cand}",
    )
