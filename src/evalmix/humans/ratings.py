"""Read a long table of ratings by humans and LLM judges once, and validate it.

One row per rating: a unit (``item=``, one column or several), a rater (``rater=``), the
rating (``rating=``: a pairwise verdict ``a``/``b``/``tie``, a label, or a score), and
which raters are people: a ``rater_kind`` column (``human`` / ``llm``) or a list
``humans=[...]``. Optional: a cluster above the units (``cluster=``, constant within a
unit), strata (``by=``: each stratum is analysed on its own, e.g. HANNA's criteria) and,
for verdicts, the order the answers were shown in (``first_shown=``: ``a`` when
``model_a``'s answer came first).

A judge that rated the same unit in both orders becomes three raters: ``"X [AB]"``
(``first_shown = a``), ``"X [BA]"`` and ``"X [AB+BA]"``, the verdict when the two orders
agree and ``tie`` when they do not (Zheng et al. 2023's rule for an inconsistent
judge). Their agreement is then one row per order, and ``[AB]`` vs ``[BA]`` is the
judge's order-swapped consistency.

References
----------
Zheng, L. et al. (2023). Judging LLM-as-a-judge with MT-Bench and Chatbot Arena.
NeurIPS 36. arXiv:2306.05685
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import get_args

import numpy as np
import pandas as pd

from evalmix.data.load import load_frame
from evalmix.errors import DroppedRowsWarning, EvalmixError, InvalidOptionError, check_option
from evalmix.vocabulary import HumanTies, RatingKind

__all__ = ["Ratings", "read_ratings", "RATING_KINDS", "VERDICTS"]

RATING_KINDS: tuple[str, ...] = get_args(RatingKind)
#: Pairwise verdicts in their order on the ``model_a`` win scale (0, 0.5, 1).
VERDICTS: tuple[str, ...] = ("b", "tie", "a")
#: A score with more distinct values than this is continuous (no agreement table).
MAX_CATEGORIES = 30
_MISSING = {"", "na", "nan", "none", "null"}
_KINDS = {"human": "human", "llm": "llm"}
_VERDICT_VALUE = {"b": 0.0, "tie": 0.5, "a": 1.0}


@dataclass(frozen=True)
class Ratings:
    """A validated long table of ratings (build it with :func:`read_ratings`).

    Attributes
    ----------
    frame : pandas.DataFrame
        One row per rating: ``unit``, ``stratum``, ``cluster``, ``rater``, ``kind``
        (``human``, ``llm`` or ``""`` when unknown), ``value`` (the numeric rating:
        verdicts 0 / 0.5 / 1 for ``b`` / ``tie`` / ``a``, labels their position) and
        ``code`` (the category index, -1 for a continuous score).
    units : pandas.DataFrame
        One row per unit (index ``unit``): ``stratum``, ``cluster`` and the extra
        columns kept (each constant within a unit).
    kind : {"verdict", "label", "score"}
    categories : tuple
        The ordered categories (empty for a continuous score).
    humans, llms : tuple of str
        Raters of each kind (after order splitting).
    orders : tuple of (judge, AB rater, BA rater, combined rater)
        Judges split by presentation order.
    cluster : str or None
        The cluster column (None: every unit is its own cluster).
    n_raw : int
        Rows read.
    dropped : Mapping[str, int]
        Rows dropped, by reason.
    source : str
    """

    frame: pd.DataFrame = field(repr=False)
    units: pd.DataFrame = field(repr=False)
    kind: RatingKind
    categories: tuple
    humans: tuple[str, ...]
    llms: tuple[str, ...]
    orders: tuple[tuple[str, str, str, str], ...] = ()
    cluster: str | None = None
    n_raw: int = 0
    dropped: Mapping[str, int] = field(default_factory=dict)
    source: str = "DataFrame"

    def __post_init__(self) -> None:
        object.__setattr__(self, "dropped", MappingProxyType(dict(self.dropped)))

    @property
    def values(self) -> np.ndarray:
        """The numeric value of each category (empty for a continuous score)."""
        if self.kind == "verdict":
            return np.array([_VERDICT_VALUE[c] for c in self.categories])
        if self.kind == "label":
            return np.arange(len(self.categories), dtype=float)
        return np.array(self.categories, dtype=float)

    @property
    def raters(self) -> tuple[str, ...]:
        return tuple(pd.unique(self.frame["rater"]))

    @property
    def strata(self) -> tuple[str, ...]:
        return tuple(pd.unique(self.units["stratum"]))

    def kind_of(self, rater: str) -> str:
        return "human" if rater in self.humans else "llm" if rater in self.llms else ""

    def matrix(self, stratum: str, raters: Sequence[str], *, column: str = "value"
               ) -> tuple[pd.Index, np.ndarray]:
        """``(units, (n_units, len(raters)) array)`` of one stratum; NaN where a rater did
        not rate a unit (``column="code"``: category indices, -1 missing)."""
        f = self.frame[self.frame["stratum"] == stratum]
        wide = f.pivot(index="unit", columns="rater", values=column)
        wide = wide.reindex(columns=list(raters))
        units = self.units.index[self.units["stratum"] == stratum]
        wide = wide.reindex(units)
        out = wide.to_numpy(dtype=float)
        if column == "code":
            out = np.where(np.isnan(out), -1, out)
        return wide.index, out

    def describe(self) -> str:
        n_units = len(self.units)
        return (f"{len(self.frame)} ratings of {n_units} units by {len(self.raters)} raters "
                f"({len(self.humans)} human, {len(self.llms)} LLM); ratings are "
                f"{self.kind}s" + (f", clustered by {self.cluster!r}" if self.cluster else ""))


def _columns(spec: str | Sequence[str] | None, what: str) -> list[str]:
    if spec is None:
        return []
    cols = [spec] if isinstance(spec, str) else list(spec)
    if not all(isinstance(c, str) for c in cols):
        raise InvalidOptionError(f"{what}= must be a column name or a list of them, got {spec!r}")
    return cols


def _key(frame: pd.DataFrame, cols: list[str]) -> pd.Series:
    """Labels joined by " / " (empty and missing parts left out)."""
    parts = [frame[c].astype(object).where(frame[c].notna(), "").astype(str).str.strip()
             for c in cols]
    out = parts[0]
    for p in parts[1:]:
        out = out.where(p == "", out.where(out == "", out + " / ") + p)
    return out


def _check_columns(frame: pd.DataFrame, cols: list[str], source: str) -> None:
    missing = [c for c in cols if c not in frame.columns]
    if missing:
        have = ", ".join(repr(str(c)) for c in list(frame.columns)[:20])
        raise EvalmixError(f"{source}: no column {', '.join(repr(m) for m in missing)}; the "
                           f"table has {have}. Name the right columns with item=, rater=, "
                           "rating=, rater_kind=, cluster=, by=")


def _parse_ratings(raw: pd.Series) -> tuple[str, pd.Series, tuple]:
    """(kind, numeric values or labels, categories) of the non-missing ratings."""
    numeric = pd.to_numeric(raw, errors="coerce")
    if numeric.notna().all():
        values = numeric.astype(float)
        distinct = np.unique(values.to_numpy())
        cats = tuple(float(v) for v in distinct) if distinct.size <= MAX_CATEGORIES else ()
        return "score", values, cats
    labels = raw.astype(str).str.strip()
    low = labels.str.lower()
    if set(low.unique()) <= set(VERDICTS):
        return "verdict", low, ()
    return "label", labels, tuple(sorted(labels.unique()))


def read_ratings(
    data: str | os.PathLike[str] | pd.DataFrame,
    *,
    item: str | Sequence[str] = "item_id",
    rater: str | Sequence[str] = "rater",
    rating: str | None = None,
    rater_kind: str | None = "rater_kind",
    humans: Sequence[str] | None = None,
    cluster: str | None = None,
    by: str | Sequence[str] | None = None,
    first_shown: str | None = "first_shown",
    ties: HumanTies = "keep",
    keep: Sequence[str] = (),
    encoding: str | None = None,
) -> Ratings:
    """Read and validate a long table of ratings (see the module docstring).

    Parameters
    ----------
    data : path or pandas.DataFrame
        CSV/TSV/Parquet/JSONL file or a DataFrame (never modified).
    item : str or list of str
        Column(s) naming the rated unit.
    rater : str or list of str
        Column(s) naming the rater (e.g. ``["rater", "eval_prompt"]`` makes each prompt
        of an LLM a rater of its own).
    rating : str, optional
        The rating column; default the first of ``rating``, ``score``, ``outcome``.
    rater_kind : str or None
        Column with ``human`` / ``llm`` (used when present).
    humans : list of str, optional
        The human raters (every other rater is an LLM); overrides ``rater_kind``.
    cluster : str, optional
        A cluster above the units (constant within a unit).
    by : str or list of str, optional
        Strata analysed separately.
    first_shown : str or None
        Verdicts: the presentation-order column (used when present).
    ties : {"keep", "exclude"}
        ``"exclude"`` drops tie verdicts (counted), as Zheng et al.'s agreement
        "without ties".
    keep : list of str
        Further columns to keep per unit (each must be constant within a unit).
    encoding : str, optional
        Text encoding of a CSV file.

    Returns
    -------
    Ratings

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"item_id": [1, 1, 2, 2], "rater": ["ann", "gpt", "ann", "gpt"],
    ...                    "rater_kind": ["human", "llm"] * 2, "outcome": ["a", "a", "b", "tie"]})
    >>> read_ratings(df).describe()
    '4 ratings of 2 units by 2 raters (1 human, 1 LLM); ratings are verdicts'
    """
    check_option("ties", ties, ("keep", "exclude"))
    item_cols, rater_cols = _columns(item, "item"), _columns(rater, "rater")
    if not item_cols or not rater_cols:
        raise InvalidOptionError("item= and rater= each need at least one column")
    by_cols, keep_cols = _columns(by, "by"), _columns(keep, "keep")
    text = [*item_cols, *rater_cols, *by_cols, *([cluster] if cluster else [])]
    if rater_kind:
        text.append(rater_kind)
    frame, source = load_frame(data, text_columns=text, encoding=encoding)
    if rating is None:
        found = [c for c in ("rating", "score", "outcome") if c in frame.columns]
        if not found:
            raise EvalmixError(f"{source}: name the rating column with rating= (no column "
                               "'rating', 'score' or 'outcome')")
        rating = found[0]
    _check_columns(frame, [*item_cols, *rater_cols, rating, *by_cols, *keep_cols,
                           *([cluster] if cluster else [])], source)
    n_raw = len(frame)
    dropped: dict[str, int] = {}
    raw = frame[rating]
    missing = raw.isna() | raw.astype(str).str.strip().str.lower().isin(_MISSING)
    if missing.any():
        dropped["missing_rating"] = int(missing.sum())
    f = frame.loc[~missing]
    if f.empty:
        raise EvalmixError(f"{source}: column {rating!r} has no ratings (all missing)")
    kind, parsed, categories = _parse_ratings(f[rating])
    out = pd.DataFrame({
        "unit": _key(f, [*by_cols, *item_cols]).to_numpy(),
        "stratum": _key(f, by_cols).to_numpy() if by_cols else "",
        "cluster": f[cluster].astype(str).str.strip().to_numpy() if cluster else "",
        "rater": _key(f, rater_cols).to_numpy(),
        "label": parsed.to_numpy(),
    })
    for c in keep_cols:
        out[c] = f[c].to_numpy()
    kinds = _rater_kinds(f, out, rater_kind, humans, source)
    order = (f[first_shown].astype(str).str.strip().str.lower().to_numpy()
             if kind == "verdict" and first_shown and first_shown in f.columns else None)
    if ties == "exclude" and kind == "verdict":
        tie = (out["label"] == "tie").to_numpy()
        if tie.any():
            dropped["tie_excluded"] = int(tie.sum())
            out = out.loc[~tie].reset_index(drop=True)
            order = None if order is None else order[~tie]
    orders: list[tuple[str, str, str, str]] = []
    if order is not None:
        out, kinds, orders = _split_orders(out, order, kinds, dropped)
    out = _check_units(out, keep_cols, cluster, source)
    if kind == "score":
        out["value"] = out["label"].astype(float)
        lookup = {v: i for i, v in enumerate(categories)}
        out["code"] = out["value"].map(lookup).fillna(-1).astype(float) if categories else -1.0
    else:
        if kind == "verdict":
            categories = tuple(v for v in VERDICTS if v in set(out["label"]))
        lookup = {c: i for i, c in enumerate(categories)}
        out["code"] = out["label"].map(lookup).astype(float)
        out["value"] = (out["label"].map(_VERDICT_VALUE) if kind == "verdict"
                        else out["code"]).astype(float)
    out["kind"] = out["rater"].map(kinds).fillna("")
    units = out.groupby("unit", sort=False)[["stratum", "cluster", *keep_cols]].first()
    if dropped:
        warnings.warn(f"{source}: dropped {sum(dropped.values())} of {n_raw} rows ("
                      + ", ".join(f"{k}: {v}" for k, v in dropped.items()) + ")",
                      DroppedRowsWarning, stacklevel=3)
    humans_t = tuple(r for r in pd.unique(out["rater"]) if kinds.get(r) == "human")
    llms_t = tuple(r for r in pd.unique(out["rater"]) if kinds.get(r) == "llm")
    return Ratings(out.drop(columns="label"), units, kind, categories, humans_t, llms_t,  # type: ignore[arg-type]
                   tuple(orders), cluster, n_raw, dropped, source)


def _rater_kinds(f: pd.DataFrame, out: pd.DataFrame, rater_kind: str | None,
                 humans: Sequence[str] | None, source: str) -> dict[str, str]:
    raters = pd.unique(out["rater"])
    if humans is not None:
        listed = {str(h) for h in ([humans] if isinstance(humans, str) else humans)}
        unknown = sorted(listed - set(raters))
        if unknown:
            raise InvalidOptionError(f"humans= names {unknown[:5]} that rated nothing in {source}; "
                                     f"the raters are {list(raters)[:10]}")
        return {r: "human" if r in listed else "llm" for r in raters}
    if not rater_kind or rater_kind not in f.columns:
        return {}
    k = f[rater_kind].astype(str).str.strip().str.lower().to_numpy()
    bad = sorted(set(k) - set(_KINDS))
    if bad:
        raise EvalmixError(f"{source}: column {rater_kind!r} holds {bad[:5]}; it must say "
                           "'human' or 'llm' for every rater (or give humans=[...])")
    pairs = pd.DataFrame({"rater": out["rater"].to_numpy(), "kind": k}).drop_duplicates()
    clash = pairs["rater"][pairs["rater"].duplicated()].unique()
    if clash.size:
        raise EvalmixError(f"{source}: rater {clash[0]!r} is marked both human and llm in "
                           f"column {rater_kind!r}; a rater has one kind")
    return dict(zip(pairs["rater"], pairs["kind"], strict=True))


def _split_orders(out: pd.DataFrame, order: np.ndarray, kinds: dict[str, str],
                  dropped: dict[str, int]):  # noqa: ANN202
    """Split each rater that judged some unit in both orders into [AB], [BA], [AB+BA];
    its ratings of unknown order are dropped (counted)."""
    known = np.isin(order, ("a", "b"))
    both = (pd.DataFrame({"unit": out["unit"], "rater": out["rater"], "o": order})[known]
            .drop_duplicates().groupby(["rater", "unit"]).size())
    split = sorted(set(both[both == 2].index.get_level_values("rater")))
    if not split:
        return out, kinds, []
    is_split = out["rater"].isin(split).to_numpy()
    lost = is_split & ~known
    if lost.any():
        dropped["unknown_order"] = int(lost.sum())
    out = out.copy()
    tag = np.where(order == "a", " [AB]", " [BA]")
    out.loc[is_split, "rater"] = out.loc[is_split, "rater"] + tag[is_split]
    out = out.loc[~lost].reset_index(drop=True)
    rows, orders = [], []
    for judge in split:
        a = out[out["rater"] == f"{judge} [AB]"].drop_duplicates("unit").set_index("unit")
        b = out[out["rater"] == f"{judge} [BA]"].drop_duplicates("unit").set_index("unit")
        common = a.index.intersection(b.index)
        merged = a.loc[common].copy()
        same = merged["label"].to_numpy() == b.loc[common, "label"].to_numpy()
        merged["label"] = np.where(same, merged["label"], "tie")
        merged["rater"] = f"{judge} [AB+BA]"
        rows.append(merged.reset_index())
        names = (judge, f"{judge} [AB]", f"{judge} [BA]", f"{judge} [AB+BA]")
        orders.append(names)
        for n in names[1:]:
            kinds[n] = kinds.get(judge, "")
    return pd.concat([out, *rows], ignore_index=True), kinds, orders


def _check_units(out: pd.DataFrame, keep: list[str], cluster: str | None,
                 source: str) -> pd.DataFrame:
    dup = out.duplicated(["unit", "rater"])
    if dup.any():
        ex = out.loc[dup, ["unit", "rater"]].iloc[0]
        raise EvalmixError(
            f"{source}: {int(dup.sum())} ratings repeat a (unit, rater) pair, e.g. rater "
            f"{ex['rater']!r} on unit {ex['unit']!r}. Add the column that tells them apart "
            "to rater= (e.g. rater=['rater', 'vote'] for unnamed annotators, ['rater', "
            "'eval_prompt'] for prompts) or to item= / by=")
    for col in (["cluster"] if cluster else []) + keep:
        n = out.groupby("unit", sort=False)[col].nunique(dropna=False)
        if (n > 1).any():
            what = cluster if col == "cluster" else col
            raise EvalmixError(f"{source}: column {what!r} takes several values within unit "
                               f"{n.index[n > 1][0]!r}; it must be constant within a unit "
                               "(a cluster above the items)")
    return out
