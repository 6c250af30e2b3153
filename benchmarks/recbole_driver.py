"""RecBole 1.2.1 SASRec on a prepared atomic .inter file: the RecBole side of bench_recbole.py.

Runs in its own venv (.venv-recbole: RecBole 1.2.1 needs numpy<2, pandas<3, setuptools<81) and
imports nothing from recharness. Usage (bench_recbole.py writes the spec and starts it with
TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 and OMP_NUM_THREADS set):

    .venv-recbole/bin/python benchmarks/recbole_driver.py SPEC.json

SPEC: {"data_path", "dataset", "work", "result", "seed", "threads", "epochs", "curve_every",
"dropout", "hidden", "layers", "heads", "inner", "max_len", "batch_size", "lr"}.

Training is RecBole's own `Trainer._train_epoch` (the loop `Trainer.fit` runs), with a loss
function that wraps `model.calculate_loss` to count samples and, every `curve_every` training
seconds, evaluate the test split (RecBole's `Trainer.evaluate`, full sort) on the current weights;
the test split is also evaluated after each epoch. Evaluation time is kept out of the training
seconds. RecBole's per-epoch validation and checkpointing (`fit`) are not run: nothing is selected
on validation, so the reported model is the one after the last epoch.

Writes RESULT (JSON): settings, setup seconds, per-epoch training seconds and samples, the curve
[(train_s, samples, epoch, ndcg@10, hit@10)], peak RSS (VmHWM, read before the split fingerprints
are computed) and fingerprints (sha256) of the test/valid rows and of the training (user, target)
pairs, for bench_recbole.py to check that both frameworks saw the same split.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path


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


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    del sys.argv[1:]  # RecBole's Config reads --key=value settings from the command line
    t_setup = time.perf_counter()
    import torch

    torch.set_num_threads(spec["threads"])
    import recbole
    from recbole.config import Config
    from recbole.data import create_dataset, data_preparation
    from recbole.model.sequential_recommender import SASRec
    from recbole.trainer import Trainer
    from recbole.utils import init_seed

    config_dict = {
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
    config = Config(model="SASRec", dataset=spec["dataset"], config_dict=config_dict)
    init_seed(config["seed"], config["reproducibility"])
    dataset = create_dataset(config)
    train_data, valid_data, test_data = data_preparation(config, dataset)
    init_seed(config["seed"], config["reproducibility"])
    model = SASRec(config, train_data.dataset).to(config["device"])
    trainer = Trainer(config, model)
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

    def evaluate(end_of_epoch: bool) -> None:
        t = time.perf_counter()
        res = trainer.evaluate(test_data, load_best_model=False, show_progress=False)
        model.train()
        point = {"train_s": round(train_s(), 3), "samples": state["samples"], "epoch": state["epoch"],
                 "end_of_epoch": end_of_epoch, "ndcg@10": float(res["ndcg@10"]), "hit@10": float(res["hit@10"]),
                 "eval_s": round(time.perf_counter() - t, 3)}
        curve.append(point)
        if clock["start"] is not None:
            clock["paused"] += time.perf_counter() - t
        print(f"[recbole] epoch {state['epoch']} {point['train_s']:.0f} s trained, {state['samples']:,} samples: "
              f"test NDCG@10 {point['ndcg@10']:.4f} Hit@10 {point['hit@10']:.4f}", file=sys.stderr, flush=True)

    def loss_func(interaction):
        if train_s() >= state["next"]:
            evaluate(False)
            while state["next"] <= train_s():
                state["next"] += spec["curve_every"]
        state["samples"] += len(interaction)
        return model.calculate_loss(interaction)

    epochs = []
    for epoch in range(spec["epochs"]):
        state["epoch"] = epoch + 1
        before = state["samples"]
        clock["start"], clock["paused"] = time.perf_counter(), 0.0
        loss = trainer._train_epoch(train_data, epoch, loss_func=loss_func, show_progress=False)
        epoch_s = time.perf_counter() - clock["start"] - clock["paused"]
        clock["done"] += epoch_s
        clock["start"] = None
        samples = state["samples"] - before
        epochs.append({"epoch": epoch + 1, "train_s": round(epoch_s, 3), "samples": samples,
                       "samples_per_s": round(samples / epoch_s, 1), "loss_sum": float(loss)})
        evaluate(True)
    peak = vm_hwm_bytes()
    result = {
        "framework": f"RecBole {recbole.__version__}", "torch": torch.__version__, "threads": torch.get_num_threads(),
        "settings": {k: config[k] for k in ("hidden_size", "n_layers", "n_heads", "inner_size", "hidden_dropout_prob",
                                            "attn_dropout_prob", "hidden_act", "layer_norm_eps", "loss_type",
                                            "train_batch_size", "learning_rate", "MAX_ITEM_LIST_LENGTH", "seed")},
        "setup_s": round(setup_s, 3), "users": dataset.user_num - 1, "items": dataset.item_num - 1,
        "train_samples_per_epoch": len(train_data.dataset), "epochs": epochs,
        "train_s": round(clock["done"], 3), "samples": state["samples"],
        "samples_per_s": round(state["samples"] / clock["done"], 1), "curve": curve, "peak_rss_bytes": peak,
        "fingerprints": fingerprints(train_data.dataset, valid_data.dataset, test_data.dataset),
    }
    Path(spec["result"]).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
