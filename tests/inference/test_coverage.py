"""Coverage of naive, CR1-t and cluster-bootstrap intervals for a mean (slow study).

Beta-binomial clusters from :func:`evalmix.sim.clustered_scores` (exact ICC), N = 1,000
scores, cluster size m in {1, 5, 10, 20, 50}, ICC rho in {0.1, 0.2}, p = 0.7, 5,000
replications per cell (Monte Carlo SE 0.31 points at 95%). Every
estimator is evaluated on all replications at once from the (reps x G) cluster sums:

- naive: mean +- 1.96 sqrt(s^2 / N); its coverage should be the analytic
  2 Phi(1.96 / sqrt(DEFF)) - 1 with DEFF = 1 + (m - 1) rho (Kish);
- CR1-t: mean +- t(G-1) * CR1 SE (for a mean CR1 = G/(G-1) sum_g (y_g. - m ybar)^2 / N^2);
- cluster bootstrap: 999 pairs-cluster resamples per replication (independent weights
  per replication), percentile and studentized (bootstrap-t) intervals computed by
  :mod:`evalmix.inference.bootstrap`'s vectorised interval functions.

The bands are Monte Carlo bands: nominal (or the analytic value) +- z * MC SE, with z
Bonferroni over every two-sided check of the study at a 1% family-wise error
(:func:`conftest.mc_band`). A conservative interval passes a lower bound only, so its
width is checked against CR1-t's (a wide interval covers anything).

``make docs-tables`` (``EVALMIX_WRITE_DOCS=1``) rewrites the table's block of
docs/coverage.md; without it the test checks that the block in the docs is the one this
code and seed give (the table reproduces).
"""

from __future__ import annotations

import os
import re

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT, mc_band
from scipy import stats

from evalmix.inference.bootstrap import (
    cluster_weights,
    expanded_interval,
    percentile_interval,
    studentized_interval,
)
from evalmix.sim import clustered_scores

pytestmark = pytest.mark.slow

N = 1_000
SIZES = (1, 5, 10, 20, 50)
ICCS = (0.1, 0.2)
P = 0.7
REPS = 5_000
BOOT_REPS = 999
LEVEL = 0.95
SEED = 20261130
#: Two-sided checks of the study (naive vs analytic, CR1-t, expanded and percentile in all
#: 10 cells, bootstrap-t where G >= 100) and one-sided ones (bootstrap-t where G <= 50):
#: the Bonferroni family of :func:`conftest.mc_band`. The naive analytic value was itself
#: checked against 100,000 direct beta-binomial draws per cell (agreement 0.2 points).
CHECKS = 10 + 10 + 10 + 10 + 6 + 4
#: Largest mean width of the conservative bootstrap-t relative to CR1-t (which covers
#: nominally in every cell) where G <= 50: its heavy-tailed t* quantiles may widen it a
#: little (1.01-1.04 measured), an interval that over-covers by being 10% wider fails.
BOOT_T_WIDTH = 1.10
DOCS = ROOT / "docs" / "coverage.md"
MARK = ("<!-- clustered-mean:start -->", "<!-- clustered-mean:end -->")


def _cluster_sums(m: int, icc: float, rng: np.random.Generator) -> np.ndarray:
    """(REPS, G) successes per cluster, one clustered_scores draw per replication."""
    g = N // m
    out = np.empty((REPS, g))
    for r in range(REPS):
        sim = clustered_scores(g, m, p=P, icc=icc, seed=rng)
        codes = np.repeat(np.arange(g), m)
        out[r] = np.bincount(codes, weights=sim.data["y"].to_numpy(float), minlength=g)
    return out


def _cr1_var(ysum: np.ndarray, m: int) -> np.ndarray:
    """CR1 variance of the mean from cluster sums (rows = replications)."""
    g = ysum.shape[-1]
    mean = ysum.sum(axis=-1, keepdims=True) / (g * m)
    return g / (g - 1) * np.sum((ysum - m * mean) ** 2, axis=-1) / (g * m) ** 2


