"""Shared pieces of the simulators."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd


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

    def table(self, **overrides: Any):  # -> EvalTable
        """The simulated data read into an :class:`~evalmix.data.table.EvalTable`."""
        from evalmix.data import read

        return read(self.data, **{**self.read_kwargs, **overrides})
