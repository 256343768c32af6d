"""Build a :class:`~evalmix.models.spec.ModelSpec` from an EvalTable's roles or a formula.

Resolves formula names to design columns (treatment-coded condition or Bradley-Terry
abilities, position, cluster dummies, random-term codes), picks the response and family
from the table, and writes the default formula from the roles. The pairwise
parameterisations (baseline and Bradley-Terry designs) are described under *Pairwise
tables* in :mod:`evalmix.models.spec`; import :func:`build_spec` from there.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Any, TypedDict, Unpack

import numpy as np
import pandas as pd

from evalmix.errors import EvalmixError, InvalidOptionError, check_keywords
from evalmix.families import family_name
from evalmix.models.spec._formula import parse_formula
from evalmix.models.spec._maximal import maximal_slopes
from evalmix.models.spec._spec_types import ModelSpec, RandomTerm, _readonly


# ---------------------------------------------------------------------------- columns
def _treatment(labels: np.ndarray, prefix: str, reference: str | None = None
               ) -> tuple[list[str], list[np.ndarray], tuple[str, ...], str]:
    levels = tuple(sorted(pd.unique(labels).astype(str)))
    ref = levels[0] if reference is None else reference
    if ref not in levels:
        raise InvalidOptionError(f"reference level {ref!r} is not a level of {prefix} ({levels})")
    names, cols = [], []
    for lev in levels:
        if lev != ref:
            names.append(f"{prefix}[{lev}]")
            cols.append((labels == lev).astype(float))
    return names, cols, levels, ref


class _Columns:
    """Resolves formula names to design columns for one table."""

    def __init__(self, table, *, reference: str | None):
        self.table = table
        d = table.data
        self.d = d
        self.kind = table.kind
        self.clusters = tuple(table.clusters)
        self.design = "scores"
        self.reference = reference
        self.contrasts: list[tuple[str, np.ndarray]] = []
        if self.kind == "pairwise":
            a = d["model_a"].astype(str).to_numpy()
            self.design = "baseline" if len(pd.unique(a)) == 1 else "bradley-terry"

    # each resolver returns (names, cols)
    def condition(self) -> tuple[list[str], list[np.ndarray]]:
        d = self.d
        if self.kind == "scores":
            if "condition" not in d.columns:
                raise EvalmixError("the term 'condition' needs a condition column; pass "
                                   "condition=... to evalmix.read")
            names, cols, _, ref = _treatment(d["condition"].astype(str).to_numpy(),
                                             "condition", self.reference)
            self.reference = ref
            return names, cols
        a = d["model_a"].astype(str).to_numpy()
        b = d["model_b"].astype(str).to_numpy()
        if self.design == "baseline":
            names, cols, _, ref = _treatment(b, "condition", self.reference)
            self.reference = ref
            return names, cols
        levels = tuple(sorted(set(a) | set(b)))
        ref = levels[0] if self.reference is None else self.reference
        if ref not in levels:
            raise InvalidOptionError(f"reference level {ref!r} is not one of the models {levels}")
        self.reference = ref
        names, cols = [], []
        for lev in levels:
            if lev != ref:
                names.append(f"model[{lev}]")
                cols.append((a == lev).astype(float) - (b == lev).astype(float))
        return names, cols

    def position(self) -> tuple[list[str], list[np.ndarray]]:
        d = self.d
        if self.kind == "pairwise":
            if not self.table.has_order:
                raise EvalmixError("the term 'position' needs to know which answer was shown "
                                   "first; pass first_shown=... to evalmix.read")
            af = d["a_first"].to_numpy(dtype=float)
            x = af - 0.5 if self.design == "bradley-terry" else 0.5 - af
            return ["position"], [np.nan_to_num(x, nan=0.0)]
        if "position" not in d.columns:
            raise EvalmixError("the term 'position' needs a position column; pass "
                               "position=... to evalmix.read")
        x = pd.to_numeric(d["position"], errors="coerce").to_numpy(dtype=float)
        if np.isnan(x).any():
            raise EvalmixError("the position column must be numeric without NA to be a "
                               "model term")
        return ["position"], [x]

    def cluster(self, role: str) -> tuple[list[str], list[np.ndarray]]:
        names, cols, _, _ = _treatment(self.d[role].astype(str).to_numpy(), role)
        return names, cols

    def term(self, names: tuple[str, ...]) -> tuple[list[str], list[np.ndarray]]:
        out_names: list[str] = [""]
        out_cols: list[np.ndarray] = [np.ones(len(self.d))]
        for n in names:
            if n in ("condition", "model"):
                nn, cc = self.condition()
            elif n == "position":
                nn, cc = self.position()
            elif n in self.clusters:
                nn, cc = self.cluster(n)
            else:
                known = ["condition", "position", *self.clusters]
                raise InvalidOptionError(f"unknown model term {n!r}; known terms: "
                                         f"{', '.join(known)}")
            out_names = [f"{a}:{b}" if a else b for a in out_names for b in nn]
            out_cols = [x * c for x in out_cols for c in cc]
        return out_names, out_cols

    def group(self, roles: tuple[str, ...]) -> tuple[str, np.ndarray, tuple[str, ...]]:
        for r in roles:
            if r not in self.clusters:
                known = ", ".join(self.clusters) or "none"
                raise InvalidOptionError(f"random-effect group {r!r} is not a cluster role of the "
                                         f"table (cluster roles: {known})")
        if len(roles) == 1:
            lab = self.d[roles[0]].astype(str).to_numpy()
        else:
            lab = self.d[list(roles)].astype(str).agg(":".join, axis=1).to_numpy()
        codes, levels = pd.factorize(lab, sort=True)
        return ":".join(roles), codes.astype(np.int64), tuple(str(v) for v in levels)


# ---------------------------------------------------------------------------- build
#: Most distinct score values an ordinal (cumulative logit) model takes.
ORDINAL_MAX_CATEGORIES = 30


def _response(table, design: str, family: str | None = None
              ) -> tuple[np.ndarray, str, str, tuple[str, ...]]:
    y, implied, response, cats = _implied_response(table, design, family)
    if family is not None and not _agrees(family_name(family), implied):
        raise InvalidOptionError(
            f"family={family!r} does not fit this table: its outcome ({table.kind}, "
            f"{table.outcome_type}) is modelled as {implied!r}; leave family=None (the "
            "family follows from the table), or ask for family='ordinal' on numeric scores")
    return y, implied, response, cats


def _agrees(requested: str, implied: str) -> bool:
    """Whether the family a user named is the one the table implies (0/1 rows are the
    binomial family with one trial: ``bernoulli`` and ``binomial`` name the same model)."""
    logistic = {"bernoulli", "binomial"}
    return requested == implied or {requested, implied} <= logistic


def _implied_response(table, design: str, family: str | None
                      ) -> tuple[np.ndarray, str, str, tuple[str, ...]]:
    d = table.data
    # None: the family follows from the table; the one family that changes the model is
    # the cumulative logit (any other name must agree with the table: _agrees)
    ordinal = family is not None and family_name(family) == "cumulative"
    if ordinal and not (table.kind == "scores"
                                    and table.outcome_type == "numeric"):
        raise InvalidOptionError("family='ordinal' is for numeric score tables (e.g. 1-10 "
                                 "ratings); pairwise tables get an ordinal model with "
                                 "evalmix.read(..., ties='separate')")
    if table.kind == "scores":
        y = d["y"].to_numpy(dtype=float)
        if ordinal:
            values = np.unique(y)
            if not 3 <= len(values) <= ORDINAL_MAX_CATEGORIES:
                raise EvalmixError(
                    f"family='ordinal' needs 3 to {ORDINAL_MAX_CATEGORIES} distinct scores; "
                    f"column 'y' has {len(values)}; use the default Gaussian model")
            cats = tuple(f"{v:g}" for v in values)
            return (np.searchsorted(values, y).astype(float), "cumulative",
                    "the score category (ordered, cumulative logit)", cats)
        if table.outcome_type == "numeric":
            return y, "gaussian", "the score", ()
        fam = "bernoulli" if np.isin(y, (0.0, 1.0)).all() else "binomial"
        return y, fam, "the score (success probability)", ()
    flip = design == "baseline"
    who = "evaluated output (model_b) wins" if flip else "model_a wins"
    if table.ties == "separate":
        v = d["verdict"].astype(str).to_numpy()
        if flip:
            cat = np.select([v == "a", v == "tie", v == "b"], [0, 1, 2], -1)
            cats = ("model_a wins", "tie", "model_b wins")
        else:
            cat = np.select([v == "b", v == "tie", v == "a"], [0, 1, 2], -1)
            cats = ("model_b wins", "tie", "model_a wins")
        if (cat < 0).any():
            raise EvalmixError("verdict column holds values other than 'a', 'b', 'tie'")
        return cat.astype(float), "cumulative", f"verdict category (ordered; top: {who})", cats
    y = d["y"].to_numpy(dtype=float)
    if flip:
        y = 1.0 - y
    fam = "bernoulli" if np.isin(y, (0.0, 1.0)).all() else "binomial"
    if fam == "binomial":
        who += " (ties count 1/2: fractional binomial likelihood)"
    return y, fam, who, ()


@dataclass(frozen=True)
class _SpecOptions:
    """The model options of :func:`build_spec` (typed by :class:`SpecOptions`) with their
    defaults: the one place they are listed."""

    formula: str | None = None
    slopes: Iterable[str] | None = None
    position: bool = True
    judge_position: bool = True
    fixed: Iterable[str] = ()
    random: Iterable[str] | None = None
    reference: str | None = None
    judge: str = "judge"
    family: str | None = None


class SpecOptions(TypedDict, total=False):
    """The keywords of :func:`build_spec`, typed for static checkers (:func:`build_spec`
    documents them; :func:`evalmix.fit` takes the same ones but ``judge``)."""

    formula: str | None
    slopes: Iterable[str] | None
    position: bool
    judge_position: bool
    fixed: Iterable[str]
    random: Iterable[str] | None
    reference: str | None
    judge: str
    family: str | None


#: The model options and their defaults.
SPEC_DEFAULTS: MappingProxyType[str, Any] = MappingProxyType(
    {f.name: f.default for f in fields(_SpecOptions)})


def build_spec(table, **options: Unpack[SpecOptions]) -> ModelSpec:
    """Build a :class:`ModelSpec` from a table's roles, or from an lme4 formula.

    Parameters
    ----------
    table : EvalTable
        The eval table whose roles define the default model.
    **options
        The model options below (defaults: :data:`SPEC_DEFAULTS`; a misspelt one is refused).

    Other Parameters
    ----------------
    formula : str, optional
        lme4-syntax formula (supported subset, see :mod:`evalmix.models.spec`). When given,
        ``slopes``, ``position``, ``judge_position``, ``fixed`` and ``random`` are ignored.
    slopes : iterable of str, optional
        Factors that get random condition slopes ``(0 + condition|f)``, e.g.
        ``("judge",)``; ``"term|factor"`` gives ``(0 + term|factor)``. None (the default):
        the maximal model, a condition slope for every sampled factor whose levels see
        more than one condition (:func:`evalmix.models.spec._maximal.maximal_slopes`; factors
        left out are named in the spec's notes). ``()``: no slopes.
    position : bool
        Add the position (first-shown) term when the table knows the order.
    judge_position : bool
        Add judge-specific position bias ``(0 + position|judge)`` (pairwise, order known,
        a ``judge`` cluster role present).
    fixed : iterable of str
        Cluster roles to enter as fixed effects instead of random intercepts (the
        alternative for factors with few levels).
    random : iterable of str, optional
        Cluster roles with random intercepts (default: all not in ``fixed``).
    reference : str, optional
        Reference level of the condition (default: first sorted level; for pairwise
        baseline designs the first sorted ``model_b``).
    judge : str
        Name of the judge role (for ``judge_position``).
    family : {None, "ordinal", "cumulative"}
        None: from the table (logit for binary outcomes and pairwise verdicts, Gaussian
        for numeric scores, cumulative logit for ``ties="separate"``). ``"ordinal"``
        (= ``"cumulative"``, see :mod:`evalmix.families`): a cumulative-logit model for numeric scores (e.g. 1-10), one cut point between
        each pair of adjacent observed values.

    Returns
    -------
    ModelSpec

    Examples
    --------
    >>> from evalmix.sim import pairwise_judges
    >>> t = pairwise_judges(6, 2, 2, 2, seed=1, tie_threshold=0).table()
    >>> build_spec(t, slopes=("judge",)).formula
    'y ~ 1 + condition + position + (1|scenario) + (1|persona) + (1|author) + (1|judge) + (0 + position|judge) + (0 + condition|judge)'
    """
    o = _SpecOptions(**check_keywords("build_spec", options, SPEC_DEFAULTS))
    cols = _Columns(table, reference=o.reference)
    formula = o.formula
    maximal: tuple[str, ...] = ()
    notes: list[str] = []
    y, family, response, cats = _response(table, cols.design, o.family)
    if formula is None:
        if o.slopes is None:
            rand = _random_roles(table, tuple(o.fixed), o.random)
            maximal, why = maximal_slopes(table, rand, cols.design)
            notes += why
        formula = _default_formula(table, cols,
                                   slopes=maximal if o.slopes is None else tuple(o.slopes),
                                   position=o.position,
                                   judge_position=o.judge_position, fixed=tuple(o.fixed),
                                   random=o.random, judge=o.judge,
                                   correlated=_correlated(cols, maximal, family))
    parsed = parse_formula(formula)

    names: list[str] = []
    xcols: list[np.ndarray] = []
    intercept = parsed.intercept and cols.design != "bradley-terry"
    if parsed.intercept and cols.design == "bradley-terry" and parsed.fixed:
        pass  # abilities absorb the intercept in a Bradley-Terry design
    if intercept:
        names.append("Intercept")
        xcols.append(np.ones(table.n_obs))
    cond_terms: list[str] = []
    for t in parsed.fixed:
        nn, cc = cols.term(t)
        if t in (("condition",), ("model",)):
            cond_terms += nn
        for n, c in zip(nn, cc, strict=True):
            if n not in names:
                names.append(n)
                xcols.append(c)
    X = np.column_stack(xcols) if xcols else np.empty((table.n_obs, 0))
    if family == "cumulative" and "Intercept" in names:
        # cut points play the intercept's role
        k = names.index("Intercept")
        names.pop(k)
        X = np.delete(X, k, axis=1)
    if X.shape[1] and np.linalg.matrix_rank(X) < X.shape[1]:
        raise EvalmixError(f"the fixed-effect design {names} is rank deficient on this table "
                           "(a term is constant or duplicates others); drop a term")

    rterms: list[RandomTerm] = []
    for (lhs, groups, r_int), corr in zip(parsed.random, parsed.correlated, strict=True):
        gname, codes, levels = cols.group(groups)
        if r_int:
            rterms.append(RandomTerm(gname, "1", _readonly(codes), levels,
                                     _readonly(np.ones(table.n_obs)), corr))
        for lhs_name in lhs:
            nn, cc = cols.term((lhs_name,))
            for n, c in zip(nn, cc, strict=True):
                rterms.append(RandomTerm(gname, n, _readonly(codes), levels, _readonly(c),
                                         corr))
    seen = set()
    for r in rterms:
        if r.name in seen:
            raise InvalidOptionError(f"formula {formula!r} has the random term {r.name} twice")
        seen.add(r.name)

    contrasts: list[tuple[str, tuple[float, ...]]] = []
    if cols.design == "bradley-terry" and len(cond_terms) >= 2:
        for i, a in enumerate(cond_terms):
            for b in cond_terms[i + 1:]:
                w = np.zeros(len(names))
                w[names.index(b)], w[names.index(a)] = 1.0, -1.0
                contrasts.append((f"{b} - {a}", tuple(w)))
    elif cols.design != "bradley-terry" and len(cond_terms) >= 2:
        for i, a in enumerate(cond_terms):
            for b in cond_terms[i + 1:]:
                w = np.zeros(len(names))
                w[names.index(b)], w[names.index(a)] = 1.0, -1.0
                contrasts.append((f"{b} - {a}", tuple(w)))
    if cols.design == "bradley-terry" and any(r.is_intercept for r in rterms):
        notes.append("Bradley-Terry design with random intercepts: they are oriented "
                     "'model_a vs model_b' and only meaningful when that orientation is "
                     "consistent; prefer (0 + model|f) (factor x model interaction)")
    return ModelSpec(
        formula=formula, family=family,  # type: ignore[arg-type]
        link="identity" if family == "gaussian" else "logit",
        response=response, y=_readonly(y), X=_readonly(X.astype(float)),
        fixed_names=tuple(names), random=tuple(rterms), design=cols.design,
        categories=cats, reference=cols.reference, contrasts=tuple(contrasts),
        condition_terms=tuple(cond_terms), maximal=maximal,
        ties=table.ties if table.kind == "pairwise" else None, notes=tuple(notes),
    )


def _correlated(cols: _Columns, maximal: tuple[str, ...], family: str) -> tuple[str, ...]:
    """The maximal factors whose slopes are correlated with their intercepts in the
    default model: lme4's ``(1 + condition|f)`` for a logit (Laplace) or Gaussian (REML)
    model with one condition column (two conditions). With more, the full covariance
    has ``K (K + 1) / 2`` parameters per factor (21 for 6 models), too many for the tens
    of levels eval factors have, and the slopes stay independent (``docs/models.md``)."""
    if not maximal or family not in ("bernoulli", "binomial", "gaussian"):
        return ()
    names, _ = cols.condition()
    return maximal if len(names) == 1 else ()


def _random_roles(table, fixed: tuple[str, ...], random: Iterable[str] | None
                  ) -> list[str]:
    """The roles with random intercepts in the default model."""
    clusters = tuple(table.clusters)
    for f in fixed:
        if f not in clusters:
            raise InvalidOptionError(f"fixed={f!r} is not a cluster role ({', '.join(clusters)})")
    return [c for c in clusters if c not in fixed] if random is None else list(random)


def _default_formula(table, cols: _Columns, *, slopes: tuple[str, ...], position: bool,
                     judge_position: bool, fixed: tuple[str, ...],
                     random: Iterable[str] | None, judge: str,
                     correlated: tuple[str, ...] = ()) -> str:
    clusters = tuple(table.clusters)
    rand = _random_roles(table, fixed, random)
    has_cond = table.kind == "pairwise" or table.has_condition
    has_pos = (table.has_order if table.kind == "pairwise"
               else "position" in table.data.columns)
    # a Bradley-Terry design has no intercept (the abilities absorb it): say so
    terms = ["0" if cols.design == "bradley-terry" else "1"]
    if has_cond:
        terms.append("condition")
    if position and has_pos:
        terms.append("position")
    terms += list(fixed)
    # lme4's (1 + condition|f): intercept and condition slopes correlated
    rterms = [f"(1 + condition|{c})" if c in correlated else f"(1|{c})" for c in rand]
    if (position and judge_position and has_pos and table.kind == "pairwise"
            and judge in clusters):
        rterms.append(f"(0 + position|{judge})")
    for s in slopes:
        term, _, fac = s.rpartition("|")
        term = term.strip() or "condition"
        fac = fac.strip()
        if fac not in clusters:
            raise InvalidOptionError(f"slopes={s!r}: {fac!r} is not a cluster role "
                                     f"({', '.join(clusters)})")
        if term == "condition" and not has_cond:
            raise EvalmixError("condition slopes need a condition (or pairwise) table")
        r = f"(0 + {term}|{fac})"
        if term == "condition" and fac in correlated:
            continue
        if r not in rterms:
            rterms.append(r)
    return "y ~ " + " + ".join(terms + rterms)
