"""Recovery of the simulator's truth by the Bayesian fit (slow: 100 seeded fits).

Design: ``evalmix.sim.pairwise_judges(20, 6, 3, 3, tie_threshold=0)`` (4,320 rows, exact
binary logit, judge-specific condition and position effects), fitted with the default
model plus ``slopes=("judge",)`` (the true model). Issue 4 asks that 90% intervals of the
condition effect, the position bias and the larger variance components (scenario SD 0.8,
persona SD 0.5) contain the truth in at least 80 of 100 fits. The table of the last run
is in docs/models.md.
"""

from __future__ import annotations

import os
import warnings

import pandas as pd
import pytest

import evalmix
from evalmix.sim import pairwise_judges

pytestmark = [pytest.mark.slow, pytest.mark.mcmc]

N_FITS = int(os.environ.get("EVALMIX_RECOVERY_FITS", "100"))
#: Issue 4: at least 80 of 100 nominal-90% intervals contain the truth (a binomial(100,
#: 0.9) count falls below 81 with probability < 0.2%, so a pass is not luck-dependent).
MIN_COVERAGE = 0.80
LEVEL = 0.90


def one_fit(seed: int) -> dict[str, bool]:
    sim = pairwise_judges(20, 6, 3, 3, tie_threshold=0.0, seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = evalmix.fit(sim.table(), slopes=("judge",), seed=seed, level=LEVEL,
                          progress=False)   # default draws/tune/priors
    fx = fit.fixed_effects
    fx = fx[fx["scale"] == "log-odds"].set_index("term")
    v = fit.variance.set_index("factor")
    truth = {"condition[treatment]": sim.truth["condition_effect"],
             "position": sim.truth["position_bias"]}
    out = {k: bool(fx.loc[k, "lo"] <= t <= fx.loc[k, "hi"]) for k, t in truth.items()}
    for f in ("scenario", "persona", "author", "judge"):
        out[f"sd[{f}]"] = bool(v.loc[f, "sd_lo"] <= sim.truth["sds"][f] <= v.loc[f, "sd_hi"])
    out["width[condition]"] = float(fx.loc["condition[treatment]", "hi"]
                                    - fx.loc["condition[treatment]", "lo"])
    out["divergences"] = fit.divergences
    out["retried"] = "retried" in fit.provenance
    return out


def test_recovery_coverage():
    rows = [one_fit(1000 + s) for s in range(N_FITS)]
    df = pd.DataFrame(rows)
    cover = df.drop(columns=["divergences", "retried", "width[condition]"]).mean()
    print("\ncoverage of 90% intervals over", N_FITS, "fits\n", cover.to_string())
    print("median width of the condition interval:", df["width[condition]"].median())
    print("fits with divergences:", int((df["divergences"] > 0).sum()),
          "re-run:", int(df["retried"].sum()))
    # the four (the 3-level SDs are reported, not held to 80%)
    main = cover[["condition[treatment]", "position", "sd[scenario]", "sd[persona]"]]
    assert (main >= MIN_COVERAGE).all(), cover
    # defaults with no divergences (docs/models.md, few-level factors)
    assert int(df["divergences"].sum()) == 0, df["divergences"].to_numpy()
