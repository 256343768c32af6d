"""Frozen arena-rank ContextualBradleyTerry estimates for tests/inference/test_style_control.py.

Run once (needs ``pip install arena-rank``, 0.1.1; Apache-2.0; JAX):

    python tests/reference/arena_rank/make_reference.py

Writes ``battles.csv.gz`` (synthetic Arena battles: 10 models, 4,000 battles on 400
prompts, per-answer length and markdown counts, ties) and ``reference.json``: arena-rank's
ratings and coefficients on them, with the covariates made as FastChat's
``preprocess_for_style`` does ((a - b) / (a + b + 1) per feature) and standardised by
arena-rank's ``ContextualPairDataset.from_pandas(normalize_features=True,
reweighted=False)``, for ``reg`` 0 and 1 (its default).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
FEATURES = ("length", "headers", "lists", "bold")


def battles(seed: int = 20261207) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    k, n, prompts = 10, 4000, 400
    theta = rng.normal(0, 0.7, k)
    verbose = 0.6 * theta + rng.normal(0, 0.3, k)  # better models also write longer
    marks = rng.uniform(0.2, 3.0, (k, 3))
    a = rng.integers(0, k, n)
    b = (a + rng.integers(1, k, n)) % k
    prompt = rng.integers(0, prompts, n)
    p_style = rng.normal(0, 0.5, prompts)  # prompts differ in how much length helps
    out = {"model_a": [f"m{i}" for i in a], "model_b": [f"m{i}" for i in b],
           "prompt": [f"p{i}" for i in prompt]}
    for side, m in (("a", a), ("b", b)):
        out[f"length_{side}"] = np.round(300 * np.exp(verbose[m] + rng.normal(0, 0.5, n)))
        for j, f in enumerate(FEATURES[1:]):
            out[f"{f}_{side}"] = rng.poisson(marks[m, j]).astype(float)
    frame = pd.DataFrame(out)
    ratio = ((frame["length_a"] - frame["length_b"])
             / (frame["length_a"] + frame["length_b"] + 1)).to_numpy()
    hdr = ((frame["headers_a"] - frame["headers_b"])
           / (frame["headers_a"] + frame["headers_b"] + 1)).to_numpy()
    eta = theta[a] - theta[b] + (1.5 + p_style[prompt]) * ratio + 0.4 * hdr
    u = rng.random(n)
    p = 1 / (1 + np.exp(-eta))
    tie = rng.random(n) < 0.15
    frame["winner"] = np.where(tie, "tie", np.where(u < p, "model_a", "model_b"))
    return frame


def ratio_features(frame: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({f: (frame[f"{f}_a"] - frame[f"{f}_b"])
                         / (frame[f"{f}_a"] + frame[f"{f}_b"] + 1) for f in FEATURES})


def main() -> None:
    from arena_rank.models.contextual_bradley_terry import ContextualBradleyTerry
    from arena_rank.utils.data_utils import ContextualPairDataset

    frame = battles()
    frame.to_csv(HERE / "battles.csv.gz", index=False)
    feats = pd.concat([frame[["model_a", "model_b", "winner"]], ratio_features(frame)], axis=1)
    ref = {"arena_rank": "0.1.1"}
    for reg in (0.0, 1.0):
        data = ContextualPairDataset.from_pandas(feats, list(FEATURES), reweighted=False,
                                                 normalize_features=True)
        model = ContextualBradleyTerry(n_competitors=len(data.competitors),
                                       n_features=len(FEATURES), reg=reg)
        out = model.compute_ratings_and_cis(data)
        ratings = np.asarray(out["ratings"], dtype=float)
        ref[f"reg={reg:g}"] = {
            "competitors": list(out["competitors"]),
            "theta": ((ratings - 1000.0) * math.log(10.0) / 400.0).tolist(),
            "coeffs": np.asarray(out["coeffs"], dtype=float).tolist(),
            "variances": np.asarray(out["variances"], dtype=float).tolist(),
        }
    (HERE / "reference.json").write_text(json.dumps(ref, indent=1) + "\n")


if __name__ == "__main__":
    main()
