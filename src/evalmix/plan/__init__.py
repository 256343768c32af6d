"""Planning clustered evals: analytic power and MDE, pilot-based simulation, plots.

- :func:`power`, :func:`mde`, :func:`n_clusters_for_power` (analytic, t(K - 1) and the
  noncentral t, Kish design effect for equal or unequal cluster sizes);
- :func:`pilot_power` / :func:`bootstrap_power` (resample a pilot's clusters at new K)
  and :func:`parametric_power` (draw crossed data from variance components);
- coverage studies live in :func:`evalmix.sim.coverage` (:mod:`evalmix.sim.study`).
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
]
