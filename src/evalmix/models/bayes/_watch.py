"""What a fit that samples until its checks pass shows while it runs (``draws=None``).

Two counted lines on evalmix's progress display (:mod:`evalmix._progress`): the warm-up
(draws per chain of ``tune``), then the draws per chain, whose total is the number the
checks are projected to need, re-estimated at every check (:func:`projected_draws`)
and shown with the worst parameter's ESS and R-hat; rich's ETA follows from it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from evalmix._progress import Progress

__all__ = ["SamplingProgress", "projected_draws"]


def projected_draws(n: int, r_hat: np.ndarray, ess_bulk: np.ndarray, ess_tail: np.ndarray,
                    *, rhat_max: float, ess_min: float, draws_max: int) -> int:
    """Draws per chain the checks are projected to need after a check at ``n`` draws:
    ESS grows in proportion to the draws and ``R-hat - 1`` shrinks in inverse
    proportion (both for a chain that has mixed); at least ``n + 1``, at most
    ``draws_max``. NaN values (ESS not computed while an R-hat fails) are ignored."""
    need = float(n)
    r = float(np.nanmax(r_hat, initial=1.0))
    if r > rhat_max:
        need = max(need, n * (r - 1.0) / (rhat_max - 1.0))
    ess = np.concatenate([np.asarray(ess_bulk, float), np.asarray(ess_tail, float)])
    ess = ess[np.isfinite(ess)]
    if ess.size and float(ess.min()) < ess_min:
        need = max(need, n * ess_min / max(float(ess.min()), 1.0))
    return int(min(max(np.ceil(need), n + 1), draws_max))


class SamplingProgress:
    """The warm-up and draw counts of one to-target run (nothing when ``enabled`` is
    False). Use as a context manager.

    Parameters
    ----------
    enabled : bool
        Show the lines.
    chains, tune : int
        Chains and warm-up draws per chain.
    draws_first : int
        Draws per chain at the first check (the draw line's first total).
    console : rich.console.Console, optional
        Where to draw (default: stderr).
    """

    def __init__(self, enabled: bool, *, chains: int, tune: int, draws_first: int,
                 console: Any = None):
        self._bar = Progress(enabled, console=console)
        self._chains, self._tune, self._first = chains, tune, draws_first
        self._warm: Any = None
        self._draws: Any = None

    def __enter__(self) -> SamplingProgress:
        self._bar.__enter__()
        self._warm = self._bar.task(f"MCMC warm-up, {self._chains} chains", self._tune)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._bar.__exit__(*exc)

    def snapshot(self, tuned: int, n: int) -> None:
        """``tuned`` warm-up draws done in the slowest chain, ``n`` draws after it."""
        self._bar.update(self._warm, done=self._tune if n > 0 else tuned)
        if n > 0 and self._draws is None:
            self._draws = self._bar.task("MCMC draws", self._first)
        self._bar.update(self._draws, done=n)

    def checked(self, n: int, projected: int, r_hat: np.ndarray, ess_bulk: np.ndarray,
                ess_tail: np.ndarray, ess_min: float) -> None:
        """After a check at ``n`` draws: the new projected total and the worst values."""
        r = float(np.nanmax(r_hat, initial=1.0))
        ess = np.concatenate([np.asarray(ess_bulk, float), np.asarray(ess_tail, float)])
        ess = ess[np.isfinite(ess)]
        worst = f"ESS {ess.min():.0f}/{ess_min:.0f}, " if ess.size else ""
        self._bar.update(self._draws, done=n, total=projected,
                         description=f"MCMC draws ({worst}R-hat {r:.3f})")
