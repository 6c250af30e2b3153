"""Model specs on the command line → backends.

  smollm2-135m | qwen2.5-0.5b | qwen2.5-1.5b   built-in GGUF, in process
  llamacpp:/path/model.gguf                    any GGUF, in process
  openai:MODEL[@BASE_URL]                      any OpenAI-compatible server
  hf:MODEL_ID_OR_PATH                          transformers (optional extra)
"""

from __future__ import annotations

import re

from recharness.errors import ConfigError
from recharness.models.base import ModelBackend
from recharness.models.builtin import BUILTIN_MODELS, fetch_model

DEFAULT_MODEL = "qwen2.5-0.5b"
TEST_MODEL = "smollm2-135m"


def slug(spec: str) -> str:
    """A file-name-safe name for a model spec (used for prediction files)."""
    spec = re.sub(r"^openai:", "openai-", spec.split("@")[0])
    return re.sub(r"[^A-Za-z0-9._-]+", "_", spec).strip("_")[:100]


def public_spec(spec: str) -> str:
    """A model spec as it may be shown: credentials in an `@URL` part hidden."""
    from recharness.models.openai_compat import redact_url

    kind, sep, url = spec.partition("@")
    return kind + sep + redact_url(url) if sep else spec


def resolve_model(
    spec: str,
    *,
    base_url: str | None = None,
    api_key_env: str = "OPENAI_API_KEY",
    concurrency: int | None = None,
    n_ctx: int | None = None,
    timeout_s: float | None = None,
    max_attempts: int | None = None,
) -> ModelBackend:
    """`timeout_s` and `max_attempts` apply to remote (OpenAI-compatible) backends."""
    if spec in BUILTIN_MODELS:
        from recharness.models.llamacpp import LlamaCppBackend

        m = BUILTIN_MODELS[spec]
        return LlamaCppBackend(fetch_model(spec), name=spec, n_ctx=n_ctx or m.n_ctx)
    kind, _, rest = spec.partition(":")
    if not rest:
        raise ConfigError(
            f"unknown model {spec!r}: use a built-in ({', '.join(BUILTIN_MODELS)}), "
            "llamacpp:PATH.gguf, openai:MODEL[@BASE_URL] or hf:MODEL"
        )
    if kind == "llamacpp":
        from recharness.models.llamacpp import LlamaCppBackend

        return LlamaCppBackend(rest, n_ctx=n_ctx or 4096)
    if kind == "openai":
        from recharness.models.openai_compat import OpenAICompatibleBackend

        model, _, url = rest.partition("@")
        transport = {k: v for k, v in (("timeout_s", timeout_s), ("max_attempts", max_attempts)) if v is not None}
        return OpenAICompatibleBackend(model, base_url=url or base_url, api_key_env=api_key_env,
                                       max_concurrency=concurrency or 8, **transport)
    if kind == "hf":
        from recharness.models.hf import HFBackend

        return HFBackend(rest)
    raise ConfigError(f"unknown model backend {kind!r} in {spec!r}")
