"""Frozen reference for the wild cluster bootstrap (WCR, Rademacher, full enumeration)
from the independent `wildboottest` package (Fischer & Roodman's Python port).

Run in a separate environment (it is not an evalmix dependency):
    python -m venv /tmp/wbt && /tmp/wbt/bin/pip install wildboottest==0.3.2
    /tmp/wbt/bin/python tests/reference/bootstrap/wildboottest_reference.py
Writes wildboottest_reference.json: data, t statistic, p-value and the sorted |t*|.
"""
import json
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pandas as pd
import statsmodels.api as sm
from wildboottest.wildboottest import WildboottestCL, wildboottest

HERE = Path(__file__).resolve().parent
out = {"versions": {p: version(p) for p in ("wildboottest", "numpy", "statsmodels")},
       "cases": []}
for G, seed in ((7, 3), (8, 5), (10, 11)):
    rng = np.random.default_rng(seed)
    g = np.repeat(np.arange(G), rng.integers(3, 9, G))
    n = g.size
    X = np.column_stack([np.ones(n), rng.normal(size=n), rng.integers(0, 2, n)])
    y = X @ [1, 0.3, 0.2] + rng.normal(size=G)[g] + rng.normal(size=n)
    model = sm.OLS(y, pd.DataFrame(X, columns=["const", "x1", "x2"]))
    res = wildboottest(model, param="x1", cluster=g, B=99999, weights_type="rademacher",
                       seed=1, show=False, parallel=False)
    wb = WildboottestCL(X=X, Y=y, cluster=g, R=np.array([0.0, 1.0, 0.0]), B=99999, seed=1,
                        parallel=False)
    wb.get_scores(bootstrap_type="11", impose_null=True)
    wb.get_weights(weights_type="rademacher")
    wb.get_numer()
    wb.get_denom()
    wb.get_tboot()
    wb.get_vcov()
    wb.get_tstat()
    wb.get_pvalue(pval_type="two-tailed")
    out["cases"].append({
        "G": G, "X": X.tolist(), "y": y.tolist(), "cluster": g.tolist(),
        "t_stat": float(res["statistic"].iloc[0]), "p_value": float(res["p-value"].iloc[0]),
        "abs_t_boot_sorted": np.sort(np.abs(np.ravel(wb.t_boot))).tolist()})
(HERE / "wildboottest_reference.json").write_text(json.dumps(out, indent=1))
