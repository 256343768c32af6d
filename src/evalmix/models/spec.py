"""Model specifications built from an :class:`~evalmix.data.table.EvalTable`'s roles.

A :class:`ModelSpec` is a frozen, back-end-neutral description of a crossed
random-effects model: the response, a fixed-effect design matrix with column names, the
family, and the random terms (integer codes of a grouping factor times a covariate).
Back ends (:mod:`evalmix.models.bayes`, :mod:`evalmix.models.frequentist`) only read it.

Pairwise tables
---------------
*Baseline design* (``model_a`` is the same model on every row, the shared-data
convention: a fixed reference answer against the evaluated outputs in ``model_b``). The
spec models the log-odds that the **evaluated output (model_b) wins**::

    eta = Intercept + condition[m] (treatment-coded model_b, first level = reference)
          + position * x_pos + crossed random intercepts
          + (0 + position | judge) + optional (0 + condition | judge)

with ``x_pos = +1/2`` if model_b's answer was shown first and ``-1/2`` otherwise (0 when
the order is unknown), so ``position`` is the log-odds ratio of being shown first. This
is exactly the parameterisation of :func:`evalmix.sim.pairwise_judges` and of the frozen
``glmer`` references. The response is ``1 - table.y`` (``table.y`` is "model_a wins").

*Bradley-Terry design* (``model_a`` varies). The response is "model_a wins"; each model
other than the reference level gets an ability column ``+1`` if it is ``model_a``, ``-1``
if it is ``model_b``; ``position`` is ``a_first - 1/2`` (again: log-odds ratio of being
shown first). There is no intercept. Random intercepts ``(1|f)`` are then oriented
"model_a vs model_b" (only meaningful when the orientation is consistent); the judge x
model interaction is ``(0 + model | judge)``.

Formulas
--------
lme4 syntax, the supported subset: ``y ~ 1 + condition + position + judge +
condition:position + (1|scenario) + (0 + condition|judge) + (1|judge:scenario)``.
Fixed terms: ``1``/``0``/``-1``, ``condition`` (alias ``model``), ``position``, any cluster
role (fixed treatment-coded dummies, e.g. for a 3-level judge factor) and ``a:b``
interactions of those. Random terms: ``(1|g)``, ``(0 + x|g)``, ``(1 + x||g)`` (uncorrelated,
as lme4's ``||``), with ``g`` a cluster role or ``a:b`` of roles. Correlated random effects
``(1 + x|g)``, nesting ``a/b``, ``*``, functions and offsets are not supported and raise.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np
import pandas as pd

from evalmix.errors import EvalmixError, InvalidOptionError

__all__ = [
    "ModelSpec",
    "RandomTerm",
    "Collapsed",
    "build_spec",
    "parse_formula",
    "collapse",
    "FAMILIES",
]

Family = Literal["bernoulli", "binomial", "gaussian", "cumulative"]
FAMILIES: tuple[str, ...] = ("bernoulli", "binomial", "gaussian", "cumulative")


def _readonly(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.flags.writeable = False
    return a


@dataclass(frozen=True, eq=False)
class RandomTerm:
    """One random effect: a grouping factor times a covariate (1 for an intercept).

    Attributes
    ----------
    factor : str
        Grouping factor (a cluster role, or ``"a:b"`` for an interaction of roles).
    term : str
        ``"1"`` for a random intercept, else the fixed-effect column the slope varies
        (e.g. ``"position"``, ``"condition[treatment]"``).
    codes : ndarray of int64, shape (n,)
        Level of ``factor`` on every row (0..G-1).
    levels : tuple of str
    x : ndarray of float, shape (n,)
        Covariate multiplying the effect (ones for an intercept).
    """

    factor: str
    term: str
    codes: np.ndarray
    levels: tuple[str, ...]
    x: np.ndarray

    @property
    def name(self) -> str:
        """lme4-style label: ``"1|judge"``, ``"position|judge"``."""
        return f"{self.term}|{self.factor}"

    @property
    def n_levels(self) -> int:
        return len(self.levels)

    @property
    def is_intercept(self) -> bool:
        return self.term == "1"


@dataclass(frozen=True, eq=False)
class ModelSpec:
    """A back-end-neutral crossed random-effects model (see the module docstring).

    Attributes
    ----------
    formula : str
        The model in lme4 syntax (user formula, or the default built from roles).
    family : {"bernoulli", "binomial", "gaussian", "cumulative"}
        ``"binomial"`` when the response holds fractions (ties scored 0.5, proportions):
        fitted with the fractional binomial (quasi-)likelihood.
    link : {"logit", "identity"}
    response : str
        Plain words: what ``y`` is (e.g. ``"evaluated output (model_b) wins"``).
    y : ndarray, shape (n,)
        Bernoulli/binomial: success fraction in [0, 1]; gaussian: the score;
        cumulative: ordered category 0..K-1.
    X : ndarray, shape (n, k)
    fixed_names : tuple of str
    random : tuple of RandomTerm
    design : {"scores", "baseline", "bradley-terry"}
    categories : tuple of str
        Cumulative family: category labels in order (lowest first).
    reference : str or None
        Reference level of the condition / model abilities.
    contrasts : tuple of (name, weights)
        Extra linear combinations of fixed effects worth reporting (e.g. Bradley-Terry
        ability differences).
    condition_terms : tuple of str
        Fixed columns that are condition (model) effects.
    n_obs : int
    ties : str or None
    notes : tuple of str
    """

    formula: str
    family: Family
    link: str
    response: str
    y: np.ndarray
    X: np.ndarray
    fixed_names: tuple[str, ...]
    random: tuple[RandomTerm, ...]
    design: str
    categories: tuple[str, ...] = ()
    reference: str | None = None
    contrasts: tuple[tuple[str, tuple[float, ...]], ...] = ()
    condition_terms: tuple[str, ...] = ()
    ties: str | None = None
    notes: tuple[str, ...] = ()
    n_obs: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "n_obs", int(self.y.shape[0]))
        if self.X.shape != (self.n_obs, len(self.fixed_names)):
            raise EvalmixError(
                f"ModelSpec: X has shape {self.X.shape}, expected ({self.n_obs}, "
                f"{len(self.fixed_names)}) for fixed terms {self.fixed_names}"
            )

    def replace(self, **changes) -> ModelSpec:
        """A copy with some fields changed (the spec itself is frozen)."""
        return replace(self, **changes)

    @property
    def factors(self) -> tuple[str, ...]:
        """Grouping factors, in order of first appearance."""
        return tuple(dict.fromkeys(r.factor for r in self.random))

    def n_levels(self, factor: str) -> int:
        for r in self.random:
            if r.factor == factor:
                return r.n_levels
        raise EvalmixError(f"{factor!r} is not a grouping factor of this model ({self.factors})")

    def frame(self) -> pd.DataFrame:
        """The model frame: response, fixed columns and random-term codes (for back ends
        that want a DataFrame, e.g. statsmodels or Bambi)."""
        out = pd.DataFrame(self.X, columns=list(self.fixed_names))
        out.insert(0, "y", self.y)
        for r in self.random:
            if r.factor not in out.columns:
                out[r.factor] = np.asarray(r.levels, dtype=object)[r.codes]
        return out

    def __str__(self) -> str:
        return (f"ModelSpec({self.family}, {self.design}, n={self.n_obs}): {self.formula}\n"
                f"  response: {self.response}\n  fixed: {', '.join(self.fixed_names)}\n"
                f"  random: {', '.join(r.name for r in self.random) or 'none'}")


# ---------------------------------------------------------------------------- formula
@dataclass(frozen=True)
class ParsedFormula:
    """The supported subset of an lme4 formula, as plain names."""

    response: str
    intercept: bool
    fixed: tuple[tuple[str, ...], ...]          # each term: tuple of names (interaction)
    random: tuple[tuple[tuple[str, ...], tuple[str, ...], bool], ...]
    # random: (lhs terms as single names ("1" for intercept), group names, intercept?)


_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")


def _split_top(s: str, sep: str = "+") -> list[str]:
    """Split on ``sep`` at parenthesis depth 0."""
    parts: list[str] = []
    depth = 0
    cur: list[str] = []
    for ch in s:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise EvalmixError(f"formula has an unmatched ')': {s!r}")
        if ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth != 0:
        raise EvalmixError(f"formula has an unmatched '(': {s!r}")
    parts.append("".join(cur))
    return [p.strip() for p in parts]


def _unsupported(what: str, formula: str, hint: str) -> EvalmixError:
    return EvalmixError(f"formula {formula!r}: {what} is not supported; {hint}")


def _check_name(name: str, formula: str) -> str:
    if not _NAME.match(name):
        raise _unsupported(f"the term {name!r}", formula,
                           "terms must be plain names (condition, position, a cluster role) "
                           "or a:b interactions; write transformations as new columns")
    return name


def parse_formula(formula: str) -> ParsedFormula:
    """Parse the supported lme4 subset (see the module docstring).

    Examples
    --------
    >>> p = parse_formula("y ~ condition + position + (1|scenario) + (0 + condition|judge)")
    >>> p.fixed, p.random[1]
    ((('condition',), ('position',)), (('condition',), ('judge',), False))
    """
    if not isinstance(formula, str) or formula.count("~") != 1:
        raise EvalmixError(f"formula must be a string 'response ~ terms', got {formula!r}")
    lhs, rhs = (s.strip() for s in formula.split("~"))
    if not _NAME.match(lhs):
        raise _unsupported(f"the response {lhs!r}", formula,
                           "use a single name (e.g. y); the response comes from the table's "
                           "outcome role (cbind(...) is built automatically by collapsing)")
    for bad, hint in (("*", "write main effects and a:b interactions explicitly"),
                      ("/", "write nesting as (1|a) + (1|a:b)"),
                      ("^", "write interactions explicitly"),
                      ("offset", "offsets are not supported"),
                      ("I(", "add transformed covariates as columns instead")):
        if bad in rhs:
            raise _unsupported(f"{bad!r}", formula, hint)
    intercept = True
    fixed: list[tuple[str, ...]] = []
    random: list[tuple[tuple[str, ...], tuple[str, ...], bool]] = []
    rhs = re.sub(r"-\s*1\b", "+ -1", rhs).strip()
    if rhs.startswith("+"):
        rhs = rhs[1:]
    if "-" in rhs.replace("-1", ""):
        raise _unsupported("removing terms with '-'", formula, "leave the term out instead")
    for term in _split_top(rhs):
        if term == "":
            raise EvalmixError(f"formula {formula!r} has an empty term")
        if term in ("0", "-1"):
            intercept = False
        elif term == "1":
            intercept = True
        elif term.startswith("(") and term.endswith(")"):
            inner = term[1:-1]
            double = "||" in inner
            pieces = inner.split("||") if double else inner.split("|")
            if len(pieces) != 2:
                raise _unsupported(f"the random term {term!r}", formula,
                                   "write random terms as (1|g), (0 + x|g) or (1 + x||g)")
            left, group = pieces[0].strip(), pieces[1].strip()
            g = tuple(_check_name(n.strip(), formula) for n in group.split(":"))
            lterms = [t.strip() for t in _split_top(left)]
            r_int = True
            names: list[str] = []
            for t in lterms:
                if t in ("0", "-1"):
                    r_int = False
                elif t == "1":
                    r_int = True
                else:
                    names.append(_check_name(t, formula))
            if r_int and names and not double:
                raise _unsupported(
                    f"the correlated random term {term!r}", formula,
                    f"write ({'1 + ' + ' + '.join(names)}||{group}) or "
                    f"(1|{group}) + (0 + {' + '.join(names)}|{group}) for independent "
                    "intercept and slopes (correlations are not modelled)")
            if not r_int and not names:
                raise EvalmixError(f"formula {formula!r}: random term {term!r} has no effect")
            random.append((tuple(names), g, r_int))
        else:
            fixed.append(tuple(_check_name(n.strip(), formula) for n in term.split(":")))
    return ParsedFormula(lhs, intercept, tuple(fixed), tuple(random))


# ---------------------------------------------------------------------------- columns
def _treatment(labels: np.ndarray, prefix: str, reference: str | None = None
               ) -> tuple[list[str], list[np.ndarray], tuple[str, ...], str]:
    levels = tuple(sorted(pd.unique(labels).astype(str)))
    ref = levels[0] if reference is None else reference
    if ref not in levels:
        raise EvalmixError(f"reference level {ref!r} is not a level of {prefix} ({levels})")
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
            raise EvalmixError(f"reference level {ref!r} is not one of the models {levels}")
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
                raise EvalmixError(f"unknown model term {n!r}; known terms: "
                                   f"{', '.join(known)}")
            out_names = [f"{a}:{b}" if a else b for a in out_names for b in nn]
            out_cols = [x * c for x in out_cols for c in cc]
        return out_names, out_cols

    def group(self, roles: tuple[str, ...]) -> tuple[str, np.ndarray, tuple[str, ...]]:
        for r in roles:
            if r not in self.clusters:
                known = ", ".join(self.clusters) or "none"
                raise EvalmixError(f"random-effect group {r!r} is not a cluster role of the "
                                   f"table (cluster roles: {known})")
        if len(roles) == 1:
            lab = self.d[roles[0]].astype(str).to_numpy()
        else:
            lab = self.d[list(roles)].astype(str).agg(":".join, axis=1).to_numpy()
        codes, levels = pd.factorize(lab, sort=True)
        return ":".join(roles), codes.astype(np.int64), tuple(str(v) for v in levels)


# ---------------------------------------------------------------------------- build
def _response(table, design: str) -> tuple[np.ndarray, str, str, tuple[str, ...]]:
    d = table.data
    if table.kind == "scores":
        y = d["y"].to_numpy(dtype=float)
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


def build_spec(
    table,
    *,
    formula: str | None = None,
    slopes: Iterable[str] = (),
    position: bool = True,
    judge_position: bool = True,
    fixed: Iterable[str] = (),
    random: Iterable[str] | None = None,
    reference: str | None = None,
    judge: str = "judge",
) -> ModelSpec:
    """Build a :class:`ModelSpec` from a table's roles, or from an lme4 formula.

    Parameters
    ----------
    table : EvalTable
    formula : str, optional
        lme4-syntax formula (supported subset, see the module docstring). When given,
        ``slopes``, ``position``, ``judge_position``, ``fixed`` and ``random`` are ignored.
    slopes : iterable of str
        Factors that get random condition slopes ``(0 + condition|f)``, e.g.
        ``("judge",)``; ``"term|factor"`` gives ``(0 + term|factor)``.
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
    cols = _Columns(table, reference=reference)
    if formula is None:
        formula = _default_formula(table, cols, slopes=tuple(slopes), position=position,
                                   judge_position=judge_position, fixed=tuple(fixed),
                                   random=random, judge=judge)
    parsed = parse_formula(formula)
    y, family, response, cats = _response(table, cols.design)

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
    for lhs, groups, r_int in parsed.random:
        gname, codes, levels = cols.group(groups)
        if r_int:
            rterms.append(RandomTerm(gname, "1", _readonly(codes), levels,
                                     _readonly(np.ones(table.n_obs))))
        for lhs_name in lhs:
            nn, cc = cols.term((lhs_name,))
            for n, c in zip(nn, cc, strict=True):
                rterms.append(RandomTerm(gname, n, _readonly(codes), levels, _readonly(c)))
    seen = set()
    for r in rterms:
        if r.name in seen:
            raise EvalmixError(f"formula {formula!r} has the random term {r.name} twice")
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
    notes = []
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
        condition_terms=tuple(cond_terms),
        ties=table.ties if table.kind == "pairwise" else None, notes=tuple(notes),
    )


