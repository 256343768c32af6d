"""Write Brennan (2001) Synthetic Data Sets No. 3 and No. 4 as long CSVs.

The scores are transcribed from GeneralizIT's test fixtures
(tylerjsmith111/GeneralizIT @ 00e4e4c3ec98c6dfc4345026951b3903de73c184,
``tests/fixtures/design3_fixtures.py`` and ``design4_fixtures.py``; MIT licence, see
README.md), which transcribe Brennan, R. L. (2001), Generalizability Theory, Springer,
chapters 3-4 (No. 3, p x i x o; No. 4, p x (r:t)).

    .venv/bin/python tests/reference/gtheory/make_brennan.py
"""

from pathlib import Path

import pandas as pd

HERE = Path(__file__).parent

# No. 3: 10 persons x 4 items x 2 occasions; column "O{o}_i{i}"
NO3 = {
    "O1_i1": [2, 4, 5, 5, 4, 4, 2, 3, 0, 6],
    "O1_i2": [6, 5, 5, 9, 3, 4, 6, 4, 5, 8],
    "O1_i3": [7, 6, 4, 8, 5, 4, 6, 4, 4, 7],
    "O1_i4": [5, 7, 6, 6, 6, 7, 5, 5, 5, 6],
    "O2_i1": [2, 6, 5, 5, 4, 6, 2, 6, 5, 6],
    "O2_i2": [5, 7, 4, 7, 5, 4, 7, 6, 5, 8],
    "O2_i3": [5, 5, 5, 7, 6, 7, 7, 6, 5, 8],
    "O2_i4": [5, 7, 5, 6, 4, 8, 5, 4, 3, 6],
}
# No. 4: 10 persons x 3 tasks x 4 raters within each task (raters 1-12); "t{t}_r{r}"
NO4 = {
    "t1_r1": [5, 9, 3, 7, 9, 3, 7, 5, 9, 4],
    "t1_r2": [6, 3, 4, 5, 2, 4, 3, 8, 9, 4],
    "t1_r3": [5, 7, 3, 5, 9, 3, 7, 5, 8, 4],
    "t1_r4": [5, 7, 3, 3, 7, 5, 7, 7, 8, 3],
    "t2_r5": [5, 7, 5, 3, 7, 3, 7, 7, 6, 3],
    "t2_r6": [3, 5, 3, 1, 7, 3, 5, 5, 6, 5],
    "t2_r7": [4, 5, 3, 4, 3, 6, 5, 5, 6, 6],
    "t2_r8": [5, 5, 5, 3, 7, 3, 7, 4, 5, 5],
    "t3_r9": [6, 7, 6, 5, 2, 4, 5, 3, 5, 5],
    "t3_r10": [7, 7, 5, 3, 7, 5, 5, 2, 8, 7],
    "t3_r11": [3, 5, 1, 3, 5, 1, 5, 1, 1, 1],
    "t3_r12": [3, 2, 6, 5, 3, 2, 4, 1, 1, 1],
}


def long(table: dict, first: str, second: str) -> pd.DataFrame:
    rows = []
    for key, scores in table.items():
        a, b = key.split("_")
        for person, score in enumerate(scores, start=1):
            rows.append({"person": person, first: int(a[1:]), second: int(b[1:]),
                         "score": score})
    return pd.DataFrame(rows).sort_values(["person", first, second], ignore_index=True)


if __name__ == "__main__":
    long(NO3, "occasion", "item")[["person", "item", "occasion", "score"]].to_csv(
        HERE / "brennan_synthetic3.csv", index=False)
    long(NO4, "task", "rater").to_csv(HERE / "brennan_synthetic4.csv", index=False)
