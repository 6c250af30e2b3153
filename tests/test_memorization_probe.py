"""The memorization probe (arXiv 2505.10212): the exact-match rules by hand, exact intervals against
scipy, the ML-1M line formats, and a real run through an OpenAI-compatible server (llama.cpp)."""

import json
import re
from types import SimpleNamespace

import pytest

from recharness.probes.memorization import (
    Probe,
    answer_line,
    build_probes,
    check,
    coverage,
    item_line,
    popularity_deciles,
    summarise,
)


def _item(title="Toy Story (1995)", genres=("Animation", "Children's", "Comedy")):
    return Probe("item-1", "item", "1", [], {"prefix": "1::", "title": title, "genres": list(genres)})


def test_item_rules_title_and_full():
    p = _item()
    assert check(p, "1::Toy Story (1995)::Animation|Children's|Comedy") == {"title": True, "full": True}
    # the prefix after words is read from the prefix on (until 2026-11-30 such a line was judged with "Sure! " in it)
    assert check(p, "Sure! 1::Toy Story (1995)::Comedy|Animation|Children's\n") == {"title": True, "full": True}
    assert check(p, "Sure! 1::Toy Story::Comedy|Animation|Children's\n") == {"title": False, "full": False}
    assert check(p, "  1::Toy Story (1995)::Comedy|Animation|Children's ") == {"title": True, "full": True}  # a set
    assert check(p, "1::Toy Story (1995)::Comedy") == {"title": True, "full": False}
    assert check(p, "1::toy story (1995)::Animation|Children's|Comedy") == {"title": False, "full": False}
    assert check(p, "Toy Story (1995)::Animation|Children's|Comedy") == {"title": True, "full": True}  # prefix added
    assert check(p, "") == {"title": False, "full": False}


def test_user_and_interaction_rules():
    u = Probe("user-1", "user", "1", [], {"prefix": "1::", "gender": "F", "age": 1, "occupation": "10", "zip": "48067"})
    assert check(u, "1::F::1::10::48067")["full"] and not check(u, "1::F::1::10::48068")["full"]
    i = Probe("interaction-1", "interaction", "1", [], {"prefix": "1::", "item_id": "1193", "rating": 5.0})
    assert check(i, "1::1193::5::978300760")["full"] and check(i, "1::1193::5.0")["full"]
    assert not check(i, "1::1193::4::978300760")["full"] and not check(i, "1::661::5")["full"]
    # the paper's key is the movie: the right film with another rating is an item hit, not a full one
    assert check(i, "1::1193::4::978300760") == {"item": True, "full": False}
    assert check(i, "1::661::5") == {"item": False, "full": False} and check(i, "") == {"item": False, "full": False}
    assert answer_line("here:\n2::x\n1::y", "1::") == "1::y"
    # an answer without the prefix, then the file's next record: the answer is the first line, not the record
    # (the review of 2026-11-29: "1::2::Jumanji" was read, a title miss)
    assert answer_line("Toy Story (1995)\n2::Jumanji (1995)::Adventure", "1::") == "1::Toy Story (1995)"
    assert answer_line("Here it is:\nToy Story (1995)::Animation\n2::Jumanji (1995)::Adventure", "1::") == \
        "1::Toy Story (1995)::Animation"



