"""Seeded data for the sparse-back-end reference fits (fit_sparse.R).

Run (from any folder):  .venv/bin/python tests/reference/models/make_sparse_design.py
60 items x 4 models x 4 judges x 2 presentation orders = 1,920 rows; an item:model
interaction factor (240 levels), a judge-specific position slope.
"""

from pathlib import Path

import numpy as np
import pandas as pd

rng = np.random.default_rng(20261201)
item, model, judge, order = (a.ravel() for a in np.meshgrid(
    np.arange(60), np.arange(4), np.arange(4), np.arange(2), indexing="ij"))
pos = order - 0.5
b_item = rng.normal(0, 0.8, 60)[item]
b_im = rng.normal(0, 0.5, 240)[item * 4 + model]
b_judge = rng.normal(0, 0.4, 4)[judge]
s_judge = rng.normal(0, 0.6, 4)[judge]
eff = np.array([0.0, 0.3, -0.2, 0.5])[model]
score = 1 + eff + b_item + b_im + b_judge + rng.normal(0, 1, item.size)
eta = -0.2 + eff + b_item + b_judge + (0.25 + s_judge) * pos
win = (rng.random(item.size) < 1 / (1 + np.exp(-eta))).astype(int)
d = pd.DataFrame({"item": [f"i{i:02d}" for i in item], "model": [f"m{m}" for m in model],
                  "judge": [f"j{j}" for j in judge], "position": pos,
                  "item_model": [f"i{i:02d}:m{m}" for i, m in zip(item, model, strict=True)],
                  "score": score.round(6), "win": win})
d.to_csv(Path(__file__).with_name("sparse_design.csv"), index=False)
print(len(d), "rows; win rate", win.mean().round(3))
