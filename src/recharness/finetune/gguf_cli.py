"""The `recharness export-gguf` command. cli.py registers it with one line: `register(app)`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    app.command(name="export-gguf")(export_gguf_command)


def export_gguf_command(
    model_dir: Annotated[Path, typer.Argument(help="A model directory written by `recharness finetune` (config.json, model.safetensors, tokenizer, finetune.json).")],
    out: Annotated[Path | None, typer.Option("--out", "-o", help="The GGUF file to write (default: <MODEL_DIR>-<quant>.gguf beside the directory); <out>.json gets the fine-tune's details.")] = None,
    quant: Annotated[str, typer.Option("--quant", "-q", help="f16 (default: scores like hf:DIR), q8_0 (half the size, P(Yes) moves a little) or q4_k_m (smallest; moves P(Yes) most, see benchmarks/results/finetune.md).")] = "f16",
    threads: Annotated[int | None, typer.Option("--threads", min=1, help="Threads for quantising (default: all cores).")] = None,
):
    """Write a fine-tuned model as one GGUF file for the llama.cpp backend (`run -m llamacpp:OUT.gguf`)."""
    import time

    from rich.console import Console
    from rich.markup import escape

    from recharness.finetune.gguf import export_gguf

    console = Console(stderr=True, soft_wrap=True)
    t0 = time.perf_counter()
    with console.status(f"converting {escape(str(model_dir))} to GGUF ({escape(quant)})…"):
        path = export_gguf(model_dir, out, quant, threads=threads)
    size = path.stat().st_size / 1e6
    print(f"{path} ({size:.0f} MB, {quant}) in {time.perf_counter() - t0:.1f} s; details in {path.name}.json")
    print(f"next: recharness run SUITE -d DATASET -o RUN -m llamacpp:{path} --name {path.stem}")
