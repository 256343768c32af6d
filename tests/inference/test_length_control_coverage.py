"""Coverage of the length-controlled win rate's instruction-bootstrap interval (slow).

AlpacaEval-like data from the GLM itself: 12 models against a baseline on 300
instructions drawn from a population, binary verdicts,
``logit P(model wins on i) = a_m + s_m tanh(delta_len / sd) + d_i`` with ``d_i ~ N(0, 1)``
and model-specific length slopes and verbosity. The estimand is the population LC win
rate ``E_d[expit(a_m + d)]`` (no length difference). Run as a script to print the table
of docs/controlled.md.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit

import evalmix
from evalmix.inference.length_control import length_controlled_win_rate

K, N = 12, 300


def _truth(a: np.ndarray) -> np.ndarray:
    d = np.random.default_rng(0).normal(size=400_000)
    return np.array([expit(x + d).mean() for x in a])


def _sim(rng: np.random.Generator, a: np.ndarray, s: np.ndarray, v: np.ndarray
         ) -> evalmix.EvalTable:
    d = rng.normal(size=N)
    base_len = np.exp(rng.normal(7, 0.5, N))
    rows = []
    for m in range(K):
        length = base_len * np.exp(v[m] + rng.normal(0, 0.5, N))
        delta = base_len - length
        t = np.tanh(delta / delta.std(ddof=1))
        win = rng.random(N) < expit(a[m] + s[m] * t + d)
        rows.append(pd.DataFrame({"model": f"m{m}", "item": np.arange(N),
                                  "verdict": np.where(win, "b", "a"),
                                  "length_a": base_len, "length_b": length}))
    frame = pd.concat(rows, ignore_index=True)
    frame["baseline"] = "base"
    return evalmix.read(frame, outcome="verdict", model_a="baseline", model_b="model",
                        clusters={"item": "item"}), frame


def coverage(sims: int = 50, reps: int = 80, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    a = np.linspace(-2, 1, K)
    s = -rng.uniform(0.5, 2.0, K)          # longer than the baseline: more wins
    v = rng.normal(0, 0.4, K)
    truth = _truth(a)
    hits, widths, errs = [], [], []
    for i in range(sims):
        table, frame = _sim(rng, a, s, v)
        res = length_controlled_win_rate(table, columns=frame, reps=reps, seed=seed + i)
        lc = res.tidy().query("estimand == 'lc_win_rate'").set_index("model")
        lc = lc.loc[[f"m{m}" for m in range(K)]]
        hits.append(((lc["lo"] <= truth) & (truth <= lc["hi"])).to_numpy())
        widths.append((lc["hi"] - lc["lo"]).to_numpy())
        errs.append(lc["estimate"].to_numpy() - truth)
    return pd.DataFrame({"truth": truth, "coverage": np.mean(hits, axis=0),
                         "mean_width": np.mean(widths, axis=0),
                         "bias": np.mean(errs, axis=0)}, index=[f"m{m}" for m in range(K)])


@pytest.mark.slow
def test_lc_bootstrap_interval_covers():
    table = coverage()
    assert table["coverage"].mean() > 0.90
    assert table["coverage"].min() > 0.80


if __name__ == "__main__":
    print(coverage().round(3).to_string())
