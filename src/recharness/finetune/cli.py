"""The `recharness finetune` command. cli.py registers it with one line: `register(app)`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    app.command(name="finetune")(finetune_command)


def finetune_command(
    suite: Annotated[str, typer.Argument(help="Suite name (recbench).")],
    task: Annotated[str, typer.Option("--task", "-t", help="Task to fine-tune for: ctr (text items) or seqrec (id / sid items).")] = "ctr",
    dataset: Annotated[str, typer.Option("--dataset", "-d", help="A prepared dataset name (see `recharness prepare`).")] = "ml-1m",
    model: Annotated[str, typer.Option("--model", "-m", help="Starting weights: a built-in model (smollm2-135m, qwen2.5-0.5b) loaded from its GGUF, or a local GGUF / transformers directory.")] = "smollm2-135m",
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Run directory holding the build (default: <data home>/runs/SUITE/DATASET).")] = None,
    save: Annotated[Path | None, typer.Option("--save", help="Where the merged model goes (default: <run>/finetuned/<model>-<task>-<items>).")] = None,
    items: Annotated[str | None, typer.Option("--items", help="Item representation: text (ctr), id or sid (seqrec; default id).")] = None,
    rank: Annotated[int | None, typer.Option("--rank", min=1, help="LoRA rank (default: the paper's, 32 for ctr, 128 for seqrec).")] = None,
    alpha: Annotated[int | None, typer.Option("--alpha", min=1, help="LoRA alpha (default: 128, the paper's).")] = None,
    lr: Annotated[float, typer.Option("--lr", min=0.0, help="Learning rate (paper: 1e-4; on 135M parameters 1e-3 learns faster, see benchmarks/results/finetune.md).")] = 1e-4,
    epochs: Annotated[int, typer.Option("--epochs", min=1, help="Passes over the training examples.")] = 1,
    max_steps: Annotated[int | None, typer.Option("--max-steps", min=1, help="Optimizer steps to take; overrides --epochs.")] = None,
    batch: Annotated[int, typer.Option("--batch", min=1, help="Examples per optimizer step (gradient accumulation; paper: 64).")] = 64,
    micro_batch: Annotated[int, typer.Option("--micro-batch", min=1, help="Examples per forward pass (memory).")] = 8,
    examples: Annotated[int | None, typer.Option("--examples", min=1, help="Use a seeded sample of N training examples (default: all of the build's training split).")] = None,
    checkpoint_every: Annotated[int, typer.Option("--checkpoint-every", min=1, help="Steps between checkpoints (a killed run resumes from the last).")] = 25,
    seed: Annotated[int, typer.Option("--seed", help="Fixes the example sample, data order, LoRA init and dropout.")] = 0,
    evaluate: Annotated[bool, typer.Option("--evaluate/--no-evaluate", help="seqrec: answer the test samples by CBS afterwards (predictions/<name>.jsonl).")] = True,
    beams: Annotated[int, typer.Option("--beams", min=1, help="seqrec: beams of the conditional beam search.")] = 20,
):
    """Fine-tune a local model with LoRA on the build's training split (never its test samples); resumable."""
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from recharness.finetune.api import finetune, predict_seqrec
    from recharness.runner.pipeline import default_run_dir

    console = Console(stderr=True, soft_wrap=True)
    run_dir = out if out is not None else default_run_dir(suite, dataset)
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("loss {task.fields[loss]}"), TextColumn("{task.fields[tps]} tok/s"),
                        TimeElapsedColumn(), TimeRemainingColumn(), console=console)
    with progress:
        bar = progress.add_task(f"finetune {escape(model)}", total=None, loss="–", tps="–")

        def on_step(i: dict) -> None:
            progress.update(bar, completed=i["step"], total=i["total"], loss=f"{i['loss']:.4f}",
                            tps=f"{i['tokens_per_s']:.0f}")

        res = finetune(suite, task, run_dir, model, save, items=items, rank=rank, alpha=alpha, lr=lr, epochs=epochs,
                       max_steps=max_steps, batch=batch, micro_batch=micro_batch, examples=examples, seed=seed,
                       checkpoint_every=checkpoint_every, on_step=on_step,
                       on_status=lambda m: progress.update(bar, description=escape(m)))
    print(res.summary())
    name = res.out.name
    if task == "seqrec" and evaluate:
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=console) as prog:
            b = prog.add_task(f"CBS ({beams} beams)", total=None)
            path = predict_seqrec(run_dir, res.out, name, beams=beams, on_progress=lambda n: prog.advance(b, n))
        print(f"predictions → {path}; score with: recharness score {suite} -d {dataset} -o {run_dir}")
    elif task == "ctr":
        print(f"next: recharness run {suite} -d {dataset} -o {run_dir} -m hf:{res.out} --name {name}")
