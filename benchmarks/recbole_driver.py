"""RecBole 1.2.1 SASRec on a prepared atomic .inter file: the RecBole side of bench_recbole.py.

Runs in its own venv (.venv-recbole: RecBole 1.2.1 needs numpy<2, pandas<3, setuptools<81) and
imports nothing from the recharness package: only `recharness/metrics/full_ranking.py` (numpy only) is
loaded by its path, so that NDCG@10 is read from a rank by the same function on both sides. Usage
(bench_recbole.py writes the spec and starts it with TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 and
OMP_NUM_THREADS set):

    .venv-recbole/bin/python benchmarks/recbole_driver.py SPEC.json

SPEC: {"data_path", "dataset", "work", "result", "seed", "threads", "epochs", "curve_every",
"dropout", "hidden", "layers", "heads", "inner", "max_len", "batch_size", "lr"}, optionally
"patience" (stop as RecBole's `early_stopping` with `stopping_step` = patience, its default 10:
after more than `patience` epochs in a row without a validation NDCG@10 at least as good as the
best; absent or null: run all `epochs`) and anything else that identifies the run (bench_recbole.py
adds the data's sha256, so a checkpoint of other data is never resumed).

Resumable, for runs longer than a sitting (one epoch on ML-1M is half an hour on 2 cores): after
each epoch, and every `checkpoint_every` training seconds within one (default 300), the weights, the
optimizer, the RNG states (torch's, the training loader's shuffling generator, numpy's, Python's) and
the record so far are written to `<work>/checkpoint-epochE[-batchB].pt` (tensors only, read back with
`weights_only=True`) and `<work>/checkpoint.json` (the rest, naming that file): the JSON's atomic
rename is the commit point, the previous tensors are removed after it. Within an epoch the checkpoint
is taken between batches, and keeps the loader's generator as it was when the epoch began: resumed,
the epoch draws the same shuffled order, skips (collates but does not train) the batches already
trained, and goes on with the same dropout draws, so a run interrupted any number of times trains
exactly what an uninterrupted run trains. While the pause file exists ($RECHARNESS_BENCH_PAUSE_FILE,
which bench_recbole.py sets to its own `<work>/PAUSE`; else `<work>/PAUSE`) the run waits between
batches, off the training clock (each epoch records its `paused_s`): a quiet machine for a benchmark
without losing the epoch.
Started again with the same settings (the spec but "epochs", "patience",
"result", "checkpoint_every" and the paths) it carries on from the last checkpoint: what a killed sitting trained
after it is trained again, and those training seconds are not counted twice. Other settings: it
refuses to resume.

Training is RecBole's own `Trainer._train_epoch` (the loop `Trainer.fit` runs), with a loss
function that wraps `model.calculate_loss` to count samples and, every `curve_every` training
seconds, evaluate the test split (RecBole's `Trainer.evaluate`, full sort) on the current weights;
the test split is also evaluated after each epoch. Evaluation time is kept out of the training
seconds. After each epoch the validation split is evaluated too (RecBole's `Trainer.evaluate`, as
`fit` does), for `patience` and for the record; nothing else is selected on it: the curve is the
test split on the weights as they are.

Per-user ranks, for intervals over test users in bench_recbole.py: at each end-of-epoch test evaluation
each test user's target rank is also taken with RecBole's own scoring (`Trainer._full_sort_batch_eval`
on each batch of the test loader: `full_sort_predict`, the padding item at -inf, nothing else excluded)
as 1 + the items scored strictly higher, keyed by user token; their mean NDCG@10 is checked against
RecBole's reported ndcg@10 (which RecBole rounds to 4 decimals: to 1e-4, a warning if not — ties could
differ). The ranks of the last epoch and of the epoch with the best validation NDCG@10 so far are kept in
the checkpoint record (so the commit point covers them) and written to `<work>/ranks-last.json` and
`<work>/ranks-best.json` (atomically, before the commit point, and again from the record when a run
resumes, so a file of an epoch killed before its commit does not survive). A run resumed from a
checkpoint written before ranks were kept has no ranks of the epochs before it.

Writes RESULT (JSON): settings, setup seconds, per-epoch training seconds and samples, the curve
[(train_s, samples, epoch, ndcg@10, hit@10)], peak RSS (VmHWM, read before the split fingerprints
are computed) and fingerprints (sha256) of the test/valid rows and of the training (user, target)
pairs, for bench_recbole.py to check that both frameworks saw the same split; and "ranks": {"best",
"last"}, each null or {epoch, train_s, "ndcg@10" (RecBole's), "ndcg@10_from_ranks", ranks: {user token:
rank}}.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sys
import time
from pathlib import Path

from machine import cpu_model  # the CPU each epoch trained on (benchmarks/machine.py: stdlib only)

#: spec keys that may change between a run and its resumption: the caps, where results go, and the paths (a
#: run carried to another machine or checkout by bench_recbole.py --save-state/--restore-state; the data
#: itself is pinned by the spec's "data_sha256")
RESUMABLE = ("epochs", "patience", "result", "checkpoint_every", "work", "data_path")
#: names the pause file (bench_recbole.py's PAUSE_ENV: both sides of one run pause on one file)
PAUSE_ENV = "RECHARNESS_BENCH_PAUSE_FILE"


class SkipFirst:
    """The training loader with its first `skip` batches drawn (collated) but not yielded: a resumed epoch
    trains the batches its interrupted sitting had not, in the same shuffled order (the loader's generator
    is set back to the epoch's start first). `on_skipped(seconds)` is told how long the skipping took, to
    keep it off the training clock. Anything else is the loader's."""

    def __init__(self, loader, skip: int, on_skipped) -> None:
        self.loader, self.skip, self.on_skipped = loader, skip, on_skipped

    def __iter__(self):
        t = time.perf_counter()
        batches = iter(self.loader)
        for _ in range(self.skip):
            next(batches)
        self.on_skipped(time.perf_counter() - t)
        yield from batches

    def __len__(self) -> int:
        return len(self.loader)

    def __getattr__(self, name):
        return getattr(self.loader, name)


def vm_hwm_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def digest(lines: list[str]) -> str:
    return hashlib.sha256("\n".join(sorted(lines)).encode()).hexdigest()


def fingerprints(train_ds, valid_ds, test_ds) -> dict:
    """sha256 of the sorted rows "user<TAB>history (space-separated)<TAB>target" of valid and test,
    and of the sorted "user<TAB>target" training pairs, in the original tokens."""
    uid, iid = train_ds.uid_field, train_ds.iid_field
    users, items = train_ds.field2id_token[uid], train_ds.field2id_token[iid]
    out = {}
    for name, ds in (("test", test_ds), ("valid", valid_ds)):
        f = ds.inter_feat
        u, t = f[uid].numpy(), f[iid].numpy()
        h, n = f[ds.item_id_list_field].numpy(), f[ds.item_list_length_field].numpy()
        out[name] = digest([f"{users[a]}\t{' '.join(items[h[r, :n[r]]])}\t{items[b]}"
                            for r, (a, b) in enumerate(zip(u, t))])
        out[f"{name}_rows"] = len(u)
    f = train_ds.inter_feat
    out["train_pairs"] = digest([f"{a}\t{b}" for a, b in zip(users[f[uid].numpy()], items[f[iid].numpy()])])
    out["train_rows"] = len(f)
    return out


def load_rank_metrics():
    """recharness's `rank_metrics` (the NDCG@10 of a rank), loaded from its file: numpy only, so it runs in
    RecBole's venv without the recharness package and its dependencies."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "src" / "recharness" / "metrics" / "full_ranking.py"
    spec = importlib.util.spec_from_file_location("recharness_full_ranking", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.rank_metrics


def config_dict(spec: dict) -> dict:
    """RecBole's settings for the run `spec` describes (also read by bench_recbole_dataloader.py)."""
    return {
        "data_path": spec["data_path"], "checkpoint_dir": str(Path(spec["work"]) / "saved"),
        "use_gpu": False, "seed": spec["seed"], "reproducibility": True, "show_progress": False,
        "worker": 0, "save_dataset": False, "save_dataloaders": False,
        "load_col": {"inter": ["user_id", "item_id", "timestamp"]},
        "USER_ID_FIELD": "user_id", "ITEM_ID_FIELD": "item_id", "TIME_FIELD": "timestamp",
        "MAX_ITEM_LIST_LENGTH": spec["max_len"],
        "hidden_size": spec["hidden"], "n_layers": spec["layers"], "n_heads": spec["heads"],
        "inner_size": spec["inner"], "hidden_dropout_prob": spec["dropout"], "attn_dropout_prob": spec["dropout"],
        "loss_type": "CE", "train_neg_sample_args": None,
        "train_batch_size": spec["batch_size"], "learning_rate": spec["lr"], "epochs": spec["epochs"],
        "eval_args": {"split": {"LS": "valid_and_test"}, "order": "TO", "group_by": "user", "mode": "full"},
        "metrics": ["NDCG", "Hit"], "topk": [10], "valid_metric": "NDCG@10", "eval_batch_size": 4096,
    }


def recbole_setup(settings: dict, spec: dict):
    """RecBole's seeded dataset, (train, valid, test) loaders, SASRec and Trainer for `settings` (`config_dict`):
    (config, dataset, loaders, model, trainer); also bench_recbole_dataloader.py's."""
    from recbole.config import Config
    from recbole.data import create_dataset, data_preparation
    from recbole.model.sequential_recommender import SASRec
    from recbole.trainer import Trainer
    from recbole.utils import init_seed

    config = Config(model="SASRec", dataset=spec["dataset"], config_dict=settings)
    init_seed(config["seed"], config["reproducibility"])
    dataset = create_dataset(config)
    loaders = data_preparation(config, dataset)
    init_seed(config["seed"], config["reproducibility"])
    model = SASRec(config, loaders[0].dataset).to(config["device"])
    return config, dataset, loaders, model, Trainer(config, model)


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    del sys.argv[1:]  # RecBole's Config reads --key=value settings from the command line
    t_setup = time.perf_counter()
    import numpy as np
    import torch

    torch.set_num_threads(spec["threads"])
    import recbole

    config, dataset, (train_data, valid_data, test_data), model, trainer = recbole_setup(config_dict(spec), spec)
    trainer.eval_collector.data_collect(train_data)
    setup_s = time.perf_counter() - t_setup
    print(f"[recbole] setup {setup_s:.1f} s: {len(train_data.dataset):,} training samples, "
          f"{dataset.user_num - 1:,} users, {dataset.item_num - 1:,} items", file=sys.stderr, flush=True)

    # training clock: runs only inside _train_epoch, minus the evaluations done inside it
    clock = {"done": 0.0, "start": None, "paused": 0.0}

    def train_s() -> float:
        running = 0.0 if clock["start"] is None else time.perf_counter() - clock["start"] - clock["paused"]
        return clock["done"] + running

    curve: list[dict] = []
    state = {"samples": 0, "epoch": 0, "next": spec["curve_every"] or float("inf")}
    rank_metrics = load_rank_metrics()
    #: per-user test ranks of the epoch with the best validation NDCG@10 so far, and of the last epoch
    ranks: dict[str, dict | None] = {"best": None, "last": None}

    @torch.no_grad()
    def test_ranks() -> dict[str, int]:
        """Each test user's target rank on the current weights, scored as RecBole's full-sort evaluation
        scores it (its own `_full_sort_batch_eval` on the test loader's batches, as `Trainer.evaluate`
        iterates them): 1 + the items with a strictly higher score, by user token."""
        model.eval()
        trainer.tot_item_num = test_data._dataset.item_num  # what `evaluate` sets before its batches
        uid, out = test_data._dataset.uid_field, {}
        for batched in test_data:
            interaction, scores, row, target = trainer._full_sort_batch_eval(batched)
            rank = 1 + (scores > scores[row, target][:, None]).sum(dim=1)
            users = test_data._dataset.id2token(uid, interaction[uid][row].numpy())
            out.update(zip(users.tolist(), rank.tolist()))
        model.train()
        if len(out) != len(test_data._dataset):
            raise RuntimeError(f"{len(test_data._dataset)} test rows but {len(out)} distinct users")
        return out

    def keep_ranks(point: dict) -> None:
        """The end-of-epoch point's per-user ranks as the last epoch's, checked against RecBole's ndcg@10."""
        by_user = test_ranks()
        mine = float(rank_metrics(list(by_user.values()), ks=(10,))["ndcg@10"])
        ranks["last"] = {"epoch": point["epoch"], "train_s": point["train_s"], "ndcg@10": point["ndcg@10"],
                         "ndcg@10_from_ranks": mine, "ranks": by_user}
        if abs(mine - point["ndcg@10"]) <= 1e-4:
            print(f"[recbole] rank check: mean NDCG@10 of the {len(by_user):,} per-user ranks {mine:.5f}, "
                  f"RecBole's ndcg@10 {point['ndcg@10']:.4f}: equal to 1e-4", file=sys.stderr, flush=True)
        else:
            print(f"[recbole] WARNING: mean NDCG@10 of the per-user ranks {mine:.5f} differs from RecBole's "
                  f"ndcg@10 {point['ndcg@10']:.4f} by more than 1e-4 (ties ranked differently?)",
                  file=sys.stderr, flush=True)

    def write_ranks() -> None:
        """ranks-best.json and ranks-last.json as `ranks` holds them (absent when it holds none), each by an
        atomic rename."""
        for which, record in ranks.items():
            path = work / f"ranks-{which}.json"
            if record is None:
                path.unlink(missing_ok=True)
                continue
            tmp = path.with_suffix(".json.tmp")
            tmp.write_text(json.dumps(record))
            os.replace(tmp, path)

    def evaluate(end_of_epoch: bool) -> None:
        t, at = time.perf_counter(), train_s()  # the training seconds before the evaluation's own
        res = trainer.evaluate(test_data, load_best_model=False, show_progress=False)
        model.train()
        point = {"train_s": round(at, 3), "samples": state["samples"], "epoch": state["epoch"],
                 "end_of_epoch": end_of_epoch, "ndcg@10": float(res["ndcg@10"]), "hit@10": float(res["hit@10"])}
        if end_of_epoch:
            keep_ranks(point)
        point["eval_s"] = round(time.perf_counter() - t, 3)
        curve.append(point)
        if clock["start"] is not None:
            clock["paused"] += time.perf_counter() - t
        print(f"[recbole] epoch {state['epoch']} {point['train_s']:.0f} s trained, {state['samples']:,} samples: "
              f"test NDCG@10 {point['ndcg@10']:.4f} Hit@10 {point['hit@10']:.4f}", file=sys.stderr, flush=True)

    def next_point_after(t: float) -> None:
        """The next mid-epoch curve point: the first multiple of `curve_every` after `t` training seconds."""
        while state["next"] <= t:
            state["next"] += spec["curve_every"]

    def hold_while_paused() -> None:
        """Wait, off the training clock, while the pause file exists: a quiet machine for something else
        (a timing benchmark, a test suite) without stopping the run or counting the wait as training."""
        if not pause_file.exists():
            return
        t = time.perf_counter()
        print(f"[recbole] paused by {pause_file} at {train_s():.0f} training seconds", file=sys.stderr, flush=True)
        while pause_file.exists():
            time.sleep(1.0)
        held = time.perf_counter() - t
        clock["paused"] += held
        state["held_s"] = state.get("held_s", 0.0) + held
        print(f"[recbole] resumed after {held:.0f} s paused", file=sys.stderr, flush=True)

    def loss_func(interaction):
        hold_while_paused()
        if train_s() >= state["next"]:
            evaluate(False)
            next_point_after(train_s())
        if train_s() >= state["next_checkpoint"]:  # between batches: `batch` of them trained so far
            t = time.perf_counter()
            save_checkpoint(within_epoch=True)
            clock["paused"] += time.perf_counter() - t
            state["next_checkpoint"] = train_s() + checkpoint_every
        state["samples"] += len(interaction)
        state["batch"] += 1
        loss = model.calculate_loss(interaction)
        state["loss"] += loss.item()  # as `_train_epoch` sums it, so a resumed epoch's sum is the whole epoch's
        return loss

    def skipped(seconds: float) -> None:
        clock["paused"] += seconds
        print(f"[recbole] epoch {state['epoch']}: skipped the {state['batch']} batches trained before in "
              f"{seconds:.1f} s", file=sys.stderr, flush=True)

    work = Path(spec["work"])
    # bench_recbole.py names one file for both sides; run alone, the driver's own work directory's
    pause_file = Path(os.environ.get(PAUSE_ENV) or work / "PAUSE")
    ckpt_json = work / "checkpoint.json"
    checkpoint_every = float(spec.get("checkpoint_every") or 300.0)
    #: the epoch in progress when the checkpoint resumed was taken: {epoch, batches, loss_sum, held_s,
    #: started: {train_s, samples}}, or None
    within = None
    key = {k: v for k, v in spec.items() if k not in RESUMABLE}
    epochs: list[dict] = []
    best = {"valid": float("-inf"), "epoch": 0}
    sittings, peak_before = 1, 0
    if ckpt_json.exists():
        saved = json.loads(ckpt_json.read_text())
        saved_key = {k: v for k, v in saved["spec"].items() if k not in RESUMABLE}  # older ones kept the paths
        if saved_key != key:
            diff = sorted(k for k in {*saved_key, *key} if saved_key.get(k) != key.get(k))
            raise SystemExit(f"{ckpt_json}: a checkpoint of other settings ({', '.join(diff)} differ); "
                             "give another --work directory or remove it")
        tensors = torch.load(work / saved["tensors"], weights_only=True)
        model.load_state_dict(tensors["model"])
        trainer.optimizer.load_state_dict(tensors["optimizer"])
        torch.set_rng_state(tensors["torch_rng"])
        train_data.generator.set_state(tensors["loader_rng"])
        np_state = saved["numpy_rng"]
        np.random.set_state((np_state[0], np.asarray(np_state[1], dtype=np.uint32), *np_state[2:]))
        random.setstate((saved["python_rng"][0], tuple(saved["python_rng"][1]), saved["python_rng"][2]))
        epochs, curve[:], best = saved["epochs"], saved["curve"], saved["best"]
        if not saved.get("curve_fixed"):
            # before 2026-11-26 a within-epoch point's train_s was read after its evaluation, so it
            # included that evaluation's seconds (its eval_s; the clock itself excluded them)
            for point in curve:
                if not point["end_of_epoch"]:
                    point["train_s"] = round(point["train_s"] - point["eval_s"], 3)
        sittings = saved["sittings"] + 1
        peak_before = saved["peak_rss_bytes"]
        clock["done"], state["samples"] = saved["train_s"], saved["samples"]
        state["next"] = saved["next_curve_s"]
        within = saved.get("within_epoch")  # a checkpoint taken between epochs, or written before these, has none
        ranks.update(saved.get("ranks") or {})  # a checkpoint from before ranks were kept has none
        write_ranks()  # the committed epoch's files, over any of an epoch killed before its commit
        where = f"{within['batches']} batches into epoch {within['epoch']}" if within else f"after epoch {len(epochs)}"
        print(f"[recbole] resumed {where} ({clock['done']:.0f} training seconds)", file=sys.stderr, flush=True)

    def save_checkpoint(within_epoch: bool = False) -> None:
        """Between epochs, or (`within_epoch`) between two batches of the epoch in progress: then the
        loader's generator is kept as it was when the epoch began, to draw the epoch's order again."""
        loader_rng = state["epoch_loader_rng"] if within_epoch else train_data.generator.get_state()
        tensors = {"model": model.state_dict(), "optimizer": trainer.optimizer.state_dict(),
                   "torch_rng": torch.get_rng_state(), "loader_rng": loader_rng}
        np_state = np.random.get_state()
        name = f"checkpoint-epoch{len(epochs)}.pt"
        progress = None
        if within_epoch:
            name = f"checkpoint-epoch{state['epoch']}-batch{state['batch']}.pt"
            progress = {"epoch": state["epoch"], "batches": state["batch"], "loss_sum": state["loss"],
                        "held_s": state.get("held_s", 0.0), "started": state["started"]}
        record = {"spec": key, "tensors": name, "epochs": epochs, "curve": curve, "best": best,
                  "train_s": train_s() if within_epoch else clock["done"], "within_epoch": progress,
                  "samples": state["samples"], "next_curve_s": state["next"], "sittings": sittings,
                  "curve_fixed": True,
                  "peak_rss_bytes": max(peak_before, vm_hwm_bytes()),
                  "numpy_rng": [np_state[0], np_state[1].tolist(), *np_state[2:]],
                  "python_rng": list(random.getstate()),
                  "ranks": ranks}  # not part of the key: an older checkpoint (without ranks) still resumes
        torch.save(tensors, work / f"{name}.tmp")
        os.replace(work / f"{name}.tmp", work / name)
        ckpt_json.with_suffix(".json.tmp").write_text(json.dumps(record))
        os.replace(ckpt_json.with_suffix(".json.tmp"), ckpt_json)  # the commit point
        for old in work.glob("checkpoint-epoch*.pt"):  # the epochs' and the within-epoch ones
            if old.name != name:
                old.unlink()

    def converged() -> bool:
        """More than `patience` epochs in a row without a validation NDCG@10 >= the best (RecBole's
        `early_stopping`: its count of bad epochs exceeds `stopping_step`)."""
        return bool(spec.get("patience")) and bool(epochs) and len(epochs) - best["epoch"] > spec["patience"]

    for epoch in range(len(epochs), spec["epochs"]):
        if converged():
            break
        state["epoch"] = epoch + 1
        if within is not None and within["epoch"] == epoch + 1:  # carry on where the checkpoint was taken
            state["batch"], state["loss"], state["held_s"] = within["batches"], within["loss_sum"], within["held_s"]
            state["started"] = within["started"]
        else:
            state["batch"], state["loss"] = 0, 0.0
            state["started"] = {"train_s": clock["done"], "samples": state["samples"]}
        within = None
        state["epoch_loader_rng"] = train_data.generator.get_state()  # before the epoch draws its order
        clock["start"], clock["paused"] = time.perf_counter(), 0.0
        state["next_checkpoint"] = train_s() + checkpoint_every
        loader = SkipFirst(train_data, state["batch"], skipped) if state["batch"] else train_data
        trainer._train_epoch(loader, epoch, loss_func=loss_func, show_progress=False)
        clock["done"], clock["start"] = train_s(), None
        epoch_s = clock["done"] - state["started"]["train_s"]
        samples = state["samples"] - state["started"]["samples"]
        loss = state["loss"]
        evaluate(True)
        next_point_after(clock["done"])  # the epoch's end was just evaluated: no second point at once
        valid = float(trainer.evaluate(valid_data, load_best_model=False, show_progress=False)["ndcg@10"])
        model.train()
        if valid >= best["valid"]:  # RecBole's early_stopping: a tie resets the count
            best = {"valid": valid, "epoch": epoch + 1, "test": curve[-1]["ndcg@10"], "train_s": curve[-1]["train_s"]}
            ranks["best"] = ranks["last"]
        epochs.append({"epoch": epoch + 1, "train_s": round(epoch_s, 3), "samples": samples,
                       "samples_per_s": round(samples / epoch_s, 1), "loss_sum": float(loss),
                       "valid_ndcg@10": valid, "load_1min": os.getloadavg()[0],
                       "paused_s": round(state.pop("held_s", 0.0), 1),
                       "finished_at": time.strftime("%Y-%m-%d %H:%M:%S"), "cpu": cpu_model(),
                       "sitting": sittings})
        print(f"[recbole] epoch {epoch + 1}: valid NDCG@10 {valid:.4f} (best {best['valid']:.4f} at epoch "
              f"{best['epoch']})", file=sys.stderr, flush=True)
        write_ranks()  # before the commit point: a committed epoch always has its files
        save_checkpoint()
    stopped = "patience" if converged() else "epochs"
    peak = max(peak_before, vm_hwm_bytes())  # over every sitting of the run
    result = {
        "framework": f"RecBole {recbole.__version__}", "torch": torch.__version__, "threads": torch.get_num_threads(),
        "settings": {k: config[k] for k in ("hidden_size", "n_layers", "n_heads", "inner_size", "hidden_dropout_prob",
                                            "attn_dropout_prob", "hidden_act", "layer_norm_eps", "loss_type",
                                            "train_batch_size", "learning_rate", "MAX_ITEM_LIST_LENGTH", "seed")},
        "setup_s": round(setup_s, 3), "users": dataset.user_num - 1, "items": dataset.item_num - 1,
        "train_samples_per_epoch": len(train_data.dataset), "epochs": epochs,
        "train_s": round(clock["done"], 3), "samples": state["samples"],
        "samples_per_s": round(state["samples"] / clock["done"], 1), "curve": curve, "peak_rss_bytes": peak,
        "best_valid": best, "ranks": ranks, "stopped": stopped, "patience": spec.get("patience"), "sittings": sittings,
        "fingerprints": fingerprints(train_data.dataset, valid_data.dataset, test_data.dataset),
    }
    Path(spec["result"]).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
