"""LLMRec rating prediction: predict the 1-5 rating a user gives their held-out last item.

Split: leave-last-out per user (the last interaction by time is the target;
users need more than `min_history` interactions). Behaviour injection shows
the user's most recent earlier items with their ratings, and their review
titles where the data has them (Amazon). The model answers a number; it is
validated by `NumberInRange(1, 5)` (validation.py) and clipped to 1..5.

How invalid answers count (nothing is dropped):
  RMSE, MAE            over valid answers only (clipped to 1..5);
  invalid_rate         share of samples with no valid answer (after the one
                       retry) or no prediction at all;
  RMSE_fb, MAE_fb      over ALL samples, an invalid or missing answer scored
                       at the worst rating (the end of 1..5 farthest from the
                       true one) — so a model can't look good by answering
                       only the easy cases, nor by failing where a guess would
                       have erred.
Reference rows, scored by the same `score`: global mean, user mean, item
mean and regularised user+item biases (mu + b_u + b_i, Koren 2010's
baseline predictor, lambda_user = 10, lambda_item = 25, solved exactly), all fitted on the
training part only: every user's last interaction is removed first, so no
target rating leaks into any reference (PerRecBench, arXiv 2501.13391,
shows such averages rival LLMs on RMSE).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TypedDict

import numpy as np
import polars as pl

from recharness.core.errors import ConfigError
from recharness.core.types import BuildConfig, GenerationParams, Parsed, reference_record
from recharness.metrics.rating import mae, rmse
from recharness.tasks.base import Task
from recharness.tasks.llmrec.common import parts_from_options, why_empty
from recharness.tasks.llmrec.prompts import domain_of
from recharness.tasks.llmrec.text_prompts import rating_prompt
from recharness.tasks.validation import NumberInRange

SCALE = (1.0, 5.0)


def worst_ratings(y: np.ndarray) -> np.ndarray:
    """What a failed answer scores as: the end of the scale farthest from each true rating (1 for a 4, 5 for a 2),
    so failing is never better than any answer on the scale."""
    low, high = SCALE
    return np.where(y - low >= high - y, low, high)


REVIEW_COLUMNS = ("review_title", "review_text")


def _title_names(title: str) -> set[str]:
    """The ways an answer may write a title that holds a digit and a letter: whole, without its year, before its
    subtitle ("Home Alone 2" for "Home Alone 2: Lost in New York"), with its article in front ("The Matrix 2" for
    "Matrix 2, The"); each only when it holds a digit. A title that is a number ("3 (2010)") gives none: "3" alone
    would hide a rating."""
    t = " ".join(str(title).split()).rstrip("…").strip()
    if not any(c.isdigit() for c in t):
        return set()
    base = re.sub(r"\s*\(\d{4}\)$", "", t).strip()
    m = re.match(r"^(.+), (The|A|An)$", base)
    short = base.split(":")[0].strip() if ":" in base else ""
    return {x for x in (t, base, short, f"{m.group(2)} {m.group(1)}" if m else "")
            if x and any(c.isdigit() for c in x) and any(c.isalpha() for c in x)}


def without_title(text: str | None, title: str | None, shown: list[str] | tuple[str, ...] = ()) -> str | None:
    """The answer with the rated item's title, where it holds a digit, read as "the item", and each other title
    the prompt `shown` (the history) as "another item": "I would rate "Toy Story 2" a 4" is 4, not the 2 of the
    title (closest to "rate", it was taken for the rating), and "4 (for reference, the rating for Toy Story 3 was
    5)" is not the 3 of a history title."""
    if not text:
        return text
    def folded(x: str) -> str:  # how a name is looked up: case and spacing aside
        return " ".join(x.lower().split())

    says = {folded(x): "another item" for t in shown for x in _title_names(t)}
    says.update({folded(x): "the item" for x in (_title_names(title) if title else ())})
    if not says:
        return text
    # one pass, longest first: a history title that holds the rated one ("Toy Story 2: Special Edition") is whole
    pattern = "|".join(re.escape(x).replace(r"\ ", r"\s+") for x in sorted(says, key=len, reverse=True))
    return re.sub(rf"(?<!\w)(?:{pattern})(?!\w)", lambda m: says.get(folded(m.group(0)), "the item"), text,
                  flags=re.IGNORECASE)


