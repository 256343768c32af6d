"""Generate the seeded crossed Gaussian dataset with correlated condition slopes (issue 28).

Run from any folder:  .venv/bin/python tests/reference/models/make_gaussian_slopes.py
Writes gaussian_slopes.csv beside itself (1,920 rows): 40 scenarios x 8 personas (both
sampled; intercept SDs 0.8 / 0.5, condition-slope SDs 0.4 / 0.3, intercept-slope
correlations 0.5 / -0.4) x 3 fixed judges x 2 conditions, one numeric score each
(residual SD 1). R fits it (fit_reml_slopes.R, lmer REML). The CSV is frozen: tests read
it, they do not regenerate it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

SEED = 20261208
HERE = Path(__file__).resolve().parent


def _effects(rng: np.random.Generator, n: int, sd0: float, sd1: float, rho: float
             ) -> np.ndarray:
    cov = np.array([[sd0**2, rho * sd0 * sd1], [rho * sd0 * sd1, sd1**2]])
    return rng.multivariate_normal(np.zeros(2), cov, n)


def main() -> None:
    rng = np.random.default_rng(SEED)
    s_eff = _effects(rng, 40, 0.8, 0.4, 0.5)
    p_eff = _effects(rng, 8, 0.5, 0.3, -0.4)
    judge = {"j1": 0.0, "j2": 0.3, "j3": -0.3}
    grid = pd.MultiIndex.from_product([range(40), range(8), list(judge), (0, 1)],
                                      names=["s", "p", "judge", "treat"]).to_frame(index=False)
    s, p, t = grid["s"].to_numpy(), grid["p"].to_numpy(), grid["treat"].to_numpy()
    y = (5.0 + 0.3 * t + s_eff[s, 0] + s_eff[s, 1] * t + p_eff[p, 0] + p_eff[p, 1] * t
         + grid["judge"].map(judge).to_numpy() + rng.normal(0, 1, len(grid)))
    d = pd.DataFrame({"y": np.round(y, 6),
                      "condition": np.where(t == 1, "treatment", "control"),
                      "scenario": [f"s{v:02d}" for v in s], "persona": [f"p{v}" for v in p],
                      "judge": grid["judge"]})
    d.to_csv(HERE / "gaussian_slopes.csv", index=False)
    print(len(d), d["y"].mean())


if __name__ == "__main__":
    main()