def test_formatting_around_the_line_and_reasoning_are_not_the_answer():
    """A chat model's bold, quotes or code around the whole line is formatting (it read as a wrong title); a
    <think> block is not the answer (its right draft counted for a wrong final line, and a wrong draft hid a
    right one)."""
    p = _item()
    right = "1::Toy Story (1995)::Animation|Children's|Comedy"
    for wrapped in (f"**{right}**", f'"{right}"', f"`{right}`", f"\u201c{right}\u201d", f"*{right}*", f"**`{right}`**"):
        assert check(p, wrapped) == {"title": True, "full": True}, wrapped
    assert check(p, f"<think>\n{right}\nno...</think>\n1::Heat (1995)::Action") == {"title": False, "full": False}
    assert check(p, f"<think>1::Heat (1995)::Action</think>\n{right}") == {"title": True, "full": True}
    # a quote that belongs to the title is kept: only a pair around the whole line is formatting
    q = _item(title="'burbs, The (1989)", genres=("Comedy",))
    assert check(q, "1::'burbs, The (1989)::Comedy") == {"title": True, "full": True}
    assert check(q, "1::burbs, The (1989)::Comedy")["title"] is False
    # a chat model's preamble before a line without its id is not the answer (before: judged on "Here is...")
    assert check(p, "Here is the line:\nToy Story (1995)::Animation|Children's|Comedy") == {"title": True, "full": True}
    assert check(p, "Toy Story (1995)") == {"title": True, "full": False}  # no field anywhere: the first line

def test_a_chat_models_line_after_a_preamble_or_inside_a_sentence_is_read():
    """An interaction answer without its UserID opens with the MovieID: after a preamble (or in a code fence) it is
    the answer, not skipped as another record (every such answer was a miss, judged on the preamble); a record of
    another user still is skipped. A line holding the prefix after words or a list mark is read from the prefix
    on (it was judged with the words as its title)."""
    i = Probe("interaction-1", "interaction", "1", [], {"prefix": "1::", "item_id": "1197", "rating": 3.0})
    assert check(i, "1197::3::978302268") == {"item": True, "full": True}
    assert check(i, "Here is the next line:\n1197::3::978302268") == {"item": True, "full": True}
    assert check(i, "Sure.\n\n```\n1197::3::978302268\n```") == {"item": True, "full": True}
    assert check(i, "Here is the next line:\n1197::3") == {"item": True, "full": True}
    assert answer_line("Here:\n2::1197::3::978302268\n1197::4::1", "1::", id_first=3) == "1::1197::4::1"
    assert check(i, "Here:\n2::1197::3::978302268") == {"item": False, "full": False}  # another user's record
    p = _item()
    right = "1::Toy Story (1995)::Animation|Children's|Comedy"
    for said in (f"The next line is: {right}", f"- {right}", f"> {right}", f'The line is "{right}".'[:-1],
                 f"Sure! `{right}`", f"It is **{right}**"):
        assert check(p, said) == {"title": True, "full": True}, said
    assert check(p, "Next: 11::Toy Story (1995)::Animation") == {"title": False, "full": False}  # another id
    # an item's record of another id is still no answer without its prefix
    assert answer_line("Toy Story (1995)\n2::Jumanji (1995)", "1::", id_first=None) == "1::Toy Story (1995)"
    # an inline prefix with no field after it names no line: the next line is read (an interaction without its id)
    u10 = Probe("interaction-10", "interaction", "10", [], {"prefix": "10::", "item_id": "1197", "rating": 3.0})
    assert check(u10, "Here is the next rating by user 10::\n1197::3::978302268") == {"item": True, "full": True}
    # a closing quote before the sentence's stop is no part of the line
    assert check(p, f'The line is "{right}".') == {"title": True, "full": True}
    # what the rule text says it ignores
    assert check(p, right + "::extra") == {"title": True, "full": True}
    assert check(p, "1::Toy Story (1995)::Animation|Comedy|Children's|Comedy") == {"title": True, "full": True}


def test_coverage_interval_is_clopper_pearson():
    from scipy.stats import beta

    c = coverage([True] * 3 + [False] * 17)
    assert c["value"] == 0.15 and c["n"] == 20 and c["hits"] == 3
    assert c["lo"] == pytest.approx(beta.ppf(0.025, 3, 18)) and c["hi"] == pytest.approx(beta.ppf(0.975, 4, 17))
    none = coverage([False] * 20)
    assert none["lo"] == 0.0 and none["hi"] == pytest.approx(1 - 0.025 ** (1 / 20))  # never [0, 0]