def _bootstrap(ysum: np.ndarray, m: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    reps, g = ysum.shape
    chunk = max(1, 4_000_000 // (BOOT_REPS * g))
    perc = np.empty((reps, 2))
    expd = np.empty((reps, 2))
    stud = np.empty((reps, 2))
    n = g * m
    for a in range(0, reps, chunk):
        ys = ysum[a:a + chunk]
        c = ys.shape[0]
        W = cluster_weights(g, c * BOOT_REPS, rng).reshape(c, BOOT_REPS, g)
        s1 = np.einsum("rbg,rg->rb", W, ys)
        s2 = np.einsum("rbg,rg->rb", W, ys**2)
        mean_b = s1 / n
        # CR1 of each resample: each drawn copy a cluster, sum_g w_g (y_g - m mean)^2
        var_b = g / (g - 1) * (s2 - 2 * m * mean_b * s1 + m**2 * mean_b**2 * g) / n**2
        est = ys.sum(axis=1) / n
        se = np.sqrt(_cr1_var(ys, m))
        perc[a:a + chunk] = percentile_interval(mean_b, LEVEL)
        expd[a:a + chunk] = expanded_interval(mean_b, g, LEVEL)
        with np.errstate(divide="ignore", invalid="ignore"):
            t = (mean_b - est[:, None]) / np.sqrt(var_b)
        t = np.where(np.isfinite(t), t, 0.0)  # all-equal resample (m = 1, rare): t = 0
        stud[a:a + chunk] = studentized_interval(est, se, t, LEVEL)
    return {"percentile": perc, "expanded": expd, "studentized": stud}


def _study() -> pd.DataFrame:
    rng = np.random.default_rng(SEED)
    rows = []
    z = stats.norm.ppf(0.5 + LEVEL / 2)
    for m in SIZES:
        for icc in ICCS:
            g = N // m
            ysum = _cluster_sums(m, icc, rng)
            mean = ysum.sum(axis=1) / N
            s2 = (ysum.sum(axis=1) - N * mean**2) / (N - 1)  # 0/1 scores: sum y^2 = sum y
            naive_se = np.sqrt(s2 / N)
            cr1_se = np.sqrt(_cr1_var(ysum, m))
            tq = stats.t.ppf(0.5 + LEVEL / 2, g - 1)
            deff = 1 + (m - 1) * icc
            boot = _bootstrap(ysum, m, rng)
            cover = {
                "naive": np.abs(mean - P) <= z * naive_se,
                "CR1-t": np.abs(mean - P) <= tq * cr1_se,
                "bootstrap percentile": (boot["percentile"][:, 0] <= P)
                & (P <= boot["percentile"][:, 1]),
                "bootstrap expanded": (boot["expanded"][:, 0] <= P)
                & (P <= boot["expanded"][:, 1]),
                "bootstrap-t": (boot["studentized"][:, 0] <= P)
                & (P <= boot["studentized"][:, 1]),
            }
            row = {"m": m, "rho": icc, "G": g, "DEFF": deff,
                   "naive analytic": 2 * stats.norm.cdf(z / np.sqrt(deff)) - 1,
                   # the percentile interval is CR0-like (spread too narrow by
                   # sqrt((G-1)/G)) with normal quantiles, for a t(G-1) pivot
                   "percentile analytic": 1 - 2 * stats.t.sf(z * np.sqrt((g - 1) / g), g - 1)}
            row.update({k: float(v.mean()) for k, v in cover.items()})
            row["CR1-t width"] = float(np.mean(2 * tq * cr1_se))
            row["bootstrap-t / CR1-t width"] = float(
                np.mean(boot["studentized"][:, 1] - boot["studentized"][:, 0])
                / row["CR1-t width"])
            rows.append(row)
    return pd.DataFrame(rows)


def _markdown(df: pd.DataFrame) -> str:
    mc = np.sqrt(LEVEL * (1 - LEVEL) / REPS)
    hi = mc_band(LEVEL, REPS, CHECKS)[1]
    cols = ["m", "rho", "G", "DEFF", "naive", "naive analytic", "CR1-t",
            "bootstrap percentile", "percentile analytic", "bootstrap expanded",
            "bootstrap-t", "CR1-t width", "bootstrap-t / CR1-t width"]
    head = "| " + " | ".join(cols) + " |\n|" + "---|" * len(cols) + "\n"
    body = ""
    for _, r in df.iterrows():
        cells = [f"{int(r['m'])}", f"{r['rho']:.1f}", f"{int(r['G'])}", f"{r['DEFF']:.1f}"]
        cells += [f"{100 * r[c]:.1f}%" for c in cols[4:-2]]
        cells += [f"{r['CR1-t width']:.3f}", f"{r['bootstrap-t / CR1-t width']:.3f}"]
        body += "| " + " | ".join(cells) + " |\n"
    return (
        MARK[0] + "\n\n"
        "Generated by `tests/inference/test_coverage.py` (`make docs-tables`, or "
        "`EVALMIX_WRITE_DOCS=1 pytest -m slow tests/inference/test_coverage.py`).\n\n"
        f"Beta-binomial clusters (`evalmix.sim.clustered_scores`, exact ICC), N = {N:,} "
        f"binary scores, p = {P}, {REPS:,} replications per row, {BOOT_REPS} cluster "
        f"resamples per replication, seed {SEED}. Monte Carlo SE of a 95% coverage: "
        f"{100 * mc:.2f} points; a cell's band is {100 * (hi - LEVEL):.2f} points either side "
        f"of its expected value ({CHECKS} checks at a 1% family-wise error). G = N / m "
        "clusters; DEFF = 1 + (m - 1) rho.\n\n"
        "- naive: normal interval treating the 1,000 scores as independent; its coverage "
        "should equal the analytic 2 Phi(1.96 / sqrt(DEFF)) - 1.\n"
        "- CR1-t: CR1 standard error with t(G - 1) critical values.\n"
        "- bootstrap percentile / bootstrap-t: pairs cluster bootstrap "
        "(`evalmix.inference.bootstrap`): percentile interval, expanded percentile "
        "interval (Hesterberg 2015: percentiles at Phi(sqrt(G/(G-1)) t_{0.025,G-1})) and "
        "studentized interval (CR1 SE recomputed in every resample). Percentile analytic: "
        "P(|t(G-1)| <= 1.96 sqrt((G-1)/G)), the coverage of a CR0-like spread with normal "
        "quantiles. Widths: mean CR1-t width, and the bootstrap-t's mean width over it.\n\n"
        + head + body + _findings(df) + MARK[1])


def _findings(df: pd.DataFrame) -> str:
    def rng(col: str, mask: pd.Series, scale: float = 100, unit: str = "%") -> str:
        v = scale * df.loc[mask, col]
        digits = 1 if unit else 2
        return f"{v.min():.{digits}f}-{v.max():.{digits}f}{unit}"

    every, small, big = df["G"] > 0, df["G"] < 50, df["G"] >= 50
    gap = 100 * (df["naive"] - df["naive analytic"]).abs().max()
    perc_gap = 100 * (df["bootstrap percentile"] - df["percentile analytic"]).abs().max()
    return (
        "\n## Reading\n\n"
        f"- CR1-t covers {rng('CR1-t', every)} in every cell, down to G = 20.\n"
        f"- The percentile cluster bootstrap covers {rng('bootstrap percentile', big)} "
        f"with G >= 50 but only {rng('bootstrap percentile', small)} with G = 20, as "
        "P(|t(G-1)| <= 1.96 sqrt((G-1)/G)) says (largest gap "
        f"{perc_gap:.1f} points): its spread is CR0-like (too narrow by sqrt((G-1)/G)) and "
        "it has normal, not t, tails. The expanded percentile interval "
        f"(`ci=\"expanded\"`) covers {rng('bootstrap expanded', every)} everywhere.\n"
        f"- The bootstrap-t covers {rng('bootstrap-t', df['G'] >= 100)} with G >= 100 and "
        f"is conservative with G = 20-50 ({rng('bootstrap-t', df['G'] <= 50)}; its "
        f"intervals {rng('bootstrap-t / CR1-t width', df['G'] <= 50, 1, '')} times as "
        "wide as CR1-t's: heavy-tailed t* quantiles).\n"
        f"- Naive coverage follows 2 Phi(1.96 / sqrt(DEFF)) - 1 (largest gap {gap:.1f} "
        "points, within the band); with DEFF = 10.8 a nominal 95% interval covers less "
        "than half the time.\n")


def test_closed_form_cr1_is_the_sandwich_cr1():
    """The vectorised CR1 of the study equals evalmix.inference.sandwich's CR1."""
    from evalmix.inference import sandwich
    rng = np.random.default_rng(1)
    for m in (1, 10, 50):
        sim = clustered_scores(N // m, m, p=P, icc=0.2, seed=rng)
        y = sim.data["y"].to_numpy(float)
        codes = np.repeat(np.arange(N // m), m)
        V = sandwich.vcov_cluster(np.ones((N, 1)), y - y.mean(), codes, type="CR1")
        ysum = np.bincount(codes, weights=y)[None, :]
        assert _cr1_var(ysum, m)[0] == pytest.approx(V[0, 0], rel=1e-12)


def _failures(df: pd.DataFrame) -> list[str]:
    """Every check of the study that fails, as readable lines (empty when all pass)."""
    out = []

    def within(value: float, expected: float, what: str) -> None:
        lo, hi = mc_band(expected, REPS, CHECKS)
        if not lo <= value <= hi:
            out.append(f"{what}: {100 * value:.2f}% outside [{100 * lo:.2f}, {100 * hi:.2f}]%")

    for _, r in df.iterrows():
        where = f"m={r['m']}, rho={r['rho']}, G={r['G']}"
        within(r["naive"], r["naive analytic"], f"naive {where}")
        within(r["CR1-t"], LEVEL, f"CR1-t {where}")
        within(r["bootstrap expanded"], LEVEL, f"bootstrap expanded {where}")
        within(r["bootstrap percentile"], r["percentile analytic"], f"percentile {where}")
        if r["G"] >= 100:
            within(r["bootstrap-t"], LEVEL, f"bootstrap-t {where}")
        else:  # heavy-tailed t* quantiles: conservative, so its width is what is checked
            lo = mc_band(LEVEL, REPS, CHECKS)[0]
            if r["bootstrap-t"] < lo:
                out.append(f"bootstrap-t {where}: {100 * r['bootstrap-t']:.2f}% < {100 * lo:.2f}%")
            if not 1 <= r["bootstrap-t / CR1-t width"] <= BOOT_T_WIDTH:
                out.append(f"bootstrap-t {where}: width {r['bootstrap-t / CR1-t width']:.3f} "
                           f"x CR1-t, expected 1 to {BOOT_T_WIDTH}")
    return out


def _docs_block() -> str | None:
    text = DOCS.read_text()
    found = re.search(re.escape(MARK[0]) + ".*?" + re.escape(MARK[1]), text, flags=re.S)
    return found.group(0) if found else None


def test_coverage_study():
    df = _study()
    block = _markdown(df)
    print("\n" + block)
    if os.environ.get("EVALMIX_WRITE_DOCS") == "1":
        text = DOCS.read_text()
        DOCS.write_text(text.replace(_docs_block() or "", block, 1) if _docs_block()
                        else block + "\n\n" + text)
    assert not _failures(df), "\n".join(_failures(df))
    assert _docs_block() == block, ("docs/coverage.md's table is not what this code and seed "
                                    "give: run `make docs-tables` and commit the result")
