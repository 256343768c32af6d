"""Data for the clubSandwich check of the clustered PPI variance (run by hand; not a test).

Writes ppi_cr2_data.csv: a stacked PPI regression (rows: ``z``, ``group`` = L/U, ``cluster``)
from ``evalmix.sim.judges.draw`` (seed 11, 12 clusters of 10 items, 40 labels, model A,
lambda = 0.6). ppi_cr2.R fits ``lm(z ~ 0 + group)`` and freezes clubSandwich's CR2
variance and Satterthwaite df of the contrast ``c = (1, 1)`` (the PPI estimate) in
ppi_cr2.json.
"""

from pathlib import Path

import numpy as np
import pandas as pd

from evalmix.sim.judges import JUDGE_DESIGN, draw

HERE = Path(__file__).resolve().parent

if __name__ == "__main__":
    d = draw(np.random.default_rng(11), 12, 10, 80, JUDGE_DESIGN, 1.0, 1.0, 1.0)
    a = d["model"] == 0
    lab, y, f, cl = d["labelled"][a], d["y"][a], d["f"][a], d["cluster"][a]
    lam = 0.6
    z = np.where(lab, y - lam * f, lam * f)
    pd.DataFrame({"z": z, "group": np.where(lab, "L", "U"), "cluster": cl, "y": y, "f": f,
                  "labelled": lab.astype(int)}).to_csv(HERE / "ppi_cr2_data.csv", index=False)