def test_probes_show_the_files_own_lines_before_the_probed_id(ml1m):
    probes = build_probes(ml1m, limit=5, seed=0)
    assert [p.kind for p in probes] == ["item"] * 5 + ["user"] * 5 + ["interaction"] * 5
    items = ml1m.items.to_dicts()
    p = probes[0]
    k = next(i for i, r in enumerate(items) if str(r["item_id"]) == p.subject)
    shown = p.messages[0]["content"]
    for r in items[max(0, k - 3):k]:
        assert item_line(r) in shown
    assert item_line(items[k]) not in shown and f"starts with `{p.subject}::`" in shown


def test_summary_counts_unanswered_apart_and_lists_memorized_items(ml1m):
    probes = [p for p in build_probes(ml1m, kinds=("item",), limit=6, seed=1)]
    items = {str(r["item_id"]): r for r in ml1m.items.to_dicts()}
    answers = {p.qid: {"parsed": item_line(items[p.subject]), "valid": True} for p in probes[:2]}
    answers[probes[2].qid] = {"parsed": "no idea", "valid": True}
    answers[probes[3].qid] = {"parsed": None, "valid": False, "error": "http_400: prompt rejected"}
    answers[probes[4].qid] = {"parsed": "<think>The file movies.dat lists", "valid": True}  # cut off: no line
    res = summarise(probes, answers, ml1m)
    assert res["unanswered"] == 1 and res["failed"] == 1  # a failure is not a miss, and not left for a plain rerun
    assert res["empty"] == 1  # nor is an answer with no line in it (before: a miss)
    assert res["kinds"]["item"]["title"]["value"] == pytest.approx(2 / 3)
    assert res["memorized_items"] == sorted(p.subject for p in probes[:2])
    assert res["probed_items"] == sorted(p.subject for p in probes[:3])  # asked and answered: the unanswered are not
    # by popularity decile: each decile's title coverage over the checked items of that decile only
    deciles = popularity_deciles(ml1m)
    hit = {p.subject: i < 2 for i, p in enumerate(probes[:3])}
    by = res["kinds"]["item"]["by_decile"]
    assert set(by) == set(range(1, 11))
    for d in range(1, 11):
        mine = [h for i, h in hit.items() if deciles[i] == d]
        assert by[d]["n"] == len(mine) and by[d]["value"] == (sum(mine) / len(mine) if mine else None)


def test_popularity_deciles_by_interactions_ties_share_one():
    import polars as pl

    # interactions a 4, b 2, c 1, e 1, d 0: five items, two per tenth; c and e tie at places 2 and 3 (0-based),
    # both take the decile of place 2.5 (before: c 5 and e 7, by their ids)
    inter = pl.DataFrame({"item_id": list("aaaabbce")})
    ds = SimpleNamespace(interactions=inter, items=pl.DataFrame({"item_id": list("edcba")}))
    assert popularity_deciles(ds) == {"a": 1, "b": 3, "c": 6, "e": 6, "d": 9}
    # twenty items of one interaction each: one decile, the middle one (before: spread over 1-10 by their ids)
    ids = [str(k) for k in range(1, 21)]
    ds = SimpleNamespace(interactions=pl.DataFrame({"item_id": ids}), items=pl.DataFrame({"item_id": ids}))
    assert set(popularity_deciles(ds).values()) == {5}


@pytest.mark.llm
def test_the_probe_runs_against_an_openai_compatible_server(ml1m, llama_server, tmp_path):
    from typer.testing import CliRunner

    from recharness.cli import app

    spec = f"openai:smollm2-135m@{llama_server.base_url}"
    res = CliRunner().invoke(app, ["probe", "memorization", "-m", spec, "-n", "3", "--kinds", "item,user",
                                   "-o", str(tmp_path), "--name", "smol"])
    assert res.exit_code == 0, res.output
    out = json.loads((tmp_path / "smol.json").read_text())
    assert out["probes"] == 6 and out["unanswered"] == 0 and out["model"]["backend"] == "openai"
    item = out["kinds"]["item"]["title"]
    assert item["n"] == 3 and 0 <= item["lo"] <= item["value"] <= item["hi"] <= 1
    # the CLI shows the coverage by popularity decile: hits / probed of each decile add up to the item row
    said = " ".join(res.output.split())
    by = said[said.index("by popularity decile"):said.index("results →")]
    pairs = [(int(h), int(n)) for h, n in re.findall(r"\((\d+)/(\d+)\)", by)]
    assert sum(n for _, n in pairs) == item["n"] and sum(h for h, _ in pairs) == item["hits"], by
    answers = [json.loads(x) for x in (tmp_path / "smol.answers.jsonl").read_text().splitlines()]
    assert len(answers) == 6  # every probe answered once, kept for a resume