#: a history line of the rating prompt (`text_prompts.rated_history`): "3. Title (rated 4/5; review: "...")"
_HISTORY_LINE_RE = re.compile(r"^\d{1,4}\. (.+?)(?: \((?:rated [\d.]+/5)?(?:; )?(?:review: \".*\")?\))?$",
                              re.MULTILINE)


def shown_titles(sample: dict) -> list[str]:
    """The history titles the sample's prompt shows (its numbered lines; none when the prompt has no history)."""
    out = []
    for m in sample.get("messages") or ():
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, str) and m.get("role") == "user":
            out += [t for t in _HISTORY_LINE_RE.findall(content) if t]
    return out


@dataclass
class ReviewSplit:
    """One user's leave-last-out split with the review fields the data has."""

    user_id: str
    history: list[dict]  # oldest first: item_id, rating[, review_title, review_text]
    target: dict


def review_splits(interactions: pl.DataFrame, *, min_history: int = 4, limit: int | None = None, seed: int = 0,
                  require: tuple[str, ...] = (), users: tuple[str, ...] | list[str] | None = None,
                  rated: bool = False) -> list[ReviewSplit]:
    """Users with more than `min_history` interactions whose last one has non-empty `require`
    columns (and a rating, with `rated`; only `users` when given); a seeded sample of `limit` of them
    (eligibility is decided before sampling, so `--limit N` gives N samples when N users are eligible)."""
    for c in require:
        if c not in interactions.columns:
            raise ConfigError(f"interactions have no {c!r} column (have: {', '.join(interactions.columns)})")
    cols = ["item_id", "rating"] + [c for c in REVIEW_COLUMNS if c in interactions.columns]
    g = (
        interactions.select("user_id", *cols)
        .group_by("user_id", maintain_order=True)
        .agg(*(pl.col(c) for c in cols))
        .filter(pl.col("item_id").list.len() > min_history)
    )
    from recharness.tasks.validation import normalize_for_metrics

    for c in require:  # text as the metrics read it: a review of only "<br />" or tags is no reference
        g = g.filter(pl.col(c).list.last().fill_null("").map_elements(lambda t: bool(normalize_for_metrics(t)),
                                                                       return_dtype=pl.Boolean))
    if rated:  # an unrated held-out interaction (Goodreads' 0) has nothing to predict or explain
        g = g.filter(pl.col("rating").list.last().is_not_null())
    g = g.sort("user_id")
    if users is not None:
        g = g.filter(pl.col("user_id").is_in(list(users)))
    if limit is not None and limit < g.height:
        rng = np.random.default_rng(seed)
        g = g[np.sort(rng.choice(g.height, size=limit, replace=False))]
    out = []
    for row in g.iter_rows(named=True):
        rows = [dict(zip(cols, vals)) for vals in zip(*(row[c] for c in cols))]
        out.append(ReviewSplit(row["user_id"], rows[:-1], rows[-1]))
    return out


def why_no_reviews(task_name: str, dataset, min_history: int, require: tuple[str, ...] = (),
                   rated: bool = False) -> str | None:
    """Which filter of `review_splits` (and the task's own: a rated target) left a task without users, with
    its numbers: the history length, then each `require`d review field of the held-out last interaction."""
    why = why_empty(task_name, dataset, min_history)
    if why:
        return why
    cols = [c for c in (*require, *(("rating",) if rated else ())) if c in dataset.interactions.columns]
    last = (dataset.interactions.group_by("user_id", maintain_order=True)
            .agg(pl.len().alias("_n"), *(pl.col(c).last() for c in cols))
            .filter(pl.col("_n") > min_history))
    what = f"of the {last.height} users with more than min_history={min_history} interactions"
    for c in require:
        last = last.filter(pl.col(c).fill_null("").cast(pl.Utf8).str.strip_chars().str.len_chars() > 0)
        if last.is_empty():
            return (f"{task_name}: none {what} has a {c} on their held-out last interaction (the target "
                    f"needs one): use a dataset with reviews for them, or lower --option min_history")
        what += f", {last.height} with a {c}"
    if rated and not last.filter(pl.col("rating").is_not_null()).height:
        return (f"{task_name}: none {what} has a rating on their held-out last interaction (implicit feedback): "
                "use a dataset with explicit ratings")
    return None


