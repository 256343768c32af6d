"""Seeded data for the ICC reference (run from the repo root, then icc_reference.R)."""
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
rng = np.random.default_rng(20261130)
# unbalanced: 25 clusters of 2-14 rows, numeric outcome
sizes = rng.integers(2, 15, size=25)
g = np.repeat(np.arange(25), sizes)
y = 0.7 * rng.normal(size=25)[g] + rng.normal(size=g.size)
pd.DataFrame({"cluster": [f"k{c:02d}" for c in g], "y": y}).to_csv(HERE / "unbalanced.csv",
                                                                     index=False)
# balanced: 30 clusters of 8 binary scores (beta-binomial, ICC 0.15)
pk = rng.beta(0.6 * 17 / 3, 0.4 * 17 / 3, size=30)
g = np.repeat(np.arange(30), 8)
yb = (rng.random(g.size) < pk[g]).astype(int)
pd.DataFrame({"cluster": [f"b{c:02d}" for c in g], "y": yb}).to_csv(HERE / "balanced.csv",
                                                                      index=False)