def _default_formula(table, cols: _Columns, *, slopes: tuple[str, ...], position: bool,
                     judge_position: bool, fixed: tuple[str, ...],
                     random: Iterable[str] | None, judge: str) -> str:
    clusters = tuple(table.clusters)
    for f in fixed:
        if f not in clusters:
            raise EvalmixError(f"fixed={f!r} is not a cluster role ({', '.join(clusters)})")
    rand = [c for c in clusters if c not in fixed] if random is None else list(random)
    has_cond = table.kind == "pairwise" or table.has_condition
    has_pos = (table.has_order if table.kind == "pairwise"
               else "position" in table.data.columns)
    terms = ["1"]
    if has_cond:
        terms.append("condition")
    if position and has_pos:
        terms.append("position")
    terms += list(fixed)
    rterms = [f"(1|{c})" for c in rand]
    if (position and judge_position and has_pos and table.kind == "pairwise"
            and judge in clusters):
        rterms.append(f"(0 + position|{judge})")
    for s in slopes:
        term, _, fac = s.rpartition("|")
        term = term.strip() or "condition"
        fac = fac.strip()
        if fac not in clusters:
            raise EvalmixError(f"slopes={s!r}: {fac!r} is not a cluster role "
                               f"({', '.join(clusters)})")
        if term == "condition" and not has_cond:
            raise EvalmixError("condition slopes need a condition (or pairwise) table")
        r = f"(0 + {term}|{fac})"
        if r not in rterms:
            rterms.append(r)
    return "y ~ " + " + ".join(terms + rterms)


