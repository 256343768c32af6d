"""The result of the pilot-based power routes (:mod:`evalmix.plan.pilot`,
:mod:`evalmix.plan.pilot_parametric`): one row per plan and factor
(:data:`PILOT_COLUMNS`), and the summary both routes make of their simulated tests.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats

from evalmix.errors import EvalmixError
from evalmix.tidy import tidy_rows

PILOT_COLUMNS: tuple[str, ...] = (
    "plan", "factor", "n_clusters", "power", "power_mcse", "mde", "mde_mcse", "se_rms",
    "sd_estimate", "mean_estimate", "null", "effect", "df", "reps", "level", "target_power",
    "method", "seed",
)


@dataclass(frozen=True, eq=False)
class PilotPowerResult:
    """Simulated power and minimum detectable effect per plan.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per plan, columns :data:`PILOT_COLUMNS` plus one ``n_levels_<factor>``
        column per factor for parametric plans. ``power`` is the share of replications
        whose CR1 t test rejects ``null`` at ``level``, ``power_mcse`` its Monte Carlo SE;
        ``mde = (t_{1-a/2, df} + t_{power, df}) * se_rms`` with ``se_rms`` the root mean
        square of the replications' standard errors, ``mde_mcse`` its Monte Carlo SE
        (delta method); ``sd_estimate`` is the empirical SD of the estimates.
    method : str
        ``"cluster bootstrap"`` or ``"parametric"``.
    reps, seed, level : as requested
    notes : tuple of str
    """

    table: pd.DataFrame
    method: str
    reps: int
    seed: int | str | None
    level: float
    notes: tuple[str, ...] = field(default_factory=tuple)

    def tidy(self) -> pd.DataFrame:
        """One row per plan in the result contract (:data:`evalmix.tidy.RESULT_COLUMNS`):
        ``estimand="power"``, ``contrast`` the plan, ``cluster`` the factor varied,
        ``estimate`` the power and ``se`` its Monte Carlo SE (``scale="power"``); then
        the :attr:`table`'s columns."""
        t = self.table
        core = pd.DataFrame({"contrast": t["plan"].astype(str),
                             "cluster": t["factor"].astype(str), "estimate": t["power"],
                             "se": t["power_mcse"]})
        return tidy_rows(pd.concat([core, t.drop(columns=[c for c in core if c in t])],
                                   axis=1),
                         estimand="power", scale="power", note="")

    def __str__(self) -> str:
        cols = [c for c in ("plan", "n_clusters", "power", "power_mcse", "mde", "mde_mcse")
                if c in self.table]
        return (f"PilotPowerResult({self.method}, reps={self.reps}, seed={self.seed})\n"
                + self.table[cols].to_string(index=False, float_format="{:.4g}".format))


def _summarise(est, se, df, *, null, level, target_power, reps) -> dict[str, float]:
    ok = np.isfinite(est) & np.isfinite(se) & (se > 0)
    est, se = est[ok], se[ok]
    n = est.size
    if n < 2:
        raise EvalmixError("fewer than 2 usable replications; increase reps or clusters")
    tcrit = stats.t.ppf(1 - (1 - level) / 2, df)
    reject = np.abs(est - null) / se > tcrit
    p = float(reject.mean())
    mult = tcrit + stats.t.ppf(target_power, df)
    v = se**2
    rms = float(np.sqrt(v.mean()))
    return {"power": p, "power_mcse": float(np.sqrt(p * (1 - p) / n)),
            "mde": float(mult * rms),
            "mde_mcse": float(mult * v.std(ddof=1) / np.sqrt(n) / (2 * rms)),
            "se_rms": rms, "sd_estimate": float(est.std(ddof=1)),
            "mean_estimate": float(est.mean()), "df": float(df), "reps": int(n)}
