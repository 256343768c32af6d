"""Generate the seeded crossed binary dataset used as a frozen reference.

Run (from any folder):  .venv/bin/python tests/reference/models/make_crossed_binary.py
Writes tests/reference/models/crossed_binary.csv (6,480 rows). R then fits it
(fit_reference.R). The CSV is frozen: tests read it, they do not regenerate it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from evalmix.sim import pairwise_judges

SEED = 20261130
HERE = Path(__file__).resolve().parent


def main() -> None:
    # 30 scenarios x 6 personas x 3 authors x 2 conditions x 3 judges x 2 orders = 6,480
    # rows; no ties (tie_threshold=0: exact binary logit); no judge slopes so that the
    # random-intercept model fitted in R is the true model.
    sim = pairwise_judges(
        30, 6, 3, 3,
        intercept=0.0, condition_effect=0.3, position_bias=0.2,
        sds={"scenario": 0.8, "persona": 0.5, "author": 0.3, "judge": 0.4},
        sd_judge_condition=0.0, sd_position_judge=0.0, tie_threshold=0.0, seed=SEED,
    )
    d = sim.data.copy()
    # binary outcome: the evaluated output (model_b) wins
    d["b_wins"] = (d["outcome"] == "b").astype(int)
    # position: +1/2 if the evaluated output (model_b) was shown first, -1/2 otherwise
    d["position"] = np.where(d["first_shown"] == "b", 0.5, -0.5)
    d.to_csv(HERE / "crossed_binary.csv", index=False)
    print(len(d), d["b_wins"].mean())


if __name__ == "__main__":
    main()
