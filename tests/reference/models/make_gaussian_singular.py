"""Generate a seeded score table whose maximal correlated model is singular (issue 28).

Run from any folder:  .venv/bin/python tests/reference/models/make_gaussian_singular.py
Writes gaussian_singular.csv beside itself (200 rows): 20 scenarios (intercept SD 0.8,
condition-slope SD 0.4, correlation 0.5) x 5 personas (intercept SD 0.4, *no* condition
slope) x 2 conditions, one numeric score each (residual SD 1). lmer's fit of
``(1 + condition | scenario) + (1 + condition | persona)`` is singular there, so the
default model of evalmix steps down (``evalmix.models.spec._maximal.simplify``); R fits the
maximal model and the model the step-down ends at (fit_reml_singular.R). The CSV is
frozen: tests read it, they do not regenerate it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

SEED = 20261209
HERE = Path(__file__).resolve().parent


def main() -> None:
    rng = np.random.default_rng(SEED)
    cov = np.array([[0.8**2, 0.5 * 0.8 * 0.4], [0.5 * 0.8 * 0.4, 0.4**2]])
    s_eff = rng.multivariate_normal(np.zeros(2), cov, 20)
    p_eff = rng.normal(0, 0.4, 5)
    grid = pd.MultiIndex.from_product([range(20), range(5), (0, 1)],
                                      names=["s", "p", "treat"]).to_frame(index=False)
    s, p, t = grid["s"].to_numpy(), grid["p"].to_numpy(), grid["treat"].to_numpy()
    y = (5.0 + 0.3 * t + s_eff[s, 0] + s_eff[s, 1] * t + p_eff[p]
         + rng.normal(0, 1, len(grid)))
    d = pd.DataFrame({"y": np.round(y, 6),
                      "condition": np.where(t == 1, "treatment", "control"),
                      "scenario": [f"s{v:02d}" for v in s], "persona": [f"p{v}" for v in p]})
    d.to_csv(HERE / "gaussian_singular.csv", index=False)
    print(len(d), d["y"].mean())


if __name__ == "__main__":
    main()
