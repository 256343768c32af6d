"""Analysis plans: the eight choices of an analysis, declared in a TOML file before the data.

Cluster choice, interval method and tie handling are researcher degrees of freedom: the
same table gives different intervals under each. An analysis plan fixes them in advance
(Hernán & Robins' target-trial spirit; Nosek et al. 2018 on preregistration), so a report
can say which result was declared primary and which numbers are exploratory. The file
holds the eight items

1. ``[primary] estimand`` (and optionally ``contrast``): the primary estimand;
2. ``[primary] cluster``: the primary cluster unit (a role, ``"a:b"`` for an interaction
   cell, ``"a+b"`` for multiway, ``"none"``);
3. ``[fallback]``: what to do when the primary cluster has fewer than ``min_clusters``
   levels (another ``cluster`` and/or ``method``);
4. ``[sensitivity] clusters``: the sensitivity cluster levels;
5. ``[interval] method``: the interval method;
6. ``[interval] reps``: the bootstrap replicate count;
7. ``ties``: the tie handling of pairwise verdicts;
8. ``judges``: the judge pooling rule,

and is read with :func:`read_plan` into an :class:`AnalysisPlan`. This module checks the
file on its own and against a table's roles (:meth:`AnalysisPlan.problems`); the report
layer (:mod:`evalmix.report.planned`) resolves the plan against the data (fallback,
deviations) and labels the report's rows.

References
----------
Nosek, B. A. et al. (2018). The preregistration revolution. PNAS 115(11), 2600-2606.
https://doi.org/10.1073/pnas.1708274114
"""

from __future__ import annotations

import hashlib
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, get_args

from evalmix.data.table import INTERACTION_SEP, is_judge_role
from evalmix.errors import InvalidOptionError
from evalmix.vocabulary import JudgeRule, PlanEstimand

if TYPE_CHECKING:
    from evalmix.data.table import EvalTable

__all__ = ["AnalysisPlan", "read_plan", "PLAN_ESTIMANDS", "JUDGE_RULES", "PLAN_EXAMPLE"]

#: Estimands a plan may declare primary (the report's contrasts).
PLAN_ESTIMANDS: tuple[str, ...] = get_args(PlanEstimand)
#: Judge pooling rules: one estimate over the judges held fixed (``pooled``), one per
#: judge (``per_judge``), or judges as a sample of possible judges (``sampled``: the judge
#: role must be part of the primary cluster).
JUDGE_RULES: tuple[str, ...] = get_args(JudgeRule)
_TIES = ("exclude", "half", "separate")

#: A complete plan, as ``evalmix plan check`` prints it for a plan that lacks keys.
PLAN_EXAMPLE = """\
ties = "half"                  # 7. tie handling: exclude, half or separate
judges = "pooled"              # 8. judge pooling rule: pooled, per_judge or sampled

[primary]
estimand = "win_rate"          # 1. mean, win_rate, controlled_win_rate or difference
cluster = "item"               # 2. a role, "a:b" (cell), "a+b" (multiway) or "none"

[fallback]                     # 3. when the primary cluster has too few levels
min_clusters = 20
method = "wild"                #    and/or cluster = "..."

[sensitivity]
clusters = ["judge"]           # 4. sensitivity cluster levels

[interval]
method = "CR2"                 # 5. naive, wilson, CR1, CR2, CR3, bootstrap or wild
reps = 2000                    # 6. bootstrap replicates
"""

#: Keys of each table of the file, and where each of the eight items lives.
_LAYOUT: dict[str, tuple[str, ...]] = {
    "": ("ties", "judges", "title", "primary", "fallback", "sensitivity", "interval"),
    "primary": ("estimand", "contrast", "cluster"),
    "fallback": ("min_clusters", "cluster", "method"),
    "sensitivity": ("clusters",),
    "interval": ("method", "reps", "level"),
}
_REQUIRED: tuple[tuple[str, str, str, str], ...] = (
    ("primary", "estimand", "1 (primary estimand)", 'estimand = "win_rate"'),
    ("primary", "cluster", "2 (primary cluster unit)", 'cluster = "item"'),
    ("fallback", "min_clusters", "3 (fallback if clusters are too few)", "min_clusters = 20"),
    ("sensitivity", "clusters", "4 (sensitivity cluster levels)",
     'clusters = ["judge"] (or [] for none)'),
    ("interval", "method", "5 (interval method)", 'method = "CR2"'),
    ("interval", "reps", "6 (bootstrap replicate count)", "reps = 2000"),
    ("", "ties", "7 (tie handling)", 'ties = "half"'),
    ("", "judges", "8 (judge pooling rule)", 'judges = "pooled"'),
)


