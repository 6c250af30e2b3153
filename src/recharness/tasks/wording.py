"""How prompts name a dataset's items: the nouns and verb per domain, shared by every suite's prompts."""

from __future__ import annotations

from recharness.data.store import dataset_domain

# LLMRec's wording per dataset domain (recharness.data.store decides the domain); a domain
# without an entry here is worded as products.
DOMAIN_NOUNS = {"movie": ("movie", "movies", "watched"), "game": ("video game", "video games", "played"),
                "product": ("product", "products", "bought")}


def wording_domain(domain: str) -> str:
    """The DOMAIN_NOUNS key LLMRec prompts use for a dataset's `domain`."""
    return domain if domain in DOMAIN_NOUNS else "product"


def domain_of(dataset, meta: dict | None = None) -> str:
    """LLMRec's wording key for a dataset: `wording_domain(dataset.domain)`. Also takes the
    dataset's name and meta dict (the older call form)."""
    domain = dataset_domain(dataset, meta) if isinstance(dataset, str) else dataset.domain
    return wording_domain(domain)
