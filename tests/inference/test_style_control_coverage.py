"""Coverage of style-controlled Bradley-Terry's prompt-clustered intervals (slow).

Arena-like battles drawn from the contextual Bradley-Terry model itself: 10 models, 3,000
battles on 300 prompts, better models write longer, the length effect varies by prompt
(so battles on one prompt are dependent), ties. Truth: the centred abilities and the
length coefficient per SD of the covariate (population SD of the ratio, by Monte Carlo).
Run as a script to print the table of docs/controlled.md.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import evalmix
from evalmix.inference.style_control import style_controlled_bt

K, N, PROMPTS, BETA = 10, 3000, 300, 1.5


def _draw(rng: np.random.Generator, theta: np.ndarray, verbose: np.ndarray, n: int
          ) -> pd.DataFrame:
    a = rng.integers(0, K, n)
    b = (a + rng.integers(1, K, n)) % K
    prompt = rng.integers(0, PROMPTS, n)
    slope = BETA + rng.normal(0, 1.0, PROMPTS)[prompt]
    la = 300 * np.exp(verbose[a] + rng.normal(0, 0.5, n))
    lb = 300 * np.exp(verbose[b] + rng.normal(0, 0.5, n))
    ratio = (la - lb) / (la + lb + 1)
    p = 1 / (1 + np.exp(-(theta[a] - theta[b] + slope * ratio)))
    u = rng.random(n)
    outcome = np.where(rng.random(n) < 0.1, "tie", np.where(u < p, "a", "b"))
    return pd.DataFrame({"model_a": [f"m{i}" for i in a], "model_b": [f"m{i}" for i in b],
                         "prompt": prompt, "outcome": outcome, "length_a": la,
                         "length_b": lb, "ratio": ratio})


def coverage(sims: int = 100, seed: int = 3, method: str = "CR2", cluster: str | None = "auto"
             ) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    theta = np.linspace(-1, 1, K)
    verbose = 0.5 * theta
    # the covariate is the standardised ratio: the true coefficient is BETA * SD(ratio)
    # (ties move P(win) to 1/2 for 10% of battles: the quasi-likelihood's target slope and
    # abilities are those of the tie-diluted model, found by one very large fit)
    big = _draw(np.random.default_rng(0), theta, verbose, 400_000)
    tbig = evalmix.read(big, outcome="outcome", model_a="model_a", model_b="model_b")
    ref = style_controlled_bt(tbig, ["length"], columns=big, cluster=None, method="CR0")
    true_models = ref.models.query("estimand == 'bt_style_controlled'").set_index("model")
    truth = pd.concat([true_models["estimate"],
                       pd.Series({"length": ref.coefficients["estimate"].item()})])
    hits, widths = [], []
    for _ in range(sims):
        frame = _draw(rng, theta, verbose, N)
        table = evalmix.read(frame, outcome="outcome", model_a="model_a",
                             model_b="model_b", clusters={"item": "prompt"})
        res = style_controlled_bt(table, ["length"], columns=frame, method=method,
                                  cluster=cluster)
        rows = pd.concat([res.models.query("estimand == 'bt_style_controlled'")
                          .set_index("model")[["lo", "hi"]],
                          res.coefficients.set_index("contrast")[["lo", "hi"]]])
        rows = rows.loc[truth.index]
        hits.append(((rows["lo"] <= truth) & (truth <= rows["hi"])).to_numpy())
        widths.append((rows["hi"] - rows["lo"]).to_numpy())
    return pd.DataFrame({"truth": truth, "coverage": np.mean(hits, axis=0),
                         "mean_width": np.mean(widths, axis=0)})


@pytest.mark.slow
def test_prompt_clustered_intervals_cover():
    table = coverage(sims=60)
    assert table["coverage"].mean() > 0.92
    assert table.loc["length", "coverage"] > 0.88


if __name__ == "__main__":
    import sys

    by = None if sys.argv[1:] == ["rows"] else "auto"
    cr2 = coverage(cluster=by)
    print(cr2.round(3).to_string())
    print("mean coverage", round(cr2["coverage"].mean(), 3))
