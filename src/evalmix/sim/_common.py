"""Shared pieces of the simulators."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from evalmix.tidy import tidy_rows


@dataclass(frozen=True)
class SimResult:
    """A simulated table plus the truth it was drawn from.

    Attributes
    ----------
    data : pandas.DataFrame
        Long-format table in the schema :func:`evalmix.read` accepts.
    truth : Mapping
        True parameters and true estimands (see the simulator's docstring).
    read_kwargs : Mapping
        Keyword arguments for :func:`evalmix.read` that map the columns to roles.
    seed : int
        The seed that reproduces the table (see :mod:`evalmix.seeding`).
    """

    data: pd.DataFrame
    truth: Mapping[str, Any]
    read_kwargs: Mapping[str, Any] = field(default_factory=dict)
    seed: int | None = None

    def tidy(self) -> pd.DataFrame:
        """The scalar truths in the result contract (:data:`evalmix.tidy.RESULT_COLUMNS`):
        ``estimand="truth"``, ``contrast`` the key (nested keys joined by ``"."``, e.g.
        ``"sds.judge"``), ``estimate`` the value, ``method="simulation"``. Array-valued
        truths (realised effects) are left out."""
        def flat(prefix: str, value: Any):
            if isinstance(value, Mapping):
                for k, v in value.items():
                    yield from flat(f"{prefix}.{k}" if prefix else str(k), v)
            elif isinstance(value, int | float | np.integer | np.floating) and not \
                    isinstance(value, bool):
                yield {"contrast": prefix, "estimate": float(value)}

        return tidy_rows(list(flat("", self.truth)) or pd.DataFrame(columns=["contrast"]),
                         estimand="truth", method="simulation", scale="identity",
                         seed=self.seed, note="")

    def __str__(self) -> str:
        truth = self.tidy()
        shown = ", ".join(f"{c}={e:.4g}" for c, e in zip(truth["contrast"][:8],
                                                          truth["estimate"][:8], strict=True))
        more = f" (+{len(truth) - 8} more)" if len(truth) > 8 else ""
        return (f"SimResult: {len(self.data)} rows x {self.data.shape[1]} columns, "
                f"seed={self.seed}\ntruth: {shown}{more}")

    def table(self, **overrides: Any):  # -> EvalTable
        """The simulated data read into an :class:`~evalmix.data.table.EvalTable`."""
        from evalmix.data import read

        return read(self.data, **{**self.read_kwargs, **overrides})
