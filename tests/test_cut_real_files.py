"""Real-format files cut mid-row (a download stopped short) are refused naming file, line and field:
MicroLens's `*_title_en.csv` cut mid-title, its quoted `*_titles.csv` alike, and H&M's `articles.csv` cut
inside its last field (the csv module took what was there as the whole row)."""

from __future__ import annotations

import subprocess
import sys

from recharness.data.hm import load_hm, read_articles
from recharness.data.microlens import load_microlens, read_titles
from tests.loader_faults import copy_fixture, fails


def _cut(path, n: int) -> None:
    path.write_bytes(path.read_bytes()[:-n])


def test_microlens_title_file_cut_mid_title(tmp_path):
    d = copy_fixture("microlens", tmp_path)
    p = d / "MicroLens-100k_title_en.csv"
    assert p.read_text().endswith("24, fishing on a frozen lake # outdoors\n")
    _cut(p, 12)  # "24, fishing on a frozen la"
    fails(lambda: load_microlens(d), file="MicroLens-100k_title_en.csv", line=24, field="title", says="ends mid-line")
    p.write_bytes(p.read_bytes().rsplit(b"\n", 1)[0] + b"\n24")  # cut before the comma
    fails(lambda: load_microlens(d), file="MicroLens-100k_title_en.csv", line=24, field="item", says="ends mid-line")


def test_microlens_whole_title_file_and_trailing_blanks_are_read(tmp_path):
    d = copy_fixture("microlens", tmp_path)
    assert dict(read_titles(d / "MicroLens-100k_title_en.csv").iter_rows())["24"] == "fishing on a frozen lake # outdoors"
    p = d / "MicroLens-100k_title_en.csv"
    p.write_bytes(p.read_bytes() + b"\n  ")  # blank lines after the last newline are not a cut
    assert read_titles(p).height == 24


def test_microlens_quoted_titles_cut_mid_title(tmp_path):
    p = tmp_path / "MicroLens-50k_titles.csv"
    p.write_text('item,title\n1,"Gu long, song # comic"\n2,plain title\n')
    assert dict(read_titles(p).iter_rows()) == {"1": "Gu long, song # comic", "2": "plain title"}
    _cut(p, 4)  # "2,plain ti"
    fails(lambda: read_titles(p), file="MicroLens-50k_titles.csv", line=3, field="title", says="ends mid-line")


def test_hm_articles_cut_inside_the_last_field(tmp_path):
    d = copy_fixture("hm", tmp_path)
    p = d / "articles.csv"
    assert read_articles(p).height == 24
    _cut(p, 20)  # "...5-pocket jeans in washed superstretch denim wi"
    fails(lambda: load_hm(d), file="articles.csv", line=25, field="detail_desc", says="ends mid-line")


def test_prepare_refuses_a_cut_titles_file_with_one_line(tmp_path):
    d = copy_fixture("microlens", tmp_path)
    _cut(d / "MicroLens-100k_title_en.csv", 12)
    p = subprocess.run([sys.executable, "-m", "recharness", "prepare", "microlens", str(d), "--as", "ml-cut"],
                       capture_output=True, text=True, timeout=120,
                       env={"RECHARNESS_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"})
    msg = " ".join(p.stderr.split())
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert "MicroLens-100k_title_en.csv, line 24" in msg and "ends mid-line" in msg, msg
    assert not (tmp_path / "home" / "datasets" / "ml-cut").exists()