def test_a_logged_answer_is_reused_only_for_the_prompt_it_answered(ml1m, tmp_path):
    """The answer log is keyed by the prompt: a rerun asks nothing, a larger --limit asks only the new
    probes, and a dataset whose lines changed is asked again where its prompts changed, and only there."""
    import dataclasses

    import polars as pl

    from recharness.models.fake import FakeBackend
    from recharness.probes.memorization import probe

    asked: list[str] = []

    class Counting(FakeBackend):
        async def agenerate(self, messages, params):
            asked.append(messages[-1]["content"])
            return await super().agenerate(messages, params)

    def run(dataset, limit):
        asked.clear()
        probe(Counting("fake"), dataset, tmp_path, "fake", kinds=("item",), limit=limit, seed=3, use_cache=False)
        return len(asked)

    assert run(ml1m, 4) == 4
    assert run(ml1m, 4) == 0  # resumed: every answer reused
    first = {p.qid for p in build_probes(ml1m, kinds=("item",), limit=4, seed=3)}
    bigger = {p.qid for p in build_probes(ml1m, kinds=("item",), limit=8, seed=3)}
    assert first < bigger  # nested: a larger limit holds the smaller one's probes
    assert run(ml1m, 8) == len(bigger) - len(first) == 4  # only the new probes are asked
    # one item's title changed: the probes whose prompt shows its line are asked again, no other
    shown = build_probes(ml1m, kinds=("item",), limit=8, seed=3)[0]
    line = shown.messages[0]["content"].split("\n")[1]  # a shot line of the first probe
    item_id = line.split("::")[0]
    items = ml1m.items.with_columns(pl.when(pl.col("item_id").cast(pl.Utf8) == item_id)
                                    .then(pl.col("title") + " (edited)").otherwise(pl.col("title")).alias("title"))
    edited = dataclasses.replace(ml1m, items=items)
    changed = [p for p in build_probes(edited, kinds=("item",), limit=8, seed=3) if p.qid not in bigger]
    assert changed and shown.subject in {p.subject for p in changed}
    assert run(edited, 8) == len(changed)
    assert all(re.fullmatch(r"item-\d+@[0-9a-f]{12}", q) for q in bigger)
    # another --max-tokens is another question: asked again (before, the logged answers were reused)
    asked.clear()
    probe(Counting("fake"), ml1m, tmp_path, "fake", kinds=("item",), limit=4, seed=3, use_cache=False, max_tokens=512)
    assert len(asked) == 4 and json.loads((tmp_path / "fake.json").read_text())["max_tokens"] == 512


def test_failed_probes_are_counted_apart_and_asked_again_only_with_redo_failed(ml1m, tmp_path):
    """A request's own failure (HTTP 400) is logged, so a plain rerun does not ask it again: the summary says
    "failed", not "unanswered", and --redo-failed asks it past the cache (before, the message promised a rerun would)."""
    from recharness.core.errors import SampleError
    from recharness.models.fake import FakeBackend
    from recharness.probes.memorization import probe

    asked: list[str] = []

    class Flaky(FakeBackend):
        failing = True

        async def agenerate(self, messages, params):
            asked.append(messages[-1]["content"])
            if Flaky.failing:
                raise SampleError("http_400", "prompt rejected")
            return await super().agenerate(messages, params)

    def run(**kw):
        asked.clear()
        # no response cache: another test's "fake" answers to these prompts may be in the shared one
        res = probe(Flaky("fake"), ml1m, tmp_path, "flaky", kinds=("item",), limit=3, seed=0, use_cache=False, **kw)
        return len(asked), res["failed"], res["unanswered"]

    assert run() == (3, 3, 0)
    Flaky.failing = False
    assert run() == (0, 3, 0)  # logged failures: a plain rerun asks nothing
    assert run(redo_failed=True) == (3, 0, 0)


