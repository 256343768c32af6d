"""Planning clustered evals: analytic power and MDE, pilot-based simulation, plots.

- :func:`power`, :func:`mde`, :func:`n_clusters_for_power` (analytic, t(K - 1) and the
  noncentral t, Kish design effect for equal or unequal cluster sizes);
- :func:`pilot_power` / :func:`bootstrap_power` (resample a pilot's clusters at new K)
  and :func:`parametric_power` (draw crossed data from variance components);
- :func:`coverage` (:mod:`evalmix.plan.study`): coverage studies of interval methods on
  simulated cells, and :mod:`evalmix.plan.headline`: the coverage study of the report's
  recommendation.
"""

from __future__ import annotations

from evalmix.plan.pilot import (
    PilotPowerResult,
    bootstrap_power,
    components_from_fit,
    parametric_power,
    pilot_power,
)
from evalmix.plan.power import (
    PowerResult,
    design_variance,
    mde,
    n_clusters_for_power,
    power,
    power_from_ncp,
)
from evalmix.plan.study import CoverageResult, coverage

__all__ = [
    "PowerResult",
    "PilotPowerResult",
    "power",
    "mde",
    "n_clusters_for_power",
    "design_variance",
    "power_from_ncp",
    "pilot_power",
    "bootstrap_power",
    "parametric_power",
    "components_from_fit",
    "coverage",
    "CoverageResult",
]
