"""Official RecBench+ files: the 279 demographics queries, and errors on malformed files."""

from __future__ import annotations

import json

import pytest

from recharness.core.errors import InputError
from recharness.core.types import BuildConfig
from recharness.tasks.recbench_plus.official import read_records
from recharness.tasks.recbench_plus.profile_tasks import DemographicsTask


def test_279_official_demographics_queries_load_and_match(ml1m, shared):
    path = shared("data", "recbench_plus", "movie", "UserBasedQuery.json")
    samples = list(DemographicsTask().build(ml1m, BuildConfig(options={"demographics_file": str(path)})))
    assert len(samples) == 279
    assert len({s["group_type"] + json.dumps(s["group"]) for s in samples}) == 59
    titles = sum(len(s["gt"]) for s in samples)
    matched = sum(not g.startswith("\x00") for s in samples for g in s["gt"])
    assert titles == 848 and matched == titles  # every ground-truth title found in the catalog ...
    assert sum(s["gt_in_group_top"] for s in samples) == matched  # ... and each is one of its group's top-10 movies
    s0 = samples[0]
    assert s0["query"] == "I'm feeling nostalgic and looking for classic 80s and 90s movies. Can you recommend some?"
    assert s0["gt"] == ["1259", "1968", "1197"]  # Stand by Me, The Breakfast Club, The Princess Bride
    assert s0["groups"] == ["group_type=age", "age=25-34", "history=without"]
    assert s0["query_phrasing"] == "official" and not s0["with_history"]
    assert any(s["groups"][1:4] == ["age=18-24", "gender=Male", "occupation=college/grad student"] for s in samples)
    limited = list(DemographicsTask().build(ml1m, BuildConfig(limit=7, seed=3, options={"demographics_file": str(path)})))
    assert len(limited) == 7


def test_malformed_files_name_entry_and_field(tmp_path):
    p = tmp_path / "ExplicitQuery.json"
    p.write_text('[{"source_user": "1", "movieSubsetId": [], "sharedRelationships": [], "situational_description_query": "q"}]')
    with pytest.raises(InputError, match=r"ExplicitQuery\.json, field 'movieSubsetId': entry 0: must be a non-empty list"):
        read_records(p, "explicit")
    p.write_text('[{"source_user": "1", "movieSubsetId": [1], "sharedRelationships": [["Genre"]], "situational_description_query": "q"}]')
    with pytest.raises(InputError, match="sharedRelationships"):
        read_records(p, "explicit")
    p.write_text('[{"movieSubsetId": [1]}]')
    with pytest.raises(InputError, match="field 'source_user': entry 0: missing key"):
        read_records(p, "explicit")
    p.write_text('[{"query & ground true": [{"query": "q", "movie subset": []}]}]')
    with pytest.raises(InputError, match=r"field 'movie subset': entry 0, query 0: must be a non-empty list of titles"):
        read_records(p, "demographics")
    p.write_text('[{"data_idx": 4, "query & ground true": []}, {"data_idx": 4, "query & ground true": []}]')
    with pytest.raises(InputError, match="entry 1: data_idx 4 already used by entry 0"):
        read_records(p, "demographics")
    p.write_text("{not json")
    with pytest.raises(InputError, match="line 1: not valid JSON"):
        read_records(p, "demographics")
    with pytest.raises(InputError, match="file not found"):
        read_records(tmp_path / "nope.json", "demographics")