def training_part(interactions: pl.DataFrame) -> pl.DataFrame:
    """All interactions but each user's last (the leave-last-out targets), ratings non-null."""
    df = interactions.select("user_id", "item_id", "rating").with_columns(
        pl.int_range(pl.len()).over("user_id").alias("_pos"), pl.len().over("user_id").alias("_n")
    )
    return df.filter((pl.col("_pos") < pl.col("_n") - 1) & pl.col("rating").is_not_null()).drop("_pos", "_n")


def _factorize(values) -> tuple[list, np.ndarray]:
    """(sorted distinct keys, index of each value), via polars: np.unique on 1M strings is slow."""
    s = values if isinstance(values, pl.Series) else pl.Series(list(values))
    codes = (s.rank("dense") - 1).cast(pl.Int64).to_numpy()
    keys = s.unique().sort().to_list()
    return keys, codes


def fit_biases(users, items, ratings, *, reg_user: float = 10.0, reg_item: float = 25.0,
               tol: float = 1e-10) -> tuple[float, dict, dict]:
    """mu, {user: b_u}, {item: b_i} minimising sum (r - mu - b_u - b_i)^2 + reg_user*sum b_u^2 +
    reg_item*sum b_i^2, mu the global mean. The normal equations are solved by conjugate
    gradients (SPD system; Jacobi-preconditioned, matrix-free): exact to `tol`, ~1 s on ML-1M,
    where plain alternating updates need hundreds of passes."""
    from scipy.sparse.linalg import LinearOperator, cg

    r = np.asarray(ratings, dtype=np.float64)
    if r.size == 0:
        raise ValueError("no training ratings to fit biases on")
    if reg_user <= 0 or reg_item <= 0:
        raise ValueError("regularisation must be positive (the biases are not identifiable otherwise)")
    uk, u = _factorize(users)
    ik, i = _factorize(items)
    nu, ni = len(uk), len(ik)
    mu = float(r.mean())
    du = np.bincount(u, minlength=nu) + reg_user
    di = np.bincount(i, minlength=ni) + reg_item

    def matvec(x):
        xu, xi = x[:nu], x[nu:]
        return np.concatenate([du * xu + np.bincount(u, xi[i], minlength=nu), di * xi + np.bincount(i, xu[u], minlength=ni)])

    op = LinearOperator((nu + ni, nu + ni), matvec=matvec, dtype=np.float64)
    jacobi = LinearOperator((nu + ni, nu + ni), matvec=lambda x: x / np.concatenate([du, di]), dtype=np.float64)
    rhs = np.concatenate([np.bincount(u, r - mu, minlength=nu), np.bincount(i, r - mu, minlength=ni)])
    x, info = cg(op, rhs, rtol=tol, atol=0.0, M=jacobi, maxiter=10_000)
    if info != 0:
        raise RuntimeError(f"bias fit did not converge (cg info {info})")
    return mu, dict(zip(uk, x[:nu].tolist())), dict(zip(ik, x[nu:].tolist()))


def _item_about(row: dict, domain: str) -> str:
    if domain == "movie":
        bits = []
        if row.get("genres"):
            bits.append(", ".join(row["genres"][:3]))
        return "; ".join(bits)
    return str(row.get("main_category") or "")


def item_info(dataset) -> tuple[dict[str, str], dict[str, str]]:
    """{item_id: title} (untitled items named by id) and {item_id: short description}."""
    domain = domain_of(dataset.name, dataset.meta)
    titles, about = {}, {}
    cols = [c for c in ("item_id", "title", "genres", "main_category") if c in dataset.items.columns]
    for row in dataset.items.select(cols).iter_rows(named=True):
        titles[row["item_id"]] = row.get("title") or f"item {row['item_id']}"
        about[row["item_id"]] = _item_about(row, domain)
    return titles, about


class RatingAnswer(TypedDict):
    """A rating answer: the predicted rating on the dataset's scale."""

    value: float


