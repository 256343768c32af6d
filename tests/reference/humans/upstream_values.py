"""Freeze the upstream reference values of the humans/ tests (run by hand; not a test).

* The alt-test: the authors' ``alt_test`` (github.com/nitaytech/AltTest @ 18428b1,
  notebook ``alt_test_example.ipynb``, cells 1-2; the repository has no licence file, so
  its code is not copied here: pass the path of a checkout) run on shared files reshaped
  to their input format: HANNA's coherence ratings (3 crowd slots, 5 LLMs x 4 prompts;
  neg_rmse, epsilon 0.1) and PRD Vicuna80 (3 MTurk votes per comparison; the LLMs'
  verdicts in the order with model_a first; accuracy, epsilon 0.1).
* Rogan-Gladen: Lee et al.'s ``llm_judge_reporting`` (github.com/UW-Madison-Lee-Lab/
  LLM-judge-reporting @ 082884d) ``point_estimator``, ``confidence_interval`` and
  ``allocate_calibration_sample`` on a grid of inputs.

Usage, from the repository root::

    python tests/reference/humans/upstream_values.py ALTTEST_CHECKOUT LEE_CHECKOUT

writes ``tests/reference/humans/upstream_values.json``. Versions: see the JSON.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import scipy

HERE = Path(__file__).resolve().parent
SHARED = HERE.parents[3] / "shared" / "data" / "humans"


def alt_test_inputs() -> dict[str, tuple[dict, dict, str, float]]:
    """name -> (humans {annotator: {item: value}}, llms {llm: {item: value}}, scoring, eps)."""
    out = {}
    h = pd.read_csv(SHARED / "hanna" / "hanna_ratings.csv.gz")
    h = h[h["dimension"] == "coherence"]
    h["rater_id"] = np.where(h["rater_kind"] == "llm",
                             h["rater"] + " / " + h["eval_prompt"].astype(str).str.replace(
                                 r"\.0$", "", regex=True), h["rater"])
    out["hanna_coherence"] = _split(h, "rater_id", "score") + ("neg_rmse", 0.1)
    p = pd.read_csv(SHARED / "prd_vicuna80" / "prd_vicuna80_judgments.csv.gz")
    p = p[(p["rater_kind"] == "human") | ((p["first_shown"] == "a") & (p["run"] == 1))]
    p["rater_id"] = np.where(p["rater_kind"] == "human",
                             "human / " + p["vote"].astype(str), p["rater"])
    out["prd_vicuna80"] = _split(p, "rater_id", "outcome") + ("accuracy", 0.1)
    return out


def _split(frame: pd.DataFrame, rater: str, value: str) -> tuple[dict, dict]:
    humans: dict = {}
    llms: dict = {}
    for row in frame.itertuples(index=False):
        target = humans if row.rater_kind == "human" else llms
        v = getattr(row, value)
        target.setdefault(getattr(row, rater), {})[str(row.item_id)] = (
            float(v) if isinstance(v, (int, float, np.number)) else v)
    return humans, llms


def main() -> None:
    alt_dir, lee_dir = Path(sys.argv[1]), Path(sys.argv[2])
    nb = json.loads((alt_dir / "alt_test_example.ipynb").read_text())
    ns: dict = {}
    exec("".join(nb["cells"][1]["source"]) + "\n" + "".join(nb["cells"][2]["source"]), ns)
    alt = {}
    for name, (humans, llms, scoring, eps) in alt_test_inputs().items():
        alt[name] = {"scoring": scoring, "epsilon": eps, "judges": {}}
        for llm, anns in llms.items():
            with contextlib.redirect_stdout(io.StringIO()):
                wr, ap = ns["alt_test"](anns, humans, scoring, epsilon=eps)
            alt[name]["judges"][llm] = {"winning_rate": wr, "advantage": ap}
    sys.path.insert(0, str(lee_dir))
    from llm_judge_reporting import (  # type: ignore[import-not-found]
        allocate_calibration_sample,
        confidence_interval,
        point_estimator,
    )
    rng = np.random.default_rng(2025)
    lee = []
    while len(lee) < 200:
        p, q0, q1 = rng.random(), 0.5 + 0.5 * rng.random(), 0.5 + 0.5 * rng.random()
        if q0 + q1 <= 1.01:
            continue
        n, m0, m1 = (int(v) for v in rng.integers(1, 3000, 3))
        m, m_pilot = int(rng.integers(2, 600)), int(rng.integers(0, 30))
        level = float(rng.choice([0.9, 0.95, 0.99]))
        lo, hi = confidence_interval(p, q0, q1, n, m0, m1, alpha=1 - level)
        with contextlib.redirect_stderr(io.StringIO()):
            alloc = allocate_calibration_sample(m, p, q0, q1, m_pilot)
        lee.append({"p": p, "q0": q0, "q1": q1, "n": n, "m0": m0, "m1": m1, "level": level,
                    "theta": float(point_estimator(p, q0, q1)), "lo": float(lo),
                    "hi": float(hi), "m": m, "m_pilot": m_pilot,
                    "allocation": [int(a) for a in alloc]})
    out = {"versions": {"python": sys.version.split()[0], "numpy": np.__version__,
                        "scipy": scipy.__version__, "pandas": pd.__version__,
                        "alt_test": "nitaytech/AltTest@18428b1",
                        "llm_judge_reporting": "UW-Madison-Lee-Lab/LLM-judge-reporting@082884d"},
           "alt_test": alt, "rogan_gladen": lee}
    (HERE / "upstream_values.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
