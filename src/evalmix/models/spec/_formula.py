"""Parser for the supported subset of lme4 formula syntax.

:func:`parse_formula` turns ``"y ~ condition + (1|scenario) + (0 + condition|judge)"``
into plain names (:class:`ParsedFormula`); resolving the names against a table is
:func:`evalmix.models.spec.build_spec`'s job. The supported subset (and what raises) is
described under *Formulas* in :mod:`evalmix.models.spec`; import from there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from evalmix.errors import EvalmixError, InvalidOptionError


@dataclass(frozen=True)
class ParsedFormula:
    """The supported subset of an lme4 formula, as plain names."""

    response: str
    intercept: bool
    fixed: tuple[tuple[str, ...], ...]          # each term: tuple of names (interaction)
    random: tuple[tuple[tuple[str, ...], tuple[str, ...], bool], ...]
    # random: (lhs terms as single names ("1" for intercept), group names, intercept?)
    correlated: tuple[bool, ...] = ()
    # one per random term: lme4's (1 + x | g), intercept and slopes correlated


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
                raise InvalidOptionError(f"formula has an unmatched ')': {s!r}")
        if ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth != 0:
        raise InvalidOptionError(f"formula has an unmatched '(': {s!r}")
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
    """Parse the supported lme4 subset (see :mod:`evalmix.models.spec`).

    Examples
    --------
    >>> p = parse_formula("y ~ condition + position + (1|scenario) + (0 + condition|judge)")
    >>> p.fixed, p.random[1]
    ((('condition',), ('position',)), (('condition',), ('judge',), False))
    """
    if not isinstance(formula, str) or formula.count("~") != 1:
        raise InvalidOptionError(f"formula must be a string 'response ~ terms', got {formula!r}")
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
    correlated: list[bool] = []
    rhs = re.sub(r"-\s*1\b", "+ -1", rhs).strip()
    if rhs.startswith("+"):
        rhs = rhs[1:]
    if "-" in rhs.replace("-1", ""):
        raise _unsupported("removing terms with '-'", formula, "leave the term out instead")
    for term in _split_top(rhs):
        if term == "":
            raise InvalidOptionError(f"formula {formula!r} has an empty term")
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
            corr = bool(r_int and names and not double)
            if corr and any(c and rg == g for (_, rg, _), c in zip(random, correlated,
                                                                   strict=True)):
                raise _unsupported(
                    f"a second correlated term for {group!r} ({term!r})", formula,
                    f"put all of {group}'s correlated effects in one (1 + ...|{group})")
            if not r_int and not names:
                raise InvalidOptionError(f"formula {formula!r}: random term {term!r} has no effect")
            random.append((tuple(names), g, r_int))
            correlated.append(corr)
        else:
            fixed.append(tuple(_check_name(n.strip(), formula) for n in term.split(":")))
    return ParsedFormula(lhs, intercept, tuple(fixed), tuple(random), tuple(correlated))
