"""Seeded red-flag data (two conditions in clusters, two strata) and the cluster
resampling counts evalmix.bootstrap draws for it, for the R boot reference of a custom
ratio statistic (custom_reference.R).

Run (from any folder): .venv/bin/python tests/reference/bootstrap/make_custom_data.py
then: Rscript tests/reference/bootstrap/custom_reference.R
"""
from pathlib import Path

import numpy as np
import pandas as pd

from evalmix.inference.boot_weights import _counts, index_chunks

HERE = Path(__file__).resolve().parent
SEED, G, B = 20261207, 16, 999

rng = np.random.default_rng(SEED)
sizes = rng.integers(3, 9, size=G)
scenario = np.repeat(np.arange(G), sizes)
condition = np.where(rng.random(scenario.size) < 0.5, "A", "B")
u = rng.normal(0, 0.7, size=G)[scenario]
p = 1 / (1 + np.exp(-(-0.8 + 0.6 * (condition == "B") + u)))
flag = (rng.random(scenario.size) < p).astype(int)
stratum = np.where(scenario < 7, "s1", "s2")
pd.DataFrame({"scenario": scenario, "stratum": stratum, "condition": condition,
              "red_flag": flag}).to_csv(HERE / "custom_data.csv", index=False)

# the resampling counts of evalmix.bootstrap(seed=SEED + 1) and, within the two strata
# (clusters 0-6 and 7-15), of evalmix.bootstrap(seed=SEED + 2, strata="stratum")
for name, seed, groups in [("custom_weights.csv", SEED + 1, [np.arange(G)]),
                           ("custom_weights_strata.csv", SEED + 2,
                            [np.arange(7), np.arange(7, G)])]:
    (_, _, idx), = index_chunks(groups, B, np.random.default_rng(seed))
    W = _counts(idx, G).astype(int)
    pd.DataFrame(W, columns=[f"c{g}" for g in range(G)]).to_csv(HERE / name, index=False)
