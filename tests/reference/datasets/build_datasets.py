"""Rebuild the bundled datasets (src/evalmix/datasets/*.parquet) from ../shared/data.

Run (from any folder): ``python tests/reference/datasets/build_datasets.py``.
Each CSV is read with pandas' defaults (so ``evalmix.datasets.load(name)`` equals
``pandas.read_csv`` of the shared file) and written as zstd-compressed Parquet; the
frame hashes go to ``hashes.json`` so the equality test also runs without ../shared.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[3]
SHARED = ROOT.parent / "shared" / "data"
OUT = ROOT / "src" / "evalmix" / "datasets"

FILES = {
    "mtbench_position_bias": "judging_the_judges/jtj_MTBench_position_bias.csv",
    "mtbench_repetition": "judging_the_judges/jtj_MTBench_repetition.csv",
    "devbench_repetition": "judging_the_judges/jtj_DevBench_repetition.csv",
    "pandalm": "pandalm/pandalm_testset_judgments.csv",
    "wildbench": "wildbench/wildbench_scores.csv",
    "mtbench_human": "humans/mtbench_human/mtbench_human_judgments.csv",
}


def frame_hash(frame: pd.DataFrame) -> str:
    """Order-sensitive hash of a frame's values, index excluded, plus its columns."""
    values = pd.util.hash_pandas_object(frame, index=False).to_numpy()
    return f"{list(frame.columns)}:{int(values.sum(dtype='uint64'))}:{len(frame)}"


def main() -> None:
    hashes = {}
    for name, rel in FILES.items():
        frame = pd.read_csv(SHARED / rel)
        frame.to_parquet(OUT / f"{name}.parquet", compression="zstd", index=False,
                         compression_level=19)
        hashes[name] = {"file": rel, "hash": frame_hash(frame)}
    (Path(__file__).parent / "hashes.json").write_text(json.dumps(hashes, indent=2) + "\n")


if __name__ == "__main__":
    main()