class RatingTask(Task):
    #: over every sample, an invalid or missing answer scored at the worst rating the scale allows (the end of
    #: 1-5 farthest from the true one): "RMSE" covers only a row's valid answers, so two rows with different
    #: invalid rates are judged on different samples there; the headline (bold marks' summary, the verdict against
    #: the strongest reference) must not be. Until 2026-11-30 a failure got the user's mean, the `user_mean`
    #: reference's own answer: a model failing 285 of 300 samples and answering 15 well was marked best and
    #: "beat" that reference (a failure is never an answer, nor one as good as a reference's)
    headline = "RMSE_fb"
    name = "rating"
    selects_users = True  # honours BuildConfig.users (build --users FILE)
    output_format = NumberInRange(*SCALE)
    format_reminder = "Please answer with a single number from 1 to 5 and nothing else."
    params = GenerationParams(max_tokens=48)
    answer_type = RatingAnswer
    reg_user = 10.0
    reg_item = 25.0

    def setup(self, dataset, context=None) -> None:
        return None

    def build(self, dataset, config: BuildConfig):
        rated = dataset.interactions["rating"].drop_nulls() if "rating" in dataset.interactions.columns else None
        if rated is None or rated.len() == 0:
            raise ConfigError(f"{dataset.name} has no ratings (implicit feedback only): rating prediction needs a "
                              "dataset with explicit ratings, e.g. ml-1m or amazon2023")
        low, high = float(rated.min()), float(rated.max())
        if low < SCALE[0] or high > SCALE[1]:  # the prompt, the parser and the references all read 1-5
            raise ConfigError(f"{dataset.name}'s ratings run from {low:g} to {high:g}: the rating task asks for and "
                              f"reads ratings on a {SCALE[0]:g}-{SCALE[1]:g} scale (the paper's), so a history shown as "
                              f"'rated {high:g}/{SCALE[1]:g}' and a right answer outside it would be invalid; prepare "
                              "the ratings on that scale")
        opts = config.options
        hist_len = int(opts.get("history_len", 10))
        parts = parts_from_options(opts)
        domain = domain_of(dataset.name, dataset.meta)
        titles, about = item_info(dataset)
        splits = review_splits(dataset.interactions, min_history=int(opts.get("min_history", 4)), limit=config.limit,
                               seed=config.seed, users=config.users, rated=True)
        if not splits:  # `why_empty` says which filter, with its numbers
            return
        global_mean = float(training_part(dataset.interactions)["rating"].mean())
        for sp in splits:
            if sp.target.get("rating") is None:
                continue  # implicit feedback: nothing to predict (counted as absent, not invalid)
            rated = [h["rating"] for h in sp.history if h.get("rating") is not None]
            shown = [
                {"title": titles.get(h["item_id"], h["item_id"]), "rating": h.get("rating"), "review_title": h.get("review_title")}
                for h in sp.history[-hist_len:]
            ]
            item = {"title": titles.get(sp.target["item_id"], sp.target["item_id"]), "about": about.get(sp.target["item_id"], "")}
            yield {
                "id": f"rating-{sp.user_id}",
                "task": self.name,
                "user_id": sp.user_id,
                "item_id": sp.target["item_id"],
                "item_title": item["title"],
                "target_rating": float(sp.target["rating"]),
                "user_mean": float(np.mean(rated)) if rated else global_mean,
                "n_history": len(sp.history),
                "messages": rating_prompt(domain, item, shown, parts, int(SCALE[0]), int(SCALE[1])),
                "output_format": self.output_format.to_dict(),
                "max_tokens": opts.get("max_tokens"),  # --option max_tokens=N overrides the task default
                "prompt_parts": parts.to_dict(),
            }

    def why_empty(self, dataset, config: BuildConfig) -> str | None:
        return why_no_reviews(self.name, dataset, int(config.options.get("min_history", 4)), rated=True)

    def parse(self, sample: dict, text: str) -> Parsed:
        return self.output_format.check(without_title(text, sample.get("item_title"), shown_titles(sample)))

    def import_answer(self, sample: dict, line: dict):
        """An imported `rating` given as a number is that number (a regressor's 3.8765432 keeps its digits; as
        text it would be read with at most 4 decimals, and a longer one not at all); any other answer is text."""
        x = line.get("rating")
        if line.get("answer") is not None or isinstance(x, bool) or not isinstance(x, int | float):
            return None
        try:
            x_float = float(x)
        except OverflowError:  # an int too large for a float: out of any rating range
            x_float = math.inf
        p = self.output_format.check_number(x_float)
        return {"parsed": p.value, "valid": p.valid, "error": p.error, "output": repr(x)}, None

    def _answers(self, samples, predictions) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
        """True ratings, predicted ratings (NaN: no valid answer), predictions with each missing one at the worst
        rating (`worst_ratings`), clipped flags, and the number of samples without a prediction line."""
        n = len(samples)
        y = np.array([s["target_rating"] for s in samples], dtype=np.float64)
        pred = np.full(n, np.nan)
        clipped = np.zeros(n, dtype=bool)
        missing = 0
        for k, s in enumerate(samples):
            p = predictions.get(s["id"])
            if p is None:
                missing += 1
                continue
            v = (p.get("parsed") or {}).get("value") if p.get("valid", True) else None
            if v is not None:
                pred[k] = float(v)
                clipped[k] = bool((p.get("parsed") or {}).get("clipped"))
        ok = ~np.isnan(pred)
        fallback = np.where(ok, pred, worst_ratings(y))
        return y, pred, fallback, clipped, missing

    def score(self, samples, predictions):
        n = len(samples)
        if n == 0:
            return {}
        y, pred, fallback, clipped, missing = self._answers(samples, predictions)
        ok = ~np.isnan(pred)
        return {
            "RMSE": rmse(y[ok], pred[ok], clip=SCALE) if ok.any() else float("nan"),
            "MAE": mae(y[ok], pred[ok], clip=SCALE) if ok.any() else float("nan"),
            # a row with no valid answer has the worst values the scale allows: what never answering is worth
            "RMSE_fb": rmse(y, fallback, clip=SCALE),
            "MAE_fb": mae(y, fallback, clip=SCALE),
            "invalid_rate": float((~ok).sum() / n),
            "clipped_rate": float(clipped.sum() / n),
            "missing": float(missing),
        }

    def units(self, samples, predictions):
        """Per-sample errors: RMSE/MAE over valid answers (a mean over a subset, RMSE its square root),
        the fallback versions over all samples (a failure at the worst rating), and the rates."""
        from recharness.metrics.bootstrap import RatioUnits, mean_units

        if not samples:
            return {}
        ids = [s["id"] for s in samples]
        y, pred, fallback, clipped, _ = self._answers(samples, predictions)
        ok = ~np.isnan(pred)
        err = np.where(ok, np.clip(np.where(ok, pred, 0.0), *SCALE) - y, 0.0)
        fb = np.clip(fallback, *SCALE) - y
        out = {
            "invalid_rate": mean_units(ids, ~ok, how="mean over samples"),
            "clipped_rate": mean_units(ids, clipped, how="mean over samples"),
            "RMSE_fb": RatioUnits(ids, fb ** 2, transform="sqrt", how="root of the mean squared error over samples"),
            "MAE_fb": mean_units(ids, np.abs(fb), how="mean over samples"),
        }
        if ok.any():
            out["RMSE"] = RatioUnits(ids, err ** 2, ok, transform="sqrt", how="root of the mean squared error over valid answers")
            out["MAE"] = mean_units(ids, np.abs(err), ok, how="mean over valid answers")
        return out

    def references(self, dataset, samples, seed: int = 0):
        train = training_part(dataset.interactions)
        mu, bu, bi = fit_biases(train["user_id"], train["item_id"], train["rating"].to_numpy(),
                                reg_user=self.reg_user, reg_item=self.reg_item)
        user_mean = dict(train.group_by("user_id").agg(pl.col("rating").mean()).iter_rows())
        item_mean = dict(train.group_by("item_id").agg(pl.col("rating").mean()).iter_rows())

        def rec(s, v):
            return reference_record(s["id"], {"value": float(v)}, output=f"{v:.4f}")

        out: dict[str, dict] = {"global_mean": {}, "user_mean": {}, "item_mean": {}, "user_item_bias": {}}
        for s in samples:
            u, i = s["user_id"], s["item_id"]
            out["global_mean"][s["id"]] = rec(s, mu)
            out["user_mean"][s["id"]] = rec(s, user_mean.get(u, mu))
            out["item_mean"][s["id"]] = rec(s, item_mean.get(i, mu))
            out["user_item_bias"][s["id"]] = rec(s, mu + bu.get(u, 0.0) + bi.get(i, 0.0))
        return out
