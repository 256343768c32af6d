"""Write boards.csv: random significance patterns for letters.R (multcompView).

Run (from any folder): ``python make_boards.py && Rscript letters.R``. Models are named
``m00, m01, ...`` best first; one row per significant pair (a board without any has one
row with empty ``a``/``b``). Kinds: 0 significance follows the estimates (one SE), 1
heterogeneous SEs, 2 any pattern. Boards needing more than 52 letters are left out
(multcompView names further letters differently).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
from test_letters import _board  # noqa: E402

from evalmix.inference.letters import compact_letters  # noqa: E402


def main() -> None:
    rng = np.random.default_rng(2004)
    rows = []
    board = 0
    for rep in range(150):
        k = int(rng.integers(2, 25))
        order, d = _board(rng, k, rep % 3)
        letters = compact_letters(order, d)
        if letters is None or any("." in s for s in letters):
            continue
        rank_of = np.argsort(order)  # model m is named by its rank: m00 is the best
        a, b = np.nonzero(np.triu(d, 1))
        pairs = [(f"m{rank_of[x]:02d}", f"m{rank_of[y]:02d}") for x, y in zip(a, b, strict=True)]
        for x, y in pairs or [("", "")]:
            rows.append({"board": board, "k": k, "kind": rep % 3, "a": x, "b": y})
        board += 1
    pd.DataFrame(rows).to_csv(HERE / "boards.csv", index=False)


if __name__ == "__main__":
    main()
