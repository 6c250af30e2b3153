"""RecBench (Liu et al. 2025, "LLM-as-RS vs DLRMs"): LLMs and conventional recommenders on the same samples.

Task ``ctr`` (pair-wise recommendation, §3.1): P(Yes) that a user clicks an item given their last
20 positives, scored by AUC, GAUC and log loss beside reference rows fitted on the build's own
training pairs (`<run>/recbench/train.parquet`, `valid.parquet`). Data and split: `recbench.data`.

Task ``seqrec`` (list-wise recommendation, §3.2): the next item after a user's last 20 positives,
ranked over the whole catalog (history excluded) and scored by NDCG@10, HR@10, MRR and Recall@k,
beside SASRec (Group G) and popularity fitted on the build's training sequences
(`<run>/recbench/seqrec_train.parquet`, `seqrec_valid.parquet`). Split: `recbench.seqrec_data`.
"""

from recharness.baselines import BASELINES
from recharness.metrics.registry import metric
from recharness.tasks.recbench.ctr import CtrTask
from recharness.tasks.recbench.seqrec import SeqrecTask
from recharness.tasks.recbench.tables import paper_tables
from recharness.tasks.registry import DemoRun, register_suite

# the suite's own columns: what a beam decoder (title-cbs, an ID/SID fine-tune) on seqrec reports
metric("invalid_share", False, "share of a beam decoder's beams that name no catalog item (seqrec)")
metric("invalid_top1_share", False, "share of a beam decoder's answers whose first beam names no item (seqrec)")
metric("bounded_rate", None, "share of ctr answers with one option missing from the server's top log-probs, given "
       "the most the reply allows it (P(Yes) then the least confident value the reply allows)",
       ci=False)
metric("answer_latency_s", False, "mean seconds per answer as the method measured it (beam decoders)", ci=False)

TASKS = {"ctr": CtrTask, "seqrec": SeqrecTask}

# the zero-shot text row of Table 5: an LLM's first list entry decoded over a trie of catalog titles (slow: a
# sample cap). opt_in: trained only when named (`train -b title-cbs`); own_latency: its records carry the
# measured per-answer seconds, which the train stage keeps (re-timing would hit its remembered answers)
if "title-cbs" not in BASELINES:
    BASELINES.add("title-cbs", "recharness.tasks.recbench.title_cbs:TitleCBS", answers=("ranking",), trainable=False,
                  heavy=True, opt_in=True, own_latency=True,
                  description="zero-shot llama.cpp model (SmolLM2-135M) on the seqrec prompt, its answer decoded by "
                              "beam search over a trie of catalog titles; answers the first 100 samples (scored on "
                              "those); trained only when named: train -b title-cbs (needs llama-cpp-python)")

register_suite(
    "recbench",
    TASKS,
    "RecBench: pair-wise CTR, P(Yes) from the LLM vs reference recommenders fitted on the training pairs "
    "(AUC, GAUC, logloss); list-wise next-item over the full catalog vs SASRec (NDCG@10, HR@10, MRR)",
    default_tasks=["ctr"],
    paper_tables=paper_tables,  # Tables 3/4: AUC, Overall, latency per sample
    options="recharness.tasks.recbench.options:OPTIONS",
    demo=[DemoRun("recbench-ctr", ("ctr",), 4, ("test_pairs_per_user=2", "train_pairs=2000"), order=3),
          DemoRun("recbench-seqrec", ("seqrec",), 4, order=4)],
    finetune="recharness.tasks.recbench.finetune:RECIPES",
)

__all__ = ["TASKS", "CtrTask", "SeqrecTask"]
