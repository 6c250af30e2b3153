"""Model specs on the command line → backends.

  smollm2-135m | qwen2.5-coder-0.5b-instruct | qwen2.5-coder-1.5b-instruct   built-in GGUF, in process
  llamacpp:/path/model.gguf                    any GGUF, in process
  openai:MODEL[@BASE_URL]                      any OpenAI-compatible server (several: base_url=[...])
  hf:MODEL_ID_OR_PATH                          transformers (optional extra)
  fake[:NAME]                                  a scripted model for tests (no weights)

A backend is one `BACKENDS` entry: its class (lazy) and a small factory that
maps the rest of the spec and resolve_model's options onto its constructor.
"""

from __future__ import annotations

import re
from pathlib import Path

from recharness.core.errors import ConfigError
from recharness.core.registry import Registry, did_you_mean
from recharness.models.base import ModelBackend
from recharness.models.builtin import BUILTIN_MODELS, builtin_name, fetch_model

DEFAULT_MODEL = "qwen2.5-coder-0.5b-instruct"
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


def _llamacpp(cls, rest: str, *, n_ctx: int | None = None, **_) -> ModelBackend:
    return cls(rest, n_ctx=n_ctx or 4096)


def base_urls(base_url: str | list[str] | tuple[str, ...] | None) -> list[str]:
    """`--base-url` values → endpoint URLs: each value a URL or a text file of URLs (one a line, `#` comments);
    duplicates dropped, order kept."""
    values = [base_url] if isinstance(base_url, str) else list(base_url or [])
    urls: list[str] = []
    for v in values:
        v = v.strip()
        if not v:
            raise ConfigError("--base-url is empty: give the server's URL (http://HOST:PORT/v1) or a file of URLs")
        if "://" in v:
            urls.append(v)
            continue
        path = Path(v).expanduser()
        if not path.is_file():
            raise ConfigError(f"--base-url {v!r} is neither a URL (http://HOST:PORT/v1) nor a file of URLs")
        found = []
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as e:
            raise ConfigError(f"--base-url {v!r}: the file is not UTF-8 text (byte {e.start}): a file of URLs, one a "
                              "line") from None
        for n, line in enumerate(text.splitlines(), 1):
            line = re.sub(r"(^|\s)#.*$", "", line).strip()
            if not line:
                continue
            if "://" not in line:
                raise ConfigError(f"{path}, line {n}: not a URL (http://HOST:PORT/v1)")
            found.append(line)
        if not found:
            raise ConfigError(f"--base-url {v!r}: the file lists no URLs")
        urls.extend(found)
    return list(dict.fromkeys(urls))


def _openai(cls, rest: str, *, base_url: str | list[str] | None = None, api_key_env: str = "OPENAI_API_KEY",
            concurrency: int | None = None, timeout_s: float | None = None, max_attempts: int | None = None,
            **_) -> ModelBackend:
    model, _, url = rest.partition("@")
    if url and base_url:
        from recharness.models.openai_compat import redact_url

        given = [base_url] if isinstance(base_url, str) else list(base_url)
        raise ConfigError(f"openai:{model}@{redact_url(url)} names its server, and --base-url "
                          f"{', '.join(redact_url(u) for u in given)} names another: give one of them")
    transport = {k: v for k, v in (("timeout_s", timeout_s), ("max_attempts", max_attempts)) if v is not None}
    urls = [url] if url else base_urls(base_url)
    if len(urls) > 1:  # several endpoints serving one model: least-loaded with failover
        from recharness.models.endpoint_pool import EndpointPool

        return EndpointPool(model, urls, api_key_env=api_key_env, max_concurrency=concurrency, **transport)
    return cls(model, base_url=urls[0] if urls else None, api_key_env=api_key_env, max_concurrency=concurrency or 8,
               **transport)


def _hf(cls, rest: str, **_) -> ModelBackend:
    return cls(rest)


def _fake(cls, rest: str, **_) -> ModelBackend:
    return cls(rest or "fake")


#: spec prefix -> backend class (lazy, so listing never imports llama.cpp or torch); meta: `factory(cls, rest,
#: **resolve_model kwargs)` maps the spec and options onto that class's constructor, `usage` is the spec syntax,
#: `needs_rest` whether anything must follow the colon
BACKENDS: Registry[type[ModelBackend]] = Registry("model backend")
BACKENDS.add("llamacpp", "recharness.models.llamacpp:LlamaCppBackend", factory=_llamacpp, usage="llamacpp:PATH.gguf")
BACKENDS.add("openai", "recharness.models.openai_compat:OpenAICompatibleBackend", factory=_openai,
             usage="openai:MODEL[@BASE_URL]")
BACKENDS.add("hf", "recharness.models.hf:HFBackend", factory=_hf, usage="hf:MODEL")
BACKENDS.add("fake", "recharness.models.fake:FakeBackend", factory=_fake, usage="fake[:NAME]", needs_rest=False)


def _usage() -> str:
    return ", ".join(BACKENDS.meta(k)["usage"] for k in BACKENDS)


def resolve_model(
    spec: str,
    *,
    base_url: str | list[str] | None = None,
    api_key_env: str = "OPENAI_API_KEY",
    concurrency: int | None = None,
    n_ctx: int | None = None,
    timeout_s: float | None = None,
    max_attempts: int | None = None,
) -> ModelBackend:
    """`timeout_s` and `max_attempts` apply to remote (OpenAI-compatible) backends. `base_url` may be a list
    of URLs and/or files of URLs (see `base_urls`): more than one gives an `EndpointPool` over them."""
    name = builtin_name(spec)
    if name is not None:
        from recharness.models.llamacpp import LlamaCppBackend

        m = BUILTIN_MODELS[name]
        return LlamaCppBackend(fetch_model(name), name=name, n_ctx=n_ctx or m.n_ctx, sha256=m.sha256)
    check_model_spec(spec)
    kind, _, rest = spec.partition(":")
    return BACKENDS.meta(kind)["factory"](
        BACKENDS.get(kind), rest, base_url=base_url, api_key_env=api_key_env, concurrency=concurrency,
        n_ctx=n_ctx, timeout_s=timeout_s, max_attempts=max_attempts)


def check_model_spec(spec: str) -> None:
    """The ConfigError `resolve_model` gives a spec it cannot name (a typo, an unknown backend), without building
    anything: what a caller that resolves the model elsewhere (each Ray worker) checks first."""
    if builtin_name(spec) is not None:
        return
    kind, colon, rest = spec.partition(":")
    if kind in BACKENDS and (rest or not BACKENDS.meta(kind).get("needs_rest", True)):
        return
    if colon and kind not in BACKENDS:
        raise ConfigError(f"{BACKENDS.unknown(kind)} (in model spec {public_spec(spec)!r})")
    shown = public_spec(spec)
    raise ConfigError(f"unknown model {shown!r}{did_you_mean(shown, BUILTIN_MODELS)}: use a built-in "
                      f"({', '.join(BUILTIN_MODELS)}) or {_usage()}")
