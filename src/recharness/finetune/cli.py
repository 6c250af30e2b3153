"""The `recharness finetune` and `recharness merge` commands. cli.py registers them with one line:
`register(app)`.

    recharness finetune perrecbench -t pointwise -d ml-1m -o RUN     # also pairwise, listwise, joint
    recharness merge RUN/finetuned/smollm2-135m-{pointwise,pairwise,listwise} --method linear -o RUN/finetuned/merged
    recharness run perrecbench -o RUN -m hf:RUN/finetuned/merged --name merged
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    app.command(name="finetune")(finetune_command)
    app.command(name="merge")(merge_command)


def finetune_command(
    suite: Annotated[str, typer.Argument(help="Suite name (recbench or perrecbench).")],
    task: Annotated[str | None, typer.Option("--task", "-t", help="Task to fine-tune for. recbench: ctr (text items, the default) or seqrec (id / sid items); perrecbench: pointwise, pairwise, listwise (single-task) or joint (the three mixed; the default).")] = None,
    dataset: Annotated[str, typer.Option("--dataset", "-d", help="A prepared dataset name (see `recharness prepare`).")] = "ml-1m",
    model: Annotated[str, typer.Option("--model", "-m", help="Starting weights: a built-in model (smollm2-135m, qwen2.5-coder-0.5b-instruct) loaded from its GGUF, or a local GGUF / transformers directory.")] = "smollm2-135m",
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Run directory holding the build (default: <data home>/runs/SUITE/DATASET).")] = None,
    save: Annotated[Path | None, typer.Option("--save", help="Where the merged model goes (default: <run>/finetuned/<model>-<task>-<items>).")] = None,
    items: Annotated[str | None, typer.Option("--items", help="Item representation: ctr text (default; RecBench Group E), id or sid (Groups D/F); seqrec id (default; Group I) or sid (Group J).")] = None,
    sid_method: Annotated[str, typer.Option("--sid-method", help="sid items: how the semantic IDs are made, rqvae (default: the paper's TIGER RQ-VAE, the codes SID-SASRec reads) or rqkmeans (residual k-means, faster to fit).")] = "rqvae",
    rank: Annotated[int | None, typer.Option("--rank", min=1, help="LoRA rank (default: the paper's, 32 for ctr, 128 for seqrec, 16 for perrecbench).")] = None,
    alpha: Annotated[int | None, typer.Option("--alpha", min=1, help="LoRA alpha (default: recbench 128, the paper's; perrecbench 32, twice the rank, the paper gives none).")] = None,
    lr: Annotated[float | None, typer.Option("--lr", min=0.0, help="Learning rate (default: the paper's, recbench 1e-4, perrecbench 1e-5; on 135M parameters 1e-3 learns faster, see benchmarks/results/finetune.md).")] = None,
    epochs: Annotated[int | None, typer.Option("--epochs", min=1, help="Passes over the training examples (default: recbench 1, perrecbench 2, the papers').")] = None,
    max_steps: Annotated[int | None, typer.Option("--max-steps", min=1, help="Optimizer steps to take; overrides --epochs.")] = None,
    batch: Annotated[int | None, typer.Option("--batch", min=1, help="Examples per optimizer step (gradient accumulation; default: the paper's, recbench 64, perrecbench 32).")] = None,
    micro_batch: Annotated[int | None, typer.Option("--micro-batch", min=1, help="Examples per forward pass: memory grows with it (default: recbench 8, perrecbench 1, whose prompts are long).")] = None,
    examples: Annotated[int | None, typer.Option("--examples", min=1, help="Use a seeded sample of N training examples (default: all of the build's training split).")] = None,
    train_groups: Annotated[int | None, typer.Option("--train-groups", min=1, help="perrecbench: training groups per level, disjoint (users and query items) from the build's groups (default 200).")] = None,
    max_len: Annotated[int | None, typer.Option("--max-len", min=16, help="Longest example in tokens; longer ones are skipped (default: recbench 1024, perrecbench 2048).")] = None,
    checkpoint_every: Annotated[int, typer.Option("--checkpoint-every", min=1, help="Steps between checkpoints (a killed run resumes from the last).")] = 25,
    seed: Annotated[int, typer.Option("--seed", help="Fixes the example sample, data order, LoRA init and dropout.")] = 0,
    evaluate: Annotated[bool, typer.Option("--evaluate/--no-evaluate", help="id/sid models: answer the build's test samples afterwards (seqrec by CBS, ctr by P(Yes)) into predictions/<name>.jsonl; text models are run with `recharness run -m hf:DIR`.")] = True,
    beams: Annotated[int, typer.Option("--beams", min=1, help="seqrec: beams of the conditional beam search.")] = 20,
    eval_limit: Annotated[int | None, typer.Option("--eval-limit", min=1, help="id/sid models: answer only the build's first N test samples (CBS takes seconds per sample on a CPU).")] = None,
):
    """Fine-tune a local model with LoRA on the build's training split (never its test samples); resumable."""
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import TextColumn

    from recharness.core.progress import stage_progress
    from recharness.core.rundir import train_log_file
    from recharness.finetune.api import default_out, finetune, recipe
    from recharness.finetune.lora import epoch_line
    from recharness.runner.pipeline import default_run_dir

    console = Console(stderr=True, soft_wrap=True)
    run_dir = out if out is not None else default_run_dir(suite, dataset)
    r = recipe(suite, task)
    task = r.task
    progress = stage_progress(console, TextColumn("loss {task.fields[loss]}"), TextColumn("{task.fields[tps]} tok/s"))
    with progress:
        bar = progress.add_task(f"finetune {escape(model)}", total=None, loss="–", tps="–")

        def on_step(i: dict) -> None:
            progress.update(bar, completed=i["step"], total=i["total"], loss=f"{i['loss']:.4f}",
                            tps=f"{i['tokens_per_s']:.0f}")

        label = (Path(save) if save is not None else default_out(run_dir, model, r, items or r.items[0])).name

        def on_epoch(row: dict) -> None:  # one line per epoch, above the bar (as `recharness train` prints)
            progress.console.print(epoch_line(label, row), markup=False, highlight=False)

        res = finetune(suite, task, run_dir, model, save, items=items, rank=rank, alpha=alpha, lr=lr, epochs=epochs,
                       max_steps=max_steps, batch=batch, micro_batch=micro_batch, examples=examples, seed=seed,
                       checkpoint_every=checkpoint_every, train_groups=train_groups, max_len=max_len, sid_method=sid_method,
                       on_step=on_step,
                       on_status=lambda m: progress.update(bar, description=escape(m)), on_epoch=on_epoch)
    console.print(f"{res.out.name}: stopped: {res.stopped}; training log (epoch, step, loss, seconds) → "
                  f"{train_log_file(res.out)}", markup=False, highlight=False)
    print(res.summary())
    for note in res.notes:
        console.print(f"[yellow]note:[/] {escape(note)}")
    name = res.out.name
    if res.items in ("id", "sid") and evaluate and r.answerer is not None:
        from recharness.finetune.api import answer_build

        with stage_progress(console) as prog:
            b = prog.add_task(f"answering the {task} samples", total=None)
            path = answer_build(run_dir, res.out, name, beams=beams, limit=eval_limit,
                                on_progress=lambda n: prog.advance(b, n))
        print(f"predictions → {path} (the same as `recharness run {suite} -o {run_dir} -m ft:{res.out} --name {name}`); "
              f"score with: recharness score {suite} -d {dataset} -o {run_dir}")
    elif res.items == "text":
        print(f"next: recharness run {suite} -d {dataset} -o {run_dir} -m ft:{res.out} --name {name}")
        print(f"then: recharness score {suite} -d {dataset} -o {run_dir}   (one row per --name, beside the "
              "zero-shot runs of the same build)")