def test_a_kinds_sample_is_nested_across_limits_and_apart_from_the_other_kinds(ml1m):
    """Each kind's ids are the first `limit` of its own seeded permutation: limit 3 ⊂ limit 10 for every
    kind, and the item sample is the same whether users and interactions are probed beside it or not."""
    small = build_probes(ml1m, limit=3, seed=5)
    large = build_probes(ml1m, limit=10, seed=5)
    for kind in ("item", "user", "interaction"):
        a = {p.subject for p in small if p.kind == kind}
        b = {p.subject for p in large if p.kind == kind}
        assert len(a) == 3 and len(b) == 10 and a < b, kind
    alone = [p.qid for p in build_probes(ml1m, kinds=("item",), limit=10, seed=5)]
    assert alone == [p.qid for p in large if p.kind == "item"]
    other_seed = {p.subject for p in build_probes(ml1m, kinds=("item",), limit=10, seed=6)}
    assert other_seed != {p.subject for p in large if p.kind == "item"}


def test_the_probe_refuses_a_dataset_not_prepared_from_movielens_1m(ml1m, tmp_path):
    """Its questions are lines of MovieLens-1M's files: another dataset (here ML-1M's tables under another
    preparer, as `prepare amazon2023 --as x` would record) is refused before any model call."""
    import dataclasses

    from recharness.core.errors import ConfigError
    from recharness.models.fake import FakeBackend
    from recharness.probes.memorization import probe

    other = dataclasses.replace(ml1m, name="games", meta={**ml1m.meta, "preparer": "amazon2023"})
    with pytest.raises(ConfigError, match="prepared from 'amazon2023', not MovieLens-1M"):
        probe(FakeBackend("fake"), other, tmp_path, "fake", kinds=("item",), limit=2)
    assert not list(tmp_path.iterdir())  # nothing asked, nothing written
    renamed = dataclasses.replace(ml1m, name="movies")  # ML-1M prepared `--as movies` is still ML-1M
    probe(FakeBackend("fake"), renamed, tmp_path, "fake", kinds=("item",), limit=2, use_cache=False)


def test_copy_control_counts_what_copying_a_shown_line_reaches(ml1m):
    """Hand-worked: two user probes. The first's truth equals its first shown line's fields (neighbouring
    users.dat lines often do), the second's equals none. Both answered exactly: coverage 2/2, of which 1 is
    reachable by copying (control 1/2) and that one answer is such a copy (copied_hits 1)."""
    def user(uid, fields, shown):
        return Probe(f"user-{uid}@x", "user", uid, [], {"prefix": f"{uid}::", "gender": fields[0], "age": fields[1],
                                                        "occupation": fields[2], "zip": fields[3],
                                                        "copies": [f"{uid}::{s}" for s in shown]})

    a = user("5", ("M", 25, "4", "22903"), ["M::25::4::22903", "F::18::4::22901"])
    b = user("9", ("F", 35, "1", "10001"), ["M::25::4::22903"])
    answers = {a.qid: {"parsed": "5::M::25::4::22903"}, b.qid: {"parsed": "9::F::35::1::10001"}}
    res = summarise([a, b], answers, ml1m)["kinds"]["user"]
    assert res["full"]["hits"] == 2 and res["copy_control"]["hits"] == 1 and res["copied_hits"] == 1
    assert res["copy_control"]["value"] == 0.5
    # the probes built from the data carry each shown line as a copy, the asked id in front
    p = next(p for p in build_probes(ml1m, kinds=("user",), limit=3, seed=0))
    shown = p.messages[0]["content"].split("\n")[1:4]
    assert p.truth["copies"] == [p.truth["prefix"] + line.split("::", 1)[1] for line in shown]