def _key(table: str, key: str) -> str:
    return f"[{table}] {key}" if table else key


@dataclass(frozen=True)
class AnalysisPlan:
    """An analysis plan read from a TOML file (:func:`read_plan`).

    Attributes
    ----------
    estimand : {"mean", "win_rate", "controlled_win_rate", "difference"}
        The primary estimand.
    contrasts : tuple of str
        The primary contrasts as the report labels them (``"B vs A"``, ``"B - A"``);
        empty: every contrast of the estimand.
    cluster : str
        The primary cluster unit: a role, ``"a:b"``, ``"a+b"`` or ``""`` (none).
    min_clusters : int
        The primary cluster needs at least this many levels, else the fallback is used.
    fallback_cluster, fallback_method : str or None
        The cluster unit and interval method used instead (None: the primary one).
    sensitivity : tuple of str
        Sensitivity cluster levels (same spelling as ``cluster``).
    method : str
        The interval method (``naive, wilson, CR1, CR2, CR3, bootstrap, wild``).
    reps : int
        Bootstrap replicates.
    level : float
        Confidence level (default 0.95).
    ties : {"exclude", "half", "separate"}
        Tie handling of pairwise verdicts.
    judges : {"pooled", "per_judge", "sampled"}
        Judge pooling rule.
    title : str
        Free text naming the plan (optional).
    path : str
        The file read.
    sha256 : str
        SHA-256 of the file's bytes: the plan's identity in the report.
    raw : Mapping
        The file's contents as parsed.
    """

    estimand: str
    cluster: str
    min_clusters: int
    method: str
    reps: int
    ties: str
    judges: str
    contrasts: tuple[str, ...] = ()
    fallback_cluster: str | None = None
    fallback_method: str | None = None
    sensitivity: tuple[str, ...] = ()
    level: float = 0.95
    title: str = ""
    path: str = ""
    sha256: str = ""
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "raw", MappingProxyType(dict(self.raw)))

    # ------------------------------------------------------------------ helpers
    def error(self, key: str, value: object, fix: str) -> InvalidOptionError:
        """An :class:`InvalidOptionError` naming this plan's file, ``key`` and value."""
        return InvalidOptionError(f"analysis plan {self.path!r}: {key} = {value!r} {fix}")

    def levels(self) -> dict[str, str]:
        """Every cluster level the plan names, by the key that names it."""
        out = {"[primary] cluster": self.cluster}
        if self.fallback_cluster is not None:
            out["[fallback] cluster"] = self.fallback_cluster
        for i, lv in enumerate(self.sensitivity):
            out[f"[sensitivity] clusters[{i}]"] = lv
        return out

    def items(self) -> dict[str, Any]:
        """The eight items, JSON-ready, for the report's summary."""
        return {
            "primary_estimand": self.estimand,
            "primary_contrasts": list(self.contrasts),
            "primary_cluster": self.cluster or "none",
            "fallback": {"min_clusters": self.min_clusters,
                         "cluster": self.fallback_cluster, "method": self.fallback_method},
            "sensitivity_clusters": [lv or "none" for lv in self.sensitivity],
            "interval_method": self.method,
            "reps": self.reps,
            "level": self.level,
            "ties": self.ties,
            "judges": self.judges,
        }

    def problems(self, table: EvalTable) -> list[str]:
        """What keeps this plan from applying to ``table`` (empty: it applies).

        Checks that every cluster level names the table's roles, that the estimand
        fits the table (pairwise or scores, order known), that the table was read with
        the plan's tie handling, and that the judge rule finds a judge role. Each
        problem names the key, the value and the fix.
        """
        out: list[str] = []
        for key, lv in self.levels().items():
            for role in _roles_of(lv):
                if role not in table.roles.clusters:
                    known = ", ".join(repr(r) for r in table.roles.clusters) or "none"
                    out.append(f"{key} = {lv!r}: {role!r} is not a cluster role of the "
                               f"table (its roles: {known}); name one of them, or declare the "
                               f"column at read time (--cluster {role}=COLUMN)")
        pairwise = table.kind == "pairwise"
        if self.estimand in ("win_rate", "controlled_win_rate") and not pairwise:
            out.append(f"[primary] estimand = {self.estimand!r} needs a pairwise table "
                       "(model_a/model_b columns); this is a scores table: declare \"mean\" "
                       "or \"difference\"")
        if self.estimand == "mean" and pairwise:
            out.append("[primary] estimand = 'mean' is for scores tables; this table is "
                       "pairwise: declare \"win_rate\", \"controlled_win_rate\" or "
                       "\"difference\"")
        if self.estimand == "controlled_win_rate" and pairwise and not table.has_order:
            out.append("[primary] estimand = 'controlled_win_rate' needs the order column "
                       "(--first-shown COLUMN); read the table with it, or declare "
                       "\"win_rate\"")
        if pairwise and table.ties != self.ties:
            out.append(f"ties = {self.ties!r}, but the table was read with ties "
                       f"{table.ties!r}; read it again with ties={self.ties!r} (--ties "
                       f"{self.ties}), or change the plan before seeing the results")
        judges = [r for r in table.clusters if is_judge_role(r)]
        if self.judges in ("per_judge", "sampled") and not judges:
            out.append(f"judges = {self.judges!r}, but the table has no judge role; declare "
                       "it (--cluster judge=COLUMN), or use judges = \"pooled\"")
        if self.judges == "sampled" and judges:
            if not any(r in judges for r in _roles_of(self.cluster)):
                out.append(f"judges = 'sampled' treats the judges as a sample, so the primary "
                           f"cluster must include the judge role {judges[0]!r}; [primary] "
                           f"cluster = {self.cluster or 'none'!r} does not: use cluster = "
                           f"\"{self.cluster + '+' if self.cluster else ''}{judges[0]}\"")
        if self.judges == "pooled" and any(r in judges for r in _roles_of(self.cluster)):
            out.append(f"judges = 'pooled' holds the judges fixed, but [primary] cluster = "
                       f"{self.cluster!r} treats them as sampled; use judges = \"sampled\", "
                       "or drop the judge role from the primary cluster")
        return out