# ---------------------------------------------------------------------------- collapse
@dataclass(frozen=True, eq=False)
class Collapsed:
    """Rows with identical covariate patterns aggregated (sufficient statistics).

    Attributes
    ----------
    X : ndarray (m, k)
    codes : tuple of ndarray (m,)
        One per random term of the spec, same order.
    x : tuple of ndarray (m,)
    trials : ndarray (m,)
        Rows in the pattern.
    successes : ndarray (m,)
        Sum of ``y`` (binomial families; may be fractional under ties="half").
    sum_y, sum_y2 : ndarray (m,)
        Gaussian sufficient statistics.
    counts : ndarray (m, K)
        Cumulative family: rows per category.
    pattern : ndarray (n,)
        Pattern index of every original row.
    """

    X: np.ndarray
    codes: tuple[np.ndarray, ...]
    x: tuple[np.ndarray, ...]
    trials: np.ndarray
    successes: np.ndarray
    sum_y: np.ndarray
    sum_y2: np.ndarray
    counts: np.ndarray
    pattern: np.ndarray

    @property
    def n_patterns(self) -> int:
        return int(self.trials.shape[0])

    @property
    def n_rows(self) -> int:
        return int(self.pattern.shape[0])


def collapse(spec: ModelSpec) -> Collapsed:
    """Aggregate rows with identical fixed covariates and random-effect levels.

    The binomial (and Gaussian, and multinomial) log-likelihood depends on the rows only
    through per-pattern sums, so the model fitted to the collapsed data has the same
    posterior and a gradient that costs in proportion to the number of patterns.

    Examples
    --------
    >>> from evalmix.sim import pairwise_judges
    >>> t = pairwise_judges(6, 2, 2, 2, seed=1, tie_threshold=0).table()
    >>> c = collapse(build_spec(t))
    >>> int(c.trials.sum()) == t.n_obs
    True
    """
    n = spec.n_obs
    parts = [spec.X] + [r.codes[:, None].astype(float) for r in spec.random] + [
        r.x[:, None] for r in spec.random if not r.is_intercept]
    key = np.column_stack(parts) if parts else np.zeros((n, 1))
    if key.shape[1] == 0:
        key = np.zeros((n, 1))
    uniq, first, inv = np.unique(key, axis=0, return_index=True, return_inverse=True)
    inv = inv.ravel().astype(np.int64)
    m = uniq.shape[0]
    trials = np.bincount(inv, minlength=m).astype(float)
    y = spec.y
    successes = np.bincount(inv, weights=y, minlength=m) if spec.family != "cumulative" \
        else np.zeros(m)
    sum_y = successes if spec.family == "gaussian" else np.zeros(m)
    sum_y2 = (np.bincount(inv, weights=y * y, minlength=m) if spec.family == "gaussian"
              else np.zeros(m))
    if spec.family == "cumulative":
        k = len(spec.categories)
        counts = np.zeros((m, k))
        np.add.at(counts, (inv, y.astype(np.int64)), 1.0)
    else:
        counts = np.zeros((m, 0))
    return Collapsed(
        X=_readonly(spec.X[first]),
        codes=tuple(_readonly(r.codes[first]) for r in spec.random),
        x=tuple(_readonly(r.x[first]) for r in spec.random),
        trials=_readonly(trials), successes=_readonly(successes), sum_y=_readonly(sum_y),
        sum_y2=_readonly(sum_y2), counts=_readonly(counts), pattern=_readonly(inv),
    )


def check_family(family: str) -> None:
    if family not in FAMILIES:
        raise InvalidOptionError(f"family={family!r}; choose one of {FAMILIES}")
