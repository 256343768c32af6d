"""AB/BA classes of matched cells: what each judge does when the order is swapped.

A matched cell's two verdicts (the AB and the BA order) give one of :data:`_OUTCOMES`;
:func:`position_classes` counts the classes these form per judge, with cluster-robust
intervals for each quantity (:data:`CLASS_QUANTITIES`) and the position-controlled win
rate, and :func:`classes_wide` lays them out for the report.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from evalmix.errors import TooFewClustersError, check_count, check_level
from evalmix.inference.bootstrap import MIN_REPS
from evalmix.inference.custom import bootstrap
from evalmix.inference.sums import Sums
from evalmix.seeding import SeedLike, child_seed, resolve_seed

if TYPE_CHECKING:
    from evalmix.data.table import EvalTable


#: The nine (verdict in the AB order, verdict in the BA order) outcomes of a matched
#: cell, with ``A`` the cell's model_a and ``AB`` the record that showed it first.
_OUTCOMES = (("A", "A"), ("B", "B"), ("A", "B"), ("B", "A"), ("tie", "tie"),
             ("A", "tie"), ("tie", "A"), ("B", "tie"), ("tie", "B"))


#: Each quantity as (numerator weights, denominator weights) over :data:`_OUTCOMES`;
#: ``None`` denominator = every matched cell. ``t`` in the controlled rate is the tie
#: score (0.5 under ties="half", 0 under "separate"), filled in at run time.
_CLASS_WEIGHTS: dict[str, tuple[tuple[float, ...], tuple[float, ...] | None]] = {
    "stable_condition_win": ((1, 1, 0, 0, 0, 0, 0, 0, 0), None),
    "stable_slot_win": ((0, 0, 1, 1, 0, 0, 0, 0, 0), None),
    "stable_tie": ((0, 0, 0, 0, 1, 0, 0, 0, 0), None),
    "flip": ((0, 0, 0, 0, 0, 1, 1, 1, 1), None),
    "condition_win_a": ((1, 0, 0, 0, 0, 0, 0, 0, 0), None),
    "condition_win_b": ((0, 1, 0, 0, 0, 0, 0, 0, 0), None),
    "slot_win_first": ((0, 0, 1, 0, 0, 0, 0, 0, 0), None),
    "slot_win_second": ((0, 0, 0, 1, 0, 0, 0, 0, 0), None),
    "flip_to_a": ((0, 0, 0, 0, 0, 1, 1, 0, 0), None),
    "flip_to_b": ((0, 0, 0, 0, 0, 0, 0, 1, 1), None),
    # decisive verdicts won by the answer shown first, among decisive verdicts
    "first_shown_win_rate": ((1, 1, 2, 0, 0, 1, 0, 0, 1), (2, 2, 2, 2, 0, 1, 1, 1, 1)),
}


#: The class counts come first in :data:`_CLASS_WEIGHTS` (the rates after them).
_N_CLASSES = 10


#: Quantities of :func:`position_classes`, in output order.
CLASS_QUANTITIES: tuple[str, ...] = (*_CLASS_WEIGHTS, "controlled_win_rate")


CLASS_COLUMNS = ("judge", "quantity", "count", "estimate", "lo", "hi", "n_cells",
                 "n_clusters", "cluster", "level", "reps", "seed", "ci_type")


def _controlled_weights(tie: float) -> tuple[float, ...]:
    """model_b's score averaged over both orders, per outcome (``tie``: a tie's score)."""
    score = {"A": 0.0, "B": 1.0, "tie": tie}
    return tuple((score[ab] + score[ba]) / 2 for ab, ba in _OUTCOMES)


def _cells(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per matched AB/BA cell: its ``pair_id`` and outcome ``code`` (the index
    of its two verdicts in :data:`_OUTCOMES`)."""
    known = frame[(frame["pair_id"] >= 0) & frame["a_first"].notna()]
    # the order as the model shown first (a record may list the models either way round)
    shown = known.assign(_first=np.where(known["a_first"] == 1.0, known["model_a"],
                                         known["model_b"]))
    size = shown.groupby("pair_id")["_first"].transform("size")
    orders = shown.groupby("pair_id")["_first"].transform("nunique")
    both = known[((size == 2) & (orders == 2)).to_numpy()].sort_values(["pair_id", "row"])
    if both.empty:
        return pd.DataFrame(columns=["pair_id", "code"])
    # the cell's A: model_a of its first record; each verdict re-expressed for A / B
    first = both.groupby("pair_id")["model_a"].transform("first")
    winner = np.where(both["verdict"] == "a", both["model_a"],
                      np.where(both["verdict"] == "b", both["model_b"], None))
    who = np.where(winner == None, "tie", np.where(winner == first, "A", "B"))  # noqa: E711
    a_shown_first = np.where(both["model_a"] == first, both["a_first"] == 1.0,
                             both["a_first"] == 0.0)
    rec = pd.DataFrame({"pair_id": both["pair_id"].to_numpy(), "who": who,
                        "ab": a_shown_first})
    ab = rec[rec["ab"]].set_index("pair_id")["who"]
    ba = rec[~rec["ab"]].set_index("pair_id")["who"]
    code_of = {o: i for i, o in enumerate(_OUTCOMES)}
    pair = ab.index.to_numpy()
    codes = np.array([code_of[(x, y)] for x, y in zip(ab.to_numpy(), ba.loc[pair].to_numpy(),
                                                        strict=True)], dtype=np.int64)
    return pd.DataFrame({"pair_id": pair, "code": codes})