def _roles_of(level: str) -> list[str]:
    """The plain roles a cluster level names (``"a:b+c"`` -> ``a, b, c``)."""
    return [p for part in level.split("+") for p in part.split(INTERACTION_SEP) if p]


def _level(value: object, key: str, path: str) -> str:
    """A cluster level as written in the plan: ``""`` for none."""
    if not isinstance(value, str):
        raise InvalidOptionError(
            f"analysis plan {path!r}: {key} = {value!r} must be a role name in quotes "
            "(e.g. \"item\", \"persona:scenario\" for a cell, \"item+judge\" for multiway, "
            "\"none\")")
    text = "+".join(p.strip() for p in value.split("+"))
    if text.lower() in ("", "none"):
        return ""
    if any(not p for p in text.split("+")):
        raise InvalidOptionError(
            f"analysis plan {path!r}: {key} = {value!r} has an empty part; write roles "
            "joined by '+' (multiway) or ':' (cell), e.g. \"item+judge\"")
    return text


def _choice(spec: Mapping[str, Any], table: str, key: str, allowed: tuple[str, ...],
            path: str) -> str:
    value = spec[key]
    if value not in allowed:
        raise InvalidOptionError(
            f"analysis plan {path!r}: {_key(table, key)} = {value!r} is not one of "
            f"{', '.join(repr(a) for a in allowed)}; write one of them")
    return str(value)


