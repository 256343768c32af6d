"""Seeded ordinal score data for the cumulative-logit check (writes ordinal_scores.csv).

50 items x 5 judges x 3 models, one 1-6 score each (750 rows). Latent logistic model:
P(score <= k) = logistic(c_k - eta), eta = model effect + u_item + u_judge, cut points
(-2, -1, 0, 1, 2), model effects (0, 0.5, 1.0), item SD 1.0, judge SD 0.5.
Run: python tests/reference/models/make_ordinal_scores.py (from any folder; then fit_ordinal.R)
"""

from pathlib import Path

import numpy as np
import pandas as pd

rng = np.random.default_rng(20261201)
items, judges, models = 50, 5, ["m0", "m1", "m2"]
beta = {"m0": 0.0, "m1": 0.5, "m2": 1.0}
cuts = np.array([-2.0, -1.0, 0.0, 1.0, 2.0])
u_item = rng.normal(0, 1.0, items)
u_judge = rng.normal(0, 0.5, judges)
rows = []
for i in range(items):
    for j in range(judges):
        for m in models:
            eta = beta[m] + u_item[i] + u_judge[j]
            latent = eta + rng.logistic()
            score = 1 + int(np.sum(latent > cuts))
            rows.append({"item": f"q{i:02d}", "judge": f"j{j}", "model": m, "score": score})
pd.DataFrame(rows).to_csv(Path(__file__).with_name("ordinal_scores.csv"), index=False)
