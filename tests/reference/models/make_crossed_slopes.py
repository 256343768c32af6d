"""Generate the seeded crossed binary dataset with random condition slopes (issue 28).

Run from the repository root:  .venv/bin/python tests/reference/models/make_crossed_slopes.py
Writes tests/reference/models/crossed_slopes.csv (1,920 rows): 40 scenarios x 8 personas
(both sampled; intercept SDs 0.8 / 0.5, condition-slope SDs 0.3 / 0.3) x 3 fixed judges
x 2 conditions, one 0/1 score each (the "crossed 40x8" design of docs/coverage.md). R
fits it (fit_slopes.R). The CSV is frozen: tests read it, they do not regenerate it.
"""

from __future__ import annotations

from pathlib import Path

from evalmix.sim.designs import Factor, crossed_scores

SEED = 20261207
HERE = Path(__file__).resolve().parent


def main() -> None:
    sim = crossed_scores([Factor("scenario", 40, 0.8, 0.3), Factor("persona", 8, 0.5, 0.3)],
                         judges={"j1": 0.0, "j2": 0.3, "j3": -0.3}, intercept=0.5,
                         condition_effect=0.3, seed=SEED)
    d = sim.data[["y", "condition", "scenario", "persona", "judge"]]
    d.to_csv(HERE / "crossed_slopes.csv", index=False)
    print(len(d), d["y"].mean())


if __name__ == "__main__":
    main()
