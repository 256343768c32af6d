"""Write the model frame of the maximal default model on a real file (issue 28).

Run from the repository root:  .venv/bin/python tests/reference/models/make_mtbench_slopes.py
Writes tests/reference/models/mtbench_slopes.csv: evalmix's model frame of
``evalmix.datasets.load_table("mtbench_repetition")`` (MT-Bench GPT-4 repetition
judgments, 5,156 rows, 4 evaluated models against a fixed baseline, ties scored 1/2):
``y`` (the evaluated output wins), the treatment-coded condition columns, ``position``
(+1/2 when the evaluated output was shown first) and the factors. fit_mtbench_slopes.R
fits the default model on it with glmer. The CSV is frozen.
"""

from __future__ import annotations

import warnings
from pathlib import Path

from evalmix.datasets import load_table
from evalmix.models.spec import build_spec

HERE = Path(__file__).resolve().parent


def main() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        spec = build_spec(load_table("mtbench_repetition", strata=[]))
    frame = spec.frame().drop(columns=["Intercept"])
    frame.columns = [c.replace("condition[", "c_").replace("]", "").replace("-", "_")
                     .replace(".", "_") for c in frame.columns]
    frame.to_csv(HERE / "mtbench_slopes.csv", index=False)
    print(spec.formula)
    print(list(frame.columns), len(frame))


if __name__ == "__main__":
    main()
