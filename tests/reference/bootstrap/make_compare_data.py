"""Seeded scores table for the compare_all reference (clubSandwich CR2, pairwise contrasts).

Run (from any folder), then: Rscript tests/reference/bootstrap/compare_reference.R
"""
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
rng = np.random.default_rng(777)
rows = []
for item in range(18):
    u = rng.normal(scale=0.6)
    for k, cond in enumerate(["alpha", "beta", "gamma"]):
        for _ in range(rng.integers(0, 5)):  # 0-4 rows per cell: unbalanced, some empty
            rows.append((f"i{item:02d}", cond, 0.5 + 0.2 * k + u + rng.normal()))
pd.DataFrame(rows, columns=["item", "condition", "y"]).to_csv(HERE / "compare_scores.csv",
                                                              index=False)
