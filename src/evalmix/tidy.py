"""The result contract: one row schema for every public result's ``.tidy()``.

Every public result of evalmix is a frozen dataclass with ``__str__`` and ``.tidy()``;
``.tidy()`` returns a DataFrame whose first columns are :data:`RESULT_COLUMNS`, in this
order, with NaN where a field does not apply (``""`` for the key columns), followed by
the result's own columns. A row is identified by :data:`KEY_COLUMNS`: selecting on them
returns one row.

This module imports nothing else from evalmix, so every layer (design, inference,
models, sim, plan, report) can build its rows with :func:`tidy_rows`.

Columns
-------
estimand
    What is estimated: ``mean``, ``win_rate``, ``difference``, ``coef``, ... for
    intervals; ``fixed_effect`` / ``sd`` for a model fit; ``icc``, ``design_effect``,
    ``coverage`` ... for the design and planning results.
contrast
    Which one: the level, pair, term or factor (``"gpt-4"``, ``"treatment - control"``,
    ``"P[treatment] - P[control]"``), or the design cell of a planning row.
method
    How: ``naive``, ``CR2``, ``bootstrap``, ``wild``, a model back end (``bayes``,
    ``glmm_laplace``), ...
cluster
    Cluster level (``""``: rows independent; ``"model"`` for model-based rows).
scale
    The scale of ``estimate``/``lo``/``hi`` (``identity``, ``logit``, ``log-odds``,
    ``odds-ratio``, ``probability``, ``sd`` ...). Part of the key: the same term on two
    scales is two rows.
estimate, se, lo, hi, level, df
    Point estimate, its standard error, interval bounds at ``level``, degrees of freedom
    of a t reference (``inf``: normal; NaN: none).
n_clusters, reps, seed
    Clusters used, replicates (0 for analytic methods), the seed recorded.
note
    Plain words, e.g. why a row has no interval.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["RESULT_COLUMNS", "KEY_COLUMNS", "tidy_rows", "PicklableProxies"]

#: The first columns of every ``.tidy()`` frame, in this order.
RESULT_COLUMNS: tuple[str, ...] = (
    "estimand", "contrast", "method", "cluster", "scale", "estimate", "se", "lo", "hi",
    "level", "df", "n_clusters", "reps", "seed", "note",
)
#: Columns that identify a row: selecting on them returns exactly one row.
KEY_COLUMNS: tuple[str, ...] = ("estimand", "contrast", "method", "cluster", "scale")


def tidy_rows(rows: pd.DataFrame | Iterable[Mapping[str, Any]], **constant: Any
              ) -> pd.DataFrame:
    """A frame in the result contract: :data:`RESULT_COLUMNS` first, then the rest.

    Parameters
    ----------
    rows : DataFrame or iterable of mappings
        The result's rows; columns named as in :data:`RESULT_COLUMNS` fill those, others
        are kept after them in their order.
    **constant
        Values for every row (only for columns the rows do not have). Key columns
        neither in ``rows`` nor here, and missing values in them, are ``""``; other
        missing columns are NaN.

    Examples
    --------
    >>> f = tidy_rows([{"estimate": 0.5, "extra": 1}], estimand="mean", method="naive")
    >>> list(f.columns[:6]), f.columns[-1]
    (['estimand', 'contrast', 'method', 'cluster', 'scale', 'estimate'], 'extra')
    >>> bool(f["se"].isna().all()), f.loc[0, "cluster"]
    (True, '')
    """
    frame = rows.copy() if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    frame = frame.reset_index(drop=True)
    for k, v in constant.items():
        if k not in frame.columns:
            frame[k] = v
    for k in RESULT_COLUMNS:
        if k not in frame.columns:
            frame[k] = "" if k in KEY_COLUMNS else np.nan
        elif k in KEY_COLUMNS and frame[k].isna().any():
            frame[k] = frame[k].astype(object).where(frame[k].notna(), "")
    rest = [c for c in frame.columns if c not in RESULT_COLUMNS]
    return frame[list(RESULT_COLUMNS) + rest]


class PicklableProxies:
    """Mixin for frozen results holding read-only mappings (``MappingProxyType``).

    A mapping proxy cannot be pickled; results are (e.g. back from a worker process),
    so the proxies travel as dicts and are wrapped again on unpickling.
    """

    def __getstate__(self) -> tuple[dict[str, Any], tuple[str, ...]]:
        proxied = tuple(k for k, v in vars(self).items() if isinstance(v, MappingProxyType))
        state = {k: dict(v) if k in proxied else v for k, v in vars(self).items()}
        return state, proxied

    def __setstate__(self, state: tuple[dict[str, Any], tuple[str, ...]]) -> None:
        values, proxied = state
        for k, v in values.items():
            object.__setattr__(self, k, MappingProxyType(v) if k in proxied else v)
