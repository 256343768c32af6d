"""Seeded dataset for the sandwich reference values (run: python make_data.py).

400 rows; factor ``a`` (30 levels, unequal sizes), factor ``b`` (12 levels) crossed with
``a``; ``x`` numeric, ``treat`` 0/1, ``y`` numeric with random effects of a and b,
``ybin`` 0/1 from a logit model with the same structure.
"""

from pathlib import Path

import numpy as np
import pandas as pd

rng = np.random.default_rng(20261130)
n = 400
a = rng.choice(30, size=n, p=rng.dirichlet(np.full(30, 2.0)))
b = rng.integers(0, 12, size=n)
x = rng.normal(size=n) + 0.3 * rng.normal(size=30)[a]
treat = rng.integers(0, 2, size=n)
ua, ub = rng.normal(0, 0.6, 30), rng.normal(0, 0.4, 12)
y = 0.5 + 0.4 * x + 0.3 * treat + ua[a] + ub[b] + rng.normal(size=n) * (1 + 0.5 * treat)
eta = -0.2 + 0.5 * x + 0.4 * treat + ua[a] + ub[b]
ybin = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(int)
frame = pd.DataFrame({"a": [f"a{v:02d}" for v in a], "b": [f"b{v:02d}" for v in b],
                      "x": np.round(x, 6), "treat": treat, "y": np.round(y, 6),
                      "ybin": ybin})
frame.to_csv(Path(__file__).with_name("data.csv"), index=False)