def _class_sums(tie: float) -> tuple[np.ndarray, np.ndarray]:
    """(numerator, denominator) weights, (9, Q), of every quantity over the outcomes."""
    num = [np.asarray(n, float) for n, _ in _CLASS_WEIGHTS.values()]
    den = [np.ones(len(_OUTCOMES)) if d is None else np.asarray(d, float)
           for _, d in _CLASS_WEIGHTS.values()]
    num.append(np.asarray(_controlled_weights(tie)))
    den.append(np.ones(len(_OUTCOMES)))
    return np.column_stack(num), np.column_stack(den)


def _class_rows(table: EvalTable, code_of_pair: pd.Series, name: str,
                cluster: str | None, tie: float, level: float, reps: int, seed: int
                ) -> list[dict]:
    """The quantities of one judge's matched cells (or all of them): every quantity is a
    ratio of sums of outcome indicators, so one :func:`evalmix.bootstrap` with a
    :class:`~evalmix.inference.sums.Sums` statistic gives them all from the same
    resamples (each record carries half of its cell's indicator; a cell's two records
    share its cluster, so they are drawn together)."""
    num_w, den_w = _class_sums(tie)
    eye = np.eye(len(_OUTCOMES))

    def columns(frame: pd.DataFrame) -> np.ndarray:
        return 0.5 * eye[code_of_pair.loc[frame["pair_id"]].to_numpy()]

    def combine(totals: np.ndarray) -> np.ndarray:
        return (totals @ num_w) / (totals @ den_w)

    stat = Sums(columns, combine, names=CLASS_QUANTITIES, name="position_classes")
    counts = stat.values(table.data).sum(axis=0) @ num_w
    try:
        res = bootstrap(table, stat, cluster=cluster, reps=reps, level=level,
                        ci="expanded", seed=seed, progress=False)
        est, lo, hi, g = res.estimate, res.lo, res.hi, res.n_clusters
        unit = res.cluster or str(res.details.get("unit", "pair"))
    except TooFewClustersError:
        est = stat.evaluate(table.data)
        lo = hi = np.full(len(CLASS_QUANTITIES), np.nan)
        g = table.n_levels(cluster) if cluster else int(np.unique(table.data["pair_id"]).size)
        unit = cluster or "pair"
    n_cells = int(round(stat.values(table.data).sum()))
    return [{"judge": name, "quantity": q,
             "count": float(round(counts[j])) if j < _N_CLASSES else np.nan,
             "estimate": float(est[j]), "lo": float(lo[j]), "hi": float(hi[j]),
             "n_cells": n_cells, "n_clusters": int(g), "cluster": unit, "level": level,
             "reps": reps, "seed": seed,
             "ci_type": "expanded" if np.isfinite(lo[j]) else ""}
            for j, q in enumerate(CLASS_QUANTITIES)]