def _string(value: object, key: str, path: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidOptionError(f"analysis plan {path!r}: {key} = {value!r} must be a "
                                 "non-empty string in quotes")
    return value.strip()


def read_plan(path: str | os.PathLike[str]) -> AnalysisPlan:
    """Read and check an analysis plan (TOML) written before the analysis.

    Parameters
    ----------
    path : path
        The plan file (see ``docs/plans.md`` and :data:`PLAN_EXAMPLE`).

    Returns
    -------
    AnalysisPlan
        With the file's SHA-256 (``sha256``) recorded.

    Raises
    ------
    InvalidOptionError
        A missing file, invalid TOML, an unknown or missing key, or a value of the
        wrong type or outside its choices: the message names the file, the key, the
        value and the fix. Whether the plan fits a table is
        :meth:`AnalysisPlan.problems`.

    Examples
    --------
    >>> import evalmix
    >>> plan = evalmix.read_plan("plan.toml")  # doctest: +SKIP
    >>> plan.cluster, plan.sha256[:12]  # doctest: +SKIP
    ('item', '3f0c9a51d2be')
    """
    p = Path(path)
    where = str(p)
    if not p.is_file():
        raise InvalidOptionError(f"analysis plan {where!r} does not exist; check the path")
    data = p.read_bytes()
    try:
        spec = tomllib.loads(data.decode("utf-8-sig"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InvalidOptionError(f"analysis plan {where!r} is not valid TOML ({exc}); see "
                                 "docs/plans.md for an example") from None
    for table, keys in _LAYOUT.items():
        part = spec if not table else spec.get(table, {})
        if not isinstance(part, dict):
            raise InvalidOptionError(f"analysis plan {where!r}: {table} = {part!r} must be a "
                                     f"table: write [{table}] on its own line, then its keys")
        unknown = sorted(set(part) - set(keys))
        if unknown:
            raise InvalidOptionError(
                f"analysis plan {where!r}: unknown key {_key(table, unknown[0])!r}"
                f"{f' (and {len(unknown) - 1} more)' if len(unknown) > 1 else ''}; the keys "
                f"{'of [' + table + ']' if table else 'at the top'} are "
                f"{', '.join(k for k in keys if table or k not in _LAYOUT)}")
    missing = [(t, k, item, ex) for t, k, item, ex in _REQUIRED
               if k not in (spec.get(t, {}) if t else spec)]
    if missing:
        t, k, item, ex = missing[0]
        more = f" ({len(missing) - 1} more item(s) missing too)" if len(missing) > 1 else ""
        raise InvalidOptionError(
            f"analysis plan {where!r}: missing {_key(t, k)}, item {item}; add "
            f"{ex}{' under [' + t + ']' if t else ' at the top, before any [table]'}{more}")
    primary, fallback = spec["primary"], spec["fallback"]
    interval = spec["interval"]
    estimand = _choice(primary, "primary", "estimand", PLAN_ESTIMANDS, where)
    contrast = primary.get("contrast", [])
    if isinstance(contrast, str):
        contrast = [contrast]
    if not isinstance(contrast, list) or not all(isinstance(c, str) and c.strip()
                                                 for c in contrast):
        raise InvalidOptionError(
            f"analysis plan {where!r}: [primary] contrast = {primary['contrast']!r} must be "
            "a contrast label or a list of them, as intervals.csv spells them (e.g. "
            "\"gpt-4 vs vicuna\")")
    min_clusters = fallback["min_clusters"]
    if isinstance(min_clusters, bool) or not isinstance(min_clusters, int) or min_clusters < 2:
        raise InvalidOptionError(
            f"analysis plan {where!r}: [fallback] min_clusters = {min_clusters!r} must be a "
            "whole number >= 2 (e.g. 20: fewer levels than this trigger the fallback)")
    if "cluster" not in fallback and "method" not in fallback:
        raise InvalidOptionError(
            f"analysis plan {where!r}: [fallback] says when (min_clusters = {min_clusters}) "
            "but not what: add cluster = \"...\" and/or method = \"...\" (e.g. method = "
            "\"wild\", which holds its level with few clusters)")
    sens = spec["sensitivity"]["clusters"]
    if not isinstance(sens, list):
        raise InvalidOptionError(
            f"analysis plan {where!r}: [sensitivity] clusters = {sens!r} must be a list, "
            "e.g. [\"judge\", \"item+judge\"] ([] for none)")
    reps = interval["reps"]
    if isinstance(reps, bool) or not isinstance(reps, int) or reps < 2:
        raise InvalidOptionError(
            f"analysis plan {where!r}: [interval] reps = {reps!r} must be a whole number "
            ">= 2 (e.g. 2000)")
    level = interval.get("level", 0.95)
    if isinstance(level, bool) or not isinstance(level, int | float) or not 0 < level < 1:
        raise InvalidOptionError(
            f"analysis plan {where!r}: [interval] level = {level!r} must be a number "
            "between 0 and 1 (e.g. 0.95)")
    return AnalysisPlan(
        estimand=estimand,
        contrasts=tuple(c.strip() for c in contrast),
        cluster=_level(primary["cluster"], "[primary] cluster", where),
        min_clusters=int(min_clusters),
        fallback_cluster=(_level(fallback["cluster"], "[fallback] cluster", where)
                          if "cluster" in fallback else None),
        fallback_method=(_string(fallback["method"], "[fallback] method", where)
                         if "method" in fallback else None),
        sensitivity=tuple(_level(v, f"[sensitivity] clusters[{i}]", where)
                          for i, v in enumerate(sens)),
        method=_string(interval["method"], "[interval] method", where),
        reps=int(reps), level=float(level),
        ties=_choice(spec, "", "ties", _TIES, where),
        judges=_choice(spec, "", "judges", JUDGE_RULES, where),
        title=_string(spec["title"], "title", where) if "title" in spec else "",
        path=where, sha256=hashlib.sha256(data).hexdigest(), raw=spec,
    )
