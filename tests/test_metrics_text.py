import math
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import sacrebleu
from rouge_score import rouge_scorer
from sacrebleu.metrics import BLEU

try:
    import recharness  # noqa: F401
except ImportError:  # package not installed: test the source tree
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from recharness.metrics import bleu, rouge, sentence_bleu, text_metrics

TOL = 1e-9  # sacrebleu works on a 0-100 scale

HYP = "the cat sat on the mat"
REF = "a cat sat on a mat"


def test_bleu_hand_worked():
    # unigrams: cat, sat, on, mat match ("the" x2 do not) -> p1 = 4/6; equal lengths -> BP = 1
    assert bleu([HYP], [REF], max_order=1) == pytest.approx(100 * 4 / 6, abs=TOL)
    # p2 = 2/5 (cat sat, sat on), p3 = 1/4 (cat sat on), p4 = 0/3 -> sacrebleu's default
    # "exp" smoothing replaces it by 1/(2 * 3); BLEU-4 = 100 * (4/6 * 2/5 * 1/4 * 1/6) ** (1/4) = 32.4668
    expected = 100 * (4 / 6 * 2 / 5 * 1 / 4 * 1 / 6) ** 0.25
    assert bleu([HYP], [REF], max_order=4) == pytest.approx(expected, abs=TOL)
    assert sentence_bleu([HYP], [REF], max_order=4) == pytest.approx(expected, abs=TOL)
    assert sentence_bleu([HYP], [REF], max_order=1) == pytest.approx(100 * 4 / 6, abs=TOL)


def test_bleu_brevity_penalty_and_multi_reference():
    # hyp has 4 tokens; closest reference length is 5 -> BP = exp(1 - 5/4); all 4 unigrams match
    assert bleu(["a b c d"], [["a b", "a b c d e"]], max_order=1) == pytest.approx(100 * math.exp(-0.25), abs=TOL)
    # references per sample may differ in number
    hyps, refs = ["a b c", "x y z"], [["a b c"], ["x y", "x y z w"]]
    ref_streams = [["a b c", "x y"], [None, "x y z w"]]
    assert bleu(hyps, refs) == pytest.approx(sacrebleu.corpus_bleu(hyps, ref_streams).score, abs=TOL)


def test_bleu_normalisation():
    # case-sensitive by default: "The" misses -> 1/2; lowercase=True -> 2/2
    assert bleu(["The cat"], ["the cat"], max_order=1) == pytest.approx(50.0, abs=TOL)
    assert bleu(["The cat"], ["the cat"], max_order=1, lowercase=True) == pytest.approx(100.0, abs=TOL)
    # 13a splits the final full stop off the word: "cat." == "cat ."
    assert bleu(["the cat."], ["the cat ."], max_order=1) == pytest.approx(100.0, abs=TOL)


def test_rouge_hand_worked():
    # ROUGE-1: 4 shared unigrams of 6 and 6 -> F1 = 4/6; ROUGE-2: 2 shared bigrams of 5 and 5 -> 0.4;
    # ROUGE-L: LCS "cat sat on mat" = 4 -> 4/6
    r = rouge([HYP], [REF])
    assert r["rouge1"] == pytest.approx(4 / 6, abs=TOL)
    assert r["rouge2"] == pytest.approx(0.4, abs=TOL)
    assert r["rougeL"] == pytest.approx(4 / 6, abs=TOL)


def test_rouge_normalisation_stemmer_and_case():
    # Porter stemmer: cats -> cat, running/runs -> run; the tokenizer lowercases and drops punctuation
    assert rouge(["Cats, running!"], ["cat runs"]) == {"rouge1": 1.0, "rouge2": 1.0, "rougeL": 1.0}


def test_missing_and_empty_outputs_score_zero():
    m = text_metrics([None, ""], ["a cat", "a dog"])
    assert set(m) == set(text_metrics(["a cat"], ["a cat"])) and len(m) >= 4 and all(v == 0.0 for v in m.values()), m
    with pytest.raises(ValueError):
        bleu(["a"], ["a", "b"])
    with pytest.raises(ValueError, match="sample 0"):
        rouge(["a"], [[]])


def _corpus(seed, n=200):
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(30)]

    def sent():
        return " ".join(rng.choice(vocab, size=int(rng.integers(1, 15))))

    return [sent() for _ in range(n)], [sent() for _ in range(n)]


def _bleu1_by_hand(hyps, refs):
    """BLEU-1 = clipped unigram precision x brevity penalty, pooled over the corpus (whitespace tokens)."""
    match = total = hyp_len = ref_len = 0
    for h, r in zip(hyps, refs):
        hc, rc = Counter(h.split()), Counter(r.split())
        match += sum(min(c, rc[w]) for w, c in hc.items())
        total += sum(hc.values())
        hyp_len += len(h.split())
        ref_len += len(r.split())
    bp = 1.0 if hyp_len > ref_len else math.exp(1 - ref_len / hyp_len)
    return 100 * bp * match / total


@pytest.mark.parametrize("seed", [0, 1])
def test_bleu_matches_sacrebleu(seed):
    hyps, refs = _corpus(seed)
    assert bleu(hyps, refs, 4) == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score, abs=TOL)
    assert bleu(hyps, refs, 1) == pytest.approx(BLEU(max_ngram_order=1).corpus_score(hyps, [refs]).score, abs=TOL)
    assert bleu(hyps, refs, 1) == pytest.approx(_bleu1_by_hand(hyps, refs), abs=TOL)
    ref_sent = np.mean([sacrebleu.sentence_bleu(h, [r]).score for h, r in zip(hyps, refs)])
    assert sentence_bleu(hyps, refs, 4) == pytest.approx(ref_sent, abs=TOL)
    per = sentence_bleu(hyps, refs, 1, per_sample=True)
    assert per.shape == (len(hyps),)
    np.testing.assert_allclose(per[:20], [_bleu1_by_hand([h], [r]) for h, r in zip(hyps[:20], refs[:20])], atol=TOL)


@pytest.mark.parametrize("seed", [0, 1])
def test_rouge_matches_rouge_score(seed):
    hyps, refs = _corpus(seed)
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    ref = [scorer.score(r, h) for h, r in zip(hyps, refs)]
    got = rouge(hyps, refs)
    for t in ("rouge1", "rouge2", "rougeL"):
        assert got[t] == pytest.approx(np.mean([s[t].fmeasure for s in ref]), abs=TOL)
    # multi-reference: best F1 over the references
    multi = [[r, h[: len(h) // 2]] for h, r in zip(hyps, refs)]
    got = rouge(hyps, multi, per_sample=True)
    best = [max(scorer.score(x, h)["rouge1"].fmeasure for x in rs) for h, rs in zip(hyps, multi)]
    np.testing.assert_allclose(got["rouge1"], best, atol=TOL)