def position_classes(table: EvalTable, *, judge: str | None = None,
                     cluster: str | None = None, level: float = 0.95, reps: int = 2000,
                     seed: SeedLike = None) -> pd.DataFrame:
    """Matched AB/BA cells sorted into stable condition wins, stable slot wins, stable
    ties and flips, per judge and pooled, with cluster bootstrap intervals.

    A matched cell is one comparison (same item, judge and models; same replicate) judged
    in both orders, AB (its ``model_a`` shown first) and BA. Its two verdicts put it in
    one class:

    ``stable_condition_win``
        The same model wins in both orders (split into ``condition_win_a`` /
        ``condition_win_b``): a verdict about the answers, not the order.
    ``stable_slot_win``
        The answer in the same position wins in both orders, i.e. the winner swaps with
        the order (``slot_win_first`` / ``slot_win_second``): position decided it. This is
        the flip rate of :func:`position_bias` (a decisive verdict that reverses).
    ``stable_tie``
        A tie in both orders.
    ``flip``
        A tie in one order and a win in the other (``flip_to_a`` / ``flip_to_b``: the
        model the decisive verdict favoured).

    The four shares sum to 1 over the matched cells. Two rates follow from them:
    ``first_shown_win_rate`` = (2 slot_win_first + stable_condition_win + flips won by
    the answer shown first) / (2 (stable_condition_win + stable_slot_win) + flip), the
    share of decisive verdicts won by the answer shown first (the
    :func:`position_bias` rate restricted to matched cells), and
    ``controlled_win_rate`` = condition_win_b + (stable_slot_win)/2 + t stable_tie +
    (1 + t)/2 flip_to_b + t/2 flip_to_a, ``model_b``'s win rate averaged over both
    orders (the report's ``"B vs A"`` orientation; ``t`` = 0.5 under ``ties="half"``,
    0 under ``"separate"``), equal to :func:`evalmix.interval`'s
    ``controlled_win_rate`` on the same cells.

    Intervals: every quantity is a ratio of sums of outcome indicators, so one
    :func:`evalmix.bootstrap` with a :class:`~evalmix.inference.sums.Sums` statistic
    gives them all from the same resamples (``W @ numerators / W @ denominators``, no
    loop over replicates): clusters drawn with replacement, the table's strata held
    fixed, a cell's two records always together; the expanded percentile interval
    (Hesterberg 2015) that the report's cluster bootstrap rows use. Fewer than 5
    clusters: no interval.

    Parameters
    ----------
    table : EvalTable
        A pairwise table with a first-shown column and matched AB/BA pairs.
    judge : str, optional
        Cluster role holding the judge: one block of rows per judge, plus
        ``(all judges)``.
    cluster : str, optional
        Cluster role the cells are resampled by (e.g. ``"item"``: the cells of one item
        -- all its judges and models -- move together); default each cell (its AB/BA
        pair) alone.
    level : float
        Confidence level.
    reps : int
        Bootstrap replicates.
    seed : int or numpy.random.Generator, optional
        Master seed (recorded per row; each judge's block gets a child seed).

    Returns
    -------
    pandas.DataFrame
        Long: one row per judge x quantity, columns ``judge, quantity, count, estimate,
        lo, hi, n_cells, n_clusters, cluster, level, reps, seed, ci_type``
        (``count`` for the class shares; NaN for the two rates). Empty when the table
        has no matched AB/BA cell (single-order or no order column). Under
        ``ties="exclude"`` a cell with a tie has lost that record and is not matched:
        read with ``ties="half"`` or ``"separate"`` to classify ties.

    Examples
    --------
    >>> import evalmix
    >>> t = evalmix.datasets.load_table("mtbench_position_bias")  # doctest: +SKIP
    >>> evalmix.position_classes(t, judge="judge", cluster="item", seed=1)  # doctest: +SKIP

    References
    ----------
    Shi, L. et al. (2024). Judging the Judges: A Systematic Study of Position Bias in
    LLM-as-a-Judge. arXiv:2406.07791. https://doi.org/10.48550/arXiv.2406.07791
    Hesterberg, T. C. (2015). What teachers should know about the bootstrap. The
    American Statistician 69, 371-386. https://doi.org/10.1080/00031305.2015.1089789
    """
    level = check_level(level)
    reps = check_count("reps", reps, minimum=MIN_REPS)
    seed = resolve_seed(seed)
    if table.kind != "pairwise" or not table.has_order or table.single_order:
        return pd.DataFrame(columns=list(CLASS_COLUMNS))
    for role in (judge, cluster):
        if role is not None:
            table.check_cluster(role)
    tie = 0.5 if table.ties == "half" else 0.0
    cells = _cells(table.data)
    if cells.empty:
        return pd.DataFrame(columns=list(CLASS_COLUMNS))
    code_of_pair = cells.set_index("pair_id")["code"]
    pid = table.data["pair_id"].to_numpy()
    matched = table.subset(np.isin(pid, cells["pair_id"].to_numpy()))
    rows: list[dict] = []
    names: list[str] = []
    if judge is not None:
        labels = matched.data[judge].astype(str).to_numpy()
        names = sorted(set(labels))
        for i, name in enumerate(names):
            rows += _class_rows(matched.subset(labels == name), code_of_pair, name, cluster,
                                tie, level, reps, child_seed(seed, i))
    rows += _class_rows(matched, code_of_pair, "(all judges)", cluster, tie, level, reps,
                        child_seed(seed, len(names)) if names else seed)
    return pd.DataFrame(rows, columns=list(CLASS_COLUMNS))


#: The classes and rates the report shows, with their column titles.
_SHOWN = (("stable_condition_win", "stable condition wins"),
          ("stable_slot_win", "stable slot wins"), ("stable_tie", "stable ties"),
          ("flip", "flips"), ("controlled_win_rate", "controlled win rate (B vs A)"))


def classes_wide(classes: pd.DataFrame) -> pd.DataFrame:
    """:func:`position_classes` one row per judge: matched cells, then each class as
    ``share [lo, hi] (count)`` and the AB/BA-controlled win rate with its interval."""
    if classes is None or classes.empty:
        return pd.DataFrame()

    def cell(r: pd.Series) -> str:
        iv = (f" [{r['lo']:.3f}, {r['hi']:.3f}]" if np.isfinite(r["lo"])
              and np.isfinite(r["hi"]) else "")
        n = f" ({int(r['count'])})" if np.isfinite(r["count"]) else ""
        return f"{r['estimate']:.3f}{iv}{n}"

    rows = []
    for name, part in classes.groupby("judge", sort=False):
        by = part.set_index("quantity")
        first = by.iloc[0]
        rows.append({"judge": name, "matched cells": int(first["n_cells"]),
                     **{title: cell(by.loc[q]) for q, title in _SHOWN},
                     "clusters": f"{int(first['n_clusters'])} ({first['cluster']})"})
    return pd.DataFrame(rows)
