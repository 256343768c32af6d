"""Statistics that are functions of column sums: the fast path of the custom bootstrap.

A red-flag rate, a difference or ratio of two conditions' rates, a weighted composite of
rates: each is a smooth function ``f(T)`` of a few column totals ``T = sum_i c_i``. A
cluster resample only changes how often each cluster's sums ``s_g`` are counted, so a
whole block of replicates is ``T* = W @ s`` (``W`` the resampling counts), evaluated with
no Python loop over replicates -- the same device as the OLS bootstrap in
:mod:`evalmix.inference.bootstrap`.

:class:`Sums` holds the columns and the function; :func:`expression` compiles a small
language for rates of a column into one::

    flag_ratio = mean(red_flag, condition == "B") / mean(red_flag, condition == "A")

``mean(x)`` / ``rate(x)`` (sum of ``x`` over rows where it is not missing, divided by
their count), ``mean(x, where)``, ``sum(x[, where])``, ``count([where])``, numbers,
``+ - * /`` and parentheses; ``where`` compares a column with a constant (``==, !=, <,
<=, >, >=``, ``in (...)``), joined by ``and`` / ``or`` / ``not``. Several statistics are
``name = expr`` lines (or separated by ``;``). The text is parsed with :mod:`ast` and
walked against this whitelist; nothing is evaluated by Python, so an expression read from
a file or a command line cannot run code.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from evalmix.errors import InvalidOptionError, InvalidTableError

__all__ = ["Sums", "expression", "MAX_EXPRESSION"]

#: Longest expression text accepted (characters).
MAX_EXPRESSION = 4000


@dataclass(frozen=True)
class Sums:
    """A statistic ``combine(T)`` of column totals ``T`` (the vectorised fast path).

    Parameters
    ----------
    columns : callable
        ``columns(frame) -> (n, p)`` array: the per-row values whose totals the statistic
        needs (e.g. ``flag * is_B`` and ``is_B``).
    combine : callable
        ``combine(T) -> (...,)`` or ``(..., k)``: the statistic from totals ``T`` of
        shape ``(..., p)``; it must work on a stack of totals (numpy arithmetic does).
    names : tuple of str
        Names of the ``k`` components (one name for a scalar statistic).
    name : str
        What the statistic is called in results.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> rate = Sums(lambda d: np.column_stack([d["flag"], np.ones(len(d))]),
    ...             lambda t: t[..., 0] / t[..., 1], names=("rate",), name="rate")
    >>> float(rate.evaluate(pd.DataFrame({"flag": [1, 0, 0, 1]}))[0])
    0.5
    """

    columns: Callable[[pd.DataFrame], np.ndarray]
    combine: Callable[[np.ndarray], np.ndarray]
    names: tuple[str, ...]
    name: str = "statistic"

    def values(self, frame: pd.DataFrame) -> np.ndarray:
        """The ``(n, p)`` per-row columns, checked."""
        c = np.asarray(self.columns(frame), dtype=float)
        if c.ndim == 1:
            c = c[:, None]
        if c.ndim != 2 or c.shape[0] != len(frame):
            raise InvalidOptionError(
                f"Sums {self.name!r}: columns(frame) must return an (n, p) array with one "
                f"row per row of the table ({len(frame)}); got shape {c.shape}")
        return c

    def apply(self, totals: np.ndarray) -> np.ndarray:
        """``combine`` on totals ``(..., p)`` as ``(..., k)`` (NaN where undefined)."""
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            out = np.asarray(self.combine(totals), dtype=float)
        if out.ndim == totals.ndim - 1:
            out = out[..., None]
        if out.shape[-1] != len(self.names):
            raise InvalidOptionError(
                f"Sums {self.name!r}: combine returned {out.shape[-1]} values per resample; "
                f"names has {len(self.names)}")
        return np.where(np.isfinite(out), out, np.nan)

    def evaluate(self, frame: pd.DataFrame) -> np.ndarray:
        """The statistic on ``frame`` (k values)."""
        return self.apply(self.values(frame).sum(axis=0))


# ------------------------------------------------------------------- the expression language
_CALLS = ("mean", "rate", "sum", "count")
_OPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: np.add, ast.Sub: np.subtract, ast.Mult: np.multiply, ast.Div: np.divide}
_CMP: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: np.equal, ast.NotEq: np.not_equal, ast.Lt: np.less, ast.LtE: np.less_equal,
    ast.Gt: np.greater, ast.GtE: np.greater_equal}


def _refuse(node: ast.AST, text: str, why: str = "") -> InvalidOptionError:
    part = ast.get_source_segment(text, node) or type(node).__name__
    return InvalidOptionError(
        f"statistic expression {text!r}: {why or 'not allowed'} at {part!r}. Allowed: "
        "mean(col[, where]), rate(col[, where]), sum(col[, where]), count([where]), "
        "numbers, + - * / and parentheses; where compares a column with a constant "
        "(==, !=, <, <=, >, >=, in (...)) joined by and/or/not")


class _Compiler:
    """Turns the AST into a list of sum columns and a function of their totals."""

    def __init__(self, text: str):
        self.text = text
        self.terms: list[tuple[str | None, ast.AST | None]] = []  # (column, where)
        self.keys: dict[str, int] = {}

    def term(self, column: str | None, where: ast.AST | None) -> int:
        key = f"{column}|{ast.dump(where) if where is not None else ''}"
        if key not in self.keys:
            self.keys[key] = len(self.terms)
            self.terms.append((column, where))
        return self.keys[key]

    def column(self, node: ast.AST) -> str:
        if isinstance(node, ast.Name):
            return node.id
        raise _refuse(node, self.text, "expected a column name")

    def check_where(self, node: ast.AST) -> None:
        if isinstance(node, ast.BoolOp):
            for v in node.values:
                self.check_where(v)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            self.check_where(node.operand)
        elif isinstance(node, ast.Compare) and len(node.ops) == 1:
            self.column(node.left)
            right = node.comparators[0]
            if isinstance(node.ops[0], ast.In | ast.NotIn):
                if not (isinstance(right, ast.Tuple | ast.List)
                        and all(isinstance(e, ast.Constant) for e in right.elts)):
                    raise _refuse(right, self.text, "'in' needs a tuple of constants")
            elif type(node.ops[0]) not in _CMP or not isinstance(right, ast.Constant):
                raise _refuse(node, self.text, "a condition compares a column with a constant")
        elif isinstance(node, ast.Name):
            pass  # a 0/1 column
        else:
            raise _refuse(node, self.text, "not a condition")

    def compile(self, node: ast.AST) -> Callable[[np.ndarray], np.ndarray]:
        """A function of totals ``(..., p)`` for the arithmetic node."""
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float) \
                and not isinstance(node.value, bool):
            value = float(node.value)
            return lambda t: np.full(t.shape[:-1], value)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            op, left, right = _OPS[type(node.op)], self.compile(node.left), \
                self.compile(node.right)
            return lambda t: op(left(t), right(t))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            inner, sign = self.compile(node.operand), -1.0 if isinstance(node.op, ast.USub) \
                else 1.0
            return lambda t: sign * inner(t)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in _CALLS and not node.keywords:
            return self.call(node)
        raise _refuse(node, self.text)

    def call(self, node: ast.Call) -> Callable[[np.ndarray], np.ndarray]:
        fn, args = node.func.id, node.args  # type: ignore[attr-defined]
        if fn == "count":
            if len(args) > 1:
                raise _refuse(node, self.text, "count takes at most one condition")
            where = args[0] if args else None
            if where is not None:
                self.check_where(where)
            j = self.term(None, where)
            return lambda t: t[..., j]
        if not 1 <= len(args) <= 2:
            raise _refuse(node, self.text, f"{fn} takes a column and an optional condition")
        col = self.column(args[0])
        where = args[1] if len(args) == 2 else None
        if where is not None:
            self.check_where(where)
        num = self.term(col, where)
        if fn == "sum":
            return lambda t: t[..., num]
        den = self.term(f"\0present:{col}", where)
        return lambda t: t[..., num] / t[..., den]


def _mask(frame: pd.DataFrame, node: ast.AST, text: str) -> np.ndarray:
    """Boolean rows of a condition (already whitelisted)."""
    if isinstance(node, ast.BoolOp):
        parts = [_mask(frame, v, text) for v in node.values]
        return np.logical_and.reduce(parts) if isinstance(node.op, ast.And) \
            else np.logical_or.reduce(parts)
    if isinstance(node, ast.UnaryOp):
        return ~_mask(frame, node.operand, text)
    if isinstance(node, ast.Name):
        return _numeric(frame, node.id, text) != 0
    assert isinstance(node, ast.Compare)
    col = _get(frame, node.left.id, text)  # type: ignore[attr-defined]
    right = node.comparators[0]
    op = node.ops[0]
    if isinstance(op, ast.In | ast.NotIn):
        values = [e.value for e in right.elts]  # type: ignore[attr-defined]
        hit = np.zeros(len(frame), dtype=bool)
        for v in values:
            hit |= _equal(col, v)
        return hit if isinstance(op, ast.In) else ~hit
    value = right.value  # type: ignore[attr-defined]
    if isinstance(op, ast.Eq | ast.NotEq):
        eq = _equal(col, value)
        return eq if isinstance(op, ast.Eq) else ~eq
    nums = pd.to_numeric(col, errors="coerce").to_numpy(dtype=float)
    with np.errstate(invalid="ignore"):
        return np.asarray(_CMP[type(op)](nums, float(value)), dtype=bool)


def _equal(col: pd.Series, value: object) -> np.ndarray:
    if isinstance(value, str):
        return (col.astype(str) == value).to_numpy()
    return (pd.to_numeric(col, errors="coerce") == value).to_numpy()


def _get(frame: pd.DataFrame, name: str, text: str) -> pd.Series:
    if name not in frame.columns:
        raise InvalidTableError([
            f"statistic expression {text!r} names column {name!r}, which the table does "
            f"not have; its columns are: {', '.join(map(str, frame.columns))}"])
    return frame[name]


def _numeric(frame: pd.DataFrame, name: str, text: str) -> np.ndarray:
    col = _get(frame, name, text)
    values = pd.to_numeric(col, errors="coerce")
    bad = values.isna() & col.notna()
    if bad.any():
        raise InvalidTableError([
            f"statistic expression {text!r}: column {name!r} holds non-numeric values "
            f"(e.g. {col[bad].iloc[0]!r} in row {int(np.flatnonzero(bad)[0])}); map them "
            "to numbers (0/1 for a flag) before bootstrapping"])
    return values.to_numpy(dtype=float)


def expression(text: str | Sequence[str]) -> Sums:
    """Compile a statistic of column rates into :class:`Sums` (safe: nothing is run).

    Parameters
    ----------
    text : str or sequence of str
        One expression, or ``name = expression`` lines (newlines or ``;`` between them).
        A missing value of a column is left out of that column's means (counted in
        neither numerator nor denominator).

    Returns
    -------
    Sums

    Raises
    ------
    InvalidOptionError
        For anything outside the language (names the offending part).

    Examples
    --------
    >>> import pandas as pd
    >>> d = pd.DataFrame({"flag": [1, 0, 1, 1], "condition": ["A", "A", "B", "B"]})
    >>> s = expression('ratio = mean(flag, condition == "B") / mean(flag, condition == "A")')
    >>> s.names, float(s.evaluate(d)[0])
    (('ratio',), 2.0)
    """
    if not isinstance(text, str):
        text = "\n".join(text)
    if len(text) > MAX_EXPRESSION:
        raise InvalidOptionError(
            f"statistic expression has {len(text)} characters; at most {MAX_EXPRESSION}")
    try:
        tree = ast.parse(text.strip(), mode="exec")
    except SyntaxError as exc:
        raise InvalidOptionError(
            f"statistic expression {text!r} does not parse: {exc.msg} (column "
            f"{exc.offset}); write e.g. mean(red_flag, condition == \"B\")") from None
    comp = _Compiler(text.strip())
    names: list[str] = []
    parts: list[Callable[[np.ndarray], np.ndarray]] = []
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 \
                and isinstance(stmt.targets[0], ast.Name):
            name, node = stmt.targets[0].id, stmt.value
        elif isinstance(stmt, ast.Expr):
            name, node = ast.get_source_segment(comp.text, stmt.value) or "value", stmt.value
        else:
            raise _refuse(stmt, comp.text, "one expression or name = expression per line")
        if name in names:
            raise InvalidOptionError(f"statistic expression names {name!r} twice")
        names.append(name)
        parts.append(comp.compile(node))
    if not parts:
        raise InvalidOptionError("statistic expression is empty")
    terms, source = list(comp.terms), comp.text

    def columns(frame: pd.DataFrame) -> np.ndarray:
        out = np.empty((len(frame), len(terms)))
        for j, (col, where) in enumerate(terms):
            mask = np.ones(len(frame), dtype=bool) if where is None \
                else _mask(frame, where, source)
            if col is None:
                out[:, j] = mask
            elif col.startswith("\0present:"):
                out[:, j] = mask & ~np.isnan(_numeric(frame, col[9:], source))
            else:
                v = _numeric(frame, col, source)
                out[:, j] = np.where(mask & ~np.isnan(v), v, 0.0)
        return out

    def combine(t: np.ndarray) -> np.ndarray:
        return np.stack([np.broadcast_to(f(t), t.shape[:-1]) for f in parts], axis=-1)

    return Sums(columns=columns, combine=combine, names=tuple(names),
                name=names[0] if len(names) == 1 else "; ".join(names))