def merge_command(
    models: Annotated[list[Path], typer.Argument(help="Fine-tuned model directories (hf:DIR, made by `recharness finetune` of one base model), e.g. the pointwise, pairwise and listwise ones.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Where the merged hf:DIR model goes (replaced atomically).")],
    method: Annotated[str, typer.Option("--method", help="linear: base + sum of w_i * delta_i (PerRecBench's average of the weights); ties: trim each delta to its top --density by magnitude, elect signs, disjoint mean.")] = "linear",
    weights: Annotated[str | None, typer.Option("--weights", help="One weight per model, comma-separated (default: 1/N each for linear, the paper's; 1 each for ties).")] = None,
    density: Annotated[float, typer.Option("--density", min=0.0, max=1.0, help="ties: fraction of each delta's entries kept (largest magnitudes).")] = 0.5,
    majority_sign: Annotated[str, typer.Option("--majority-sign", help="ties: elect each entry's sign by the sum of the deltas (total) or by count (frequency).")] = "total",
    base: Annotated[str | None, typer.Option("--base", help="Base model (default: the one the models' finetune.json name).")] = None,
):
    """Merge fine-tunes of one base model into one hf:DIR model: linear (weighted average of the deltas) or TIES."""
    from rich.console import Console
    from rich.markup import escape

    from recharness.core.errors import ConfigError
    from recharness.finetune.merge import merge

    console = Console(stderr=True, soft_wrap=True)
    w = None
    if weights is not None:
        try:
            w = [float(x) for x in weights.split(",") if x.strip()]
        except ValueError:
            raise ConfigError(f"--weights {weights!r}: give numbers separated by commas") from None
    with console.status("merging…") as st:
        path = merge(models, out, method=method, weights=w, density=density, majority_sign=majority_sign, base=base,
                     on_status=lambda m: st.update(escape(m)))
    from recharness.finetune.export import read_info

    info = read_info(path) or {}
    runs = {json.dumps((read_info(Path(str(m).removeprefix("hf:"))) or {}).get("run_dir")) for m in models}
    run = json.loads(runs.pop()) if len(runs) == 1 else None
    print(f"merged {len(models)} models ({method}) → {path}")
    print(f"next: recharness run {info.get('suite') or 'SUITE'} -o {run or 'RUN'} -m hf:{path} --name {path.name}")
