"""Id columns as their distinct labels and a code per row: the string work of a
million-row column (text, NFC, stripping, case folding, levels, the table's text column)
is that of its few distinct values (issue 32, Arena scale). Each step equals the pandas
row-by-row operation it replaces (tests/data/test_read_distinct.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = ["Labels", "distinct_text", "nfc", "per_text", "text_labels", "value_kinds"]


def value_kinds(values: pd.Series) -> set[str]:
    """The types of an object column's non-missing values (``int``, ``float``, ``str``,
    ...; numpy's named like Python's)."""
    kinds = {t.__name__ for t in pd.unique(values.dropna().map(type).to_numpy())}
    return {"int" if k.startswith(("int", "uint")) else "float" if k.startswith("float")
            else k.rstrip("_") for k in kinds}


def distinct_text(values: pd.Series | np.ndarray) -> tuple[np.ndarray, pd.Series]:
    """``values`` as text, factorized: a code per row (-1 missing) and the distinct texts
    (a ``"string"`` Series), the same texts as ``values.astype("string")`` row by row.

    Integer, boolean and string columns, and object columns holding one type of str or
    int, are factorized *before* the text conversion, so a million-row id column is
    converted as its few distinct values; others (floats, where ``-0.0`` and ``0.0``
    hash alike, mixed objects, where ``1``, ``1.0`` and ``True`` do) are converted first.
    """
    s = values if isinstance(values, pd.Series) else pd.Series(values, dtype=object)
    objects = pd.api.types.is_object_dtype(s.dtype)
    if objects:
        direct = value_kinds(s) in ({"str"}, {"int"})
    else:
        direct = (isinstance(s.dtype, pd.StringDtype) or pd.api.types.is_integer_dtype(s.dtype)
                  or pd.api.types.is_bool_dtype(s.dtype))
    if direct:
        codes, uniques = pd.factorize(s)
        text = pd.Series(uniques, dtype=object if objects else None).astype("string")
    else:
        codes, uniques = pd.factorize(s.astype("string"))
        text = pd.Series(uniques, dtype="string")
    return np.asarray(codes, dtype=np.int64), text.reset_index(drop=True)


@dataclass(frozen=True)
class Labels:
    """An id column as its distinct labels and a code per row (-1: missing).

    The string work of a million-row column (NFC, strip, case folding, missing and
    empty ids, levels) is that of its distinct labels (a 3M-battle arena log has a few
    hundred models); rows only carry integer codes until :meth:`column` builds the
    table's text column by one ``take``. ``labels`` are distinct.
    """

    codes: np.ndarray
    labels: np.ndarray

    @classmethod
    def of(cls, codes: np.ndarray, labels: np.ndarray) -> Labels:
        """``labels[codes]`` with equal labels merged (NFC can join two spellings)."""
        merged, distinct = pd.factorize(pd.Series(labels, dtype=object))
        if len(distinct) < len(labels):
            codes = np.append(merged, -1)[codes]
        return cls(np.asarray(codes, dtype=np.int64), np.asarray(distinct, dtype=object))

    def values(self, rows: np.ndarray | None = None) -> np.ndarray:
        """The label of each row (of ``rows``, an index or mask) as an object array;
        None where missing."""
        out = np.empty(len(self.labels) + 1, dtype=object)  # the last: missing (-1)
        out[:-1] = self.labels
        return out[self.codes if rows is None else self.codes[rows]]

    def map(self, fn: Callable[[pd.Series], np.ndarray]) -> np.ndarray:
        """``fn`` (a ``"string"`` Series to an array) applied to the labels, per row;
        missing rows give None."""
        out = np.empty(len(self.labels) + 1, dtype=object)
        out[:-1] = fn(pd.Series(self.labels, dtype="string"))
        return out[self.codes]

    def codes_in(self, space: np.ndarray) -> np.ndarray:
        """Per row, the position of its label in ``space`` (distinct labels, e.g.
        another column's); -1 where the row is missing or its label is not there."""
        where = pd.Index(space, dtype=object).get_indexer(pd.Index(self.labels, dtype=object))
        return np.append(where, -1)[self.codes]

    def isin(self, words: Iterable[str]) -> np.ndarray:
        """Rows whose label is one of ``words`` (missing rows: False)."""
        hit = pd.Series(self.labels, dtype=object).isin(set(words)).to_numpy(dtype=bool)
        return np.append(hit, False)[self.codes]

    def n_levels(self, rows: np.ndarray | None = None) -> int:
        """Distinct labels among ``rows`` (an index or mask; all rows by default)."""
        c = self.codes if rows is None else self.codes[rows]
        c = c[c >= 0]
        return int(np.count_nonzero(np.bincount(c, minlength=len(self.labels))))

    def dense(self, rows: np.ndarray | None = None) -> np.ndarray:
        """Codes ``0..G-1`` of the labels of ``rows`` (none missing) in sorted label order:
        :func:`~evalmix.data.table.dense_codes` of :meth:`column`, from the distinct
        labels (sorted by code point, as pandas sorts text)."""
        c = self.codes if rows is None else self.codes[rows]
        present = np.bincount(c, minlength=len(self.labels)) > 0
        order = pd.Series(self.labels, dtype="str").argsort().to_numpy()
        kept = order[present[order]]
        rank = np.full(len(self.labels), -1, dtype=np.int64)
        rank[kept] = np.arange(kept.size)
        return rank[c]

    def column(self, rows: np.ndarray | None = None) -> pd.Series:
        """The table's text column (pandas' ``str`` dtype) of ``rows`` (an index; all
        rows by default), built from the distinct labels by one ``take``."""
        c = self.codes if rows is None else self.codes[rows]
        text = pd.array(list(self.labels), dtype="str")
        return pd.Series(text.take(c, allow_fill=True))


def nfc(text: pd.Series) -> pd.Series:
    """``text.str.normalize("NFC")`` (a ``"string"`` Series), normalising only the
    values that are not ASCII (ASCII text is its own NFC form)."""
    other = ~text.str.isascii().fillna(True).to_numpy(dtype=bool)
    if not other.any():
        return text
    out = text.copy()
    out[other] = text[other].str.normalize("NFC")
    return out


def text_labels(values: pd.Series) -> Labels:
    """An id column as :class:`Labels`: text, NFC-normalised and stripped (a label typed
    on one system and copied from another is one label)."""
    codes, text = distinct_text(values)
    norm = nfc(text).str.strip().to_numpy(dtype=object, na_value=None)
    return Labels.of(codes, norm)


def per_text(text: pd.Series, fn: Callable[[pd.Series], np.ndarray]) -> np.ndarray:
    """``fn`` (a string Series to an object array of the same length) applied to the
    distinct values of ``text`` only, spread back to every row; missing values give
    None (see :func:`distinct_text`)."""
    codes, uniques = distinct_text(text)
    out = np.empty(len(uniques) + 1, dtype=object)  # the last slot: missing (code -1)
    out[:-1] = fn(uniques)
    return out[codes]