def test_the_interaction_probe_shows_ratings_dat_in_its_own_order(ml1m):
    """ratings.dat is not in time order within a user: user 1's file begins 1193, 661, 914, 3408, 2355 (then
    1197); the prepared table, sorted by time, begins 3186. The probe shows the file's lines and asks for the
    file's next one."""
    p = next(p for p in build_probes(ml1m, kinds=("interaction",), limit=None, seed=0) if p.subject == "1")
    assert p.truth["shown"] == ["1::1193::5::978300760", "1::661::3::978302109", "1::914::3::978301968",
                                "1::3408::4::978300275", "1::2355::5::978824291"]
    assert (p.truth["item_id"], p.truth["rating"]) == ("1197", 3.0)
    assert "\n".join(p.truth["shown"]) in p.messages[0]["content"]
    assert ml1m.interactions.filter(ml1m.interactions["user_id"] == "1")["item_id"][0] == "3186"  # time order


def test_an_answer_that_echoes_the_shown_lines_is_judged_on_its_continuation():
    i = Probe("interaction-1", "interaction", "1", [], {"prefix": "1::", "item_id": "1197", "rating": 3.0,
                                                        "shown": ["1::1193::5::978300760", "1::661::3::978302109"]})
    assert check(i, "1::1193::5::978300760\n1::661::3::978302109\n1::1197::3::978302268")["full"]
    assert not check(i, "1::1193::5::978300760\n1::1196::3::978302268")["full"]


def test_the_result_file_holds_the_rules(ml1m, tmp_path):
    from recharness.models.fake import FakeBackend
    from recharness.probes.memorization import probe

    res = probe(FakeBackend("fake"), ml1m, tmp_path, "fake", kinds=("item",), limit=2, use_cache=False)
    for kind in ("**item**", "**user**", "**interaction**", "MovieID::Title::Genres", "not one of the shown lines",
                 "<think>", "curly quotes", "after other words", "holding three `::`", "fields after the compared",
                 "as a set", "5 and 5.0"):
        assert kind in res["rules"], kind


def test_the_interaction_probe_needs_the_file_prepare_read(ml1m, tmp_path):
    """Without the source file (here: metadata naming a ratings.dat that is gone) the file order is unknown:
    a ConfigError naming the file, not a probe of another order."""
    import dataclasses

    from recharness.core.errors import ConfigError

    gone = dataclasses.replace(ml1m, meta={**ml1m.meta, "source": "movielens-dat",
                                           "files": {"ratings.dat": str(tmp_path / "ratings.dat")}})
    with pytest.raises(ConfigError, match="ratings.dat .* is gone"):
        build_probes(gone, kinds=("interaction",), limit=3)
    assert build_probes(gone, kinds=("item",), limit=3)  # the other kinds do not need it


def test_interaction_coverage_by_the_movie_and_by_movie_and_rating(ml1m):
    """Three interaction probes answered: the right line, the right movie with another rating, another movie.
    The movie rule (the paper's key) counts 2 of 3, the movie-and-rating rule 1 of 3."""
    probes = build_probes(ml1m, kinds=("interaction",), limit=3, seed=0)
    answers = {}
    for k, p in enumerate(probes):
        t = p.truth
        rating = int(t["rating"]) if k == 0 else (int(t["rating"]) % 5) + 1
        movie = t["item_id"] if k < 2 else "999999"
        answers[p.qid] = {"parsed": f"{p.subject}::{movie}::{rating}::0", "valid": True}
    res = summarise(probes, answers, ml1m)["kinds"]["interaction"]
    assert res["item"]["value"] == pytest.approx(2 / 3) and res["item"]["n"] == 3
    assert res["full"]["value"] == pytest.approx(1 / 3)
