"""The suite's --option keys, their defaults, and checks that name the bad option.

Prompts and scoring
  history=both|with|without   prompt variants (Appendix G); `--no-history` means without
  k=N                         ask for N items (Appendix F); default open-ended, as in the paper
  history_len=20              most recent history items shown (ground truth removed first)
  max_tokens=200              answer length
  query_field=situational     which query text to ask (situational | direct)
  ref_k=10                    list length of the reference methods for open-ended queries
Condition queries
  per_user=1  min_gt=2  max_gt=10  specific=true  mix=paper|a,b,c  misinfo_items=1
Profile queries
  interest_len=3  interest_support=5 (theta)  interest_prev=3
  demo_groups=10  demo_min_users=20  demo_top=10
Query text
  phrase_model=SPEC           write queries with this model and the Appendix H prompts
  phrase_max_tokens=200
Official files
  official_dir=DIR            load ExplicitQuery.json, ..., UserBasedQuery.json found there
  <task>_file=PATH            load one file, e.g. demographics_file=.../UserBasedQuery.json
  write_official=true         write built queries in the official layout to <run dir>/recbench_plus/
`--limit N` caps the queries per task (users/sets/groups drawn by --seed).
"""

from __future__ import annotations

from dataclasses import dataclass

from recharness.errors import ConfigError


@dataclass(frozen=True)
class Options:
    history: tuple[bool, ...]  # which prompt variants: True = with the user's history
    k: int | None  # fixed K (Appendix F) or None = open-ended (the paper's default)
    history_len: int
    max_tokens: int
    ref_k: int  # list length of the reference methods for open-ended queries
    query_field: str
    per_user: int
    min_gt: int
    max_gt: int
    specific: bool
    mix: tuple[float, float, float] | None  # None = the paper's Table 1 mix for the query type
    misinfo_items: int
    interest_len: int
    interest_support: int
    interest_prev: int
    demo_groups: int
    demo_min_users: int
    demo_top: int
    phrase_model: str | None
    phrase_max_tokens: int
    write_official: bool


def _int(opts: dict, key: str, default: int, lo: int = 0) -> int:
    v = opts.get(key, default)
    try:
        n = int(v)
    except (TypeError, ValueError):
        raise ConfigError(f"--option {key}={v!r}: expected an integer") from None
    if n < lo:
        raise ConfigError(f"--option {key}={v!r}: must be >= {lo}")
    return n


def _bool(opts: dict, key: str, default: bool) -> bool:
    v = opts.get(key, default)
    if isinstance(v, bool):
        return v
    if str(v).lower() in ("1", "true", "yes", "on"):
        return True
    if str(v).lower() in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"--option {key}={v!r}: expected true or false")


def parse_options(opts: dict) -> Options:
    h = str(opts.get("history", "both")).lower()
    if opts.get("behaviour") is False:  # `recharness build --no-history`
        h = "without"
    variants = {"both": (True, False), "with": (True,), "without": (False,)}
    if h not in variants:
        raise ConfigError(f"--option history={h!r}: expected both, with or without")
    k = opts.get("k")
    k = None if k in (None, "", 0, "0", "none", "None") else _int(opts, "k", 0, lo=1)
    qf = str(opts.get("query_field", "situational"))
    if qf not in ("situational", "direct"):
        raise ConfigError(f"--option query_field={qf!r}: expected situational or direct")
    mix = opts.get("mix", "paper")
    if mix in (None, "paper"):
        mix_t = None
    else:
        try:
            parts = tuple(float(x) for x in str(mix).split(","))
        except ValueError:
            raise ConfigError(f"--option mix={mix!r}: expected 'paper' or three weights like 0.45,0.47,0.08") from None
        if len(parts) != 3 or min(parts) < 0 or sum(parts) <= 0:
            raise ConfigError(f"--option mix={mix!r}: expected three non-negative weights (1, 2, 3-4 conditions)")
        mix_t = tuple(p / sum(parts) for p in parts)
    min_gt = _int(opts, "min_gt", 2, lo=2)
    max_gt = _int(opts, "max_gt", 10, lo=min_gt)
    pm = opts.get("phrase_model")
    return Options(
        history=variants[h],
        k=k,
        history_len=_int(opts, "history_len", 20, lo=0),
        max_tokens=_int(opts, "max_tokens", 200, lo=1),
        ref_k=_int(opts, "ref_k", 10, lo=1),
        query_field=qf,
        per_user=_int(opts, "per_user", 1, lo=1),
        min_gt=min_gt,
        max_gt=max_gt,
        specific=_bool(opts, "specific", True),
        mix=mix_t,  # type: ignore[arg-type]
        misinfo_items=_int(opts, "misinfo_items", 1, lo=1),
        interest_len=_int(opts, "interest_len", 3, lo=2),
        interest_support=_int(opts, "interest_support", 5, lo=2),
        interest_prev=_int(opts, "interest_prev", 3, lo=1),
        demo_groups=_int(opts, "demo_groups", 10, lo=1),
        demo_min_users=_int(opts, "demo_min_users", 20, lo=1),
        demo_top=_int(opts, "demo_top", 10, lo=1),
        phrase_model=str(pm) if pm not in (None, "", False) else None,
        phrase_max_tokens=_int(opts, "phrase_max_tokens", 200, lo=16),
        write_official=_bool(opts, "write_official", True),
    )
