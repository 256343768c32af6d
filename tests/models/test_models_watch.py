"""What a to-target MCMC fit shows while it runs (issue 35): the warm-up, then the draws
per chain against the total its checks are projected to need, with the worst ESS and
R-hat and an ETA."""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest
from rich.console import Console

import evalmix
from evalmix.models.bayes._watch import SamplingProgress, projected_draws
from evalmix.sim import pairwise_judges

NAN = np.array([np.nan])


@pytest.mark.parametrize(("r_hat", "bulk", "tail", "expected"), [
    (1.02, NAN, NAN, 500),        # R-hat - 1 = 0.02 -> 0.008: 2.5x the draws
    (1.005, 100.0, 300.0, 800),   # ESS 100 -> 400: 4x
    (1.005, 500.0, 450.0, 201),   # passes: the next draw
    (1.5, NAN, NAN, 4000),        # capped at draws_max
])
def test_projected_draws_scale_ess_up_and_r_hat_down_with_the_draws(r_hat, bulk, tail,
                                                                    expected):
    got = projected_draws(200, np.array([1.001, r_hat]), np.atleast_1d(bulk),
                          np.atleast_1d(tail), rhat_max=1.008, ess_min=400, draws_max=4000)
    assert got == expected


def test_sampling_progress_shows_warm_up_then_projected_draws_and_the_worst_values():
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=False, width=120)
    with SamplingProgress(True, chains=2, tune=400, draws_first=200,
                          console=console) as bar:
        bar.snapshot(150, 0)
        bar.snapshot(400, 120)
        bar.checked(200, 800, np.array([1.004]), np.array([100.0]), np.array([250.0]), 400)
    text = buf.getvalue()
    assert "MCMC warm-up, 2 chains" in text and "400/400" in text
    line = next(ln for ln in text.splitlines() if "MCMC draws" in ln)
    assert "ESS 100/400" in line and "R-hat 1.004" in line and "200/800" in line


@pytest.mark.mcmc
def test_a_to_target_fit_with_progress_draws_its_own_lines(capsys):
    table = pairwise_judges(8, 3, 3, 3, seed=4).table()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        evalmix.fit(table, seed=1, progress=True)
    err = capsys.readouterr().err
    assert "MCMC warm-up" in err and "MCMC draws (ESS " in err
