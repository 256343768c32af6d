"""Seeded clustered dataset + cluster resampling counts for the R boot reference.

Run (from any folder): .venv/bin/python tests/reference/bootstrap/make_data.py
then: Rscript tests/reference/bootstrap/boot_reference.R
"""
from pathlib import Path

import numpy as np
import pandas as pd

from evalmix.inference.bootstrap import cluster_weights

HERE = Path(__file__).resolve().parent
SEED, G, B = 20261130, 15, 999

rng = np.random.default_rng(SEED)
sizes = rng.integers(2, 9, size=G)
cluster = np.repeat(np.arange(G), sizes)
n = cluster.size
x = rng.normal(size=n) + 0.5 * rng.normal(size=G)[cluster]
y = 1.0 + 0.4 * x + rng.normal(scale=0.8, size=G)[cluster] + rng.exponential(size=n)
pd.DataFrame({"cluster": cluster, "x": x, "y": y}).to_csv(HERE / "data.csv", index=False)
W = cluster_weights(G, B, np.random.default_rng(SEED + 1)).astype(int)
pd.DataFrame(W, columns=[f"c{g}" for g in range(G)]).to_csv(HERE / "weights.csv", index=False)
