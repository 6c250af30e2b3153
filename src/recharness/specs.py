"""Every model spec `recharness run -m` takes, resolved against the run directory it answers.

  baseline:NAME   a reference recommender: the model `train` saved in the run, or fitted on its training data
  ft:DIR          a `recharness finetune` model: text items as `hf:DIR`; id / sid items answered by the
                  suite's recipe (identifier prompts, P(Yes) or constrained beam search over the catalog)
  anything else   `models.registry.resolve_model` (built-in GGUF, llamacpp:, openai:, hf:, fake)
"""

from __future__ import annotations

from pathlib import Path

from recharness.models.base import ModelBackend


def resolve_spec(spec: str, run_dir: Path, **opts) -> ModelBackend:
    kind, _, rest = spec.partition(":")
    if kind == "baseline" and rest:
        from recharness.runner.reference_backend import ReferenceBackend

        return ReferenceBackend(rest, run_dir)
    if kind == "ft" and rest:
        from recharness.finetune.backend import finetuned_backend

        return finetuned_backend(Path(rest), beams=opts.get("beams") or 20, sample_cap=opts.get("sample_cap"))
    from recharness.models.registry import resolve_model

    return resolve_model(spec, **{k: v for k, v in opts.items() if k not in ("beams", "sample_cap")})


def default_name(spec: str) -> str:
    """The predictions file's name for `spec` when no --name is given."""
    kind, _, rest = spec.partition(":")
    if kind == "ft" and rest:
        return Path(rest).name
    from recharness.models.builtin import builtin_name
    from recharness.models.registry import slug

    return slug(builtin_name(spec) or spec)  # an old alias (one deprecation line) is named as the model it names
