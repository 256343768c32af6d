"""Array layer of leaderboards: all pairwise contrasts, max-t, rank intervals.

Pure functions of a vector of K estimates and their K x K (cluster-robust) covariance.
Every pairwise contrast ``theta_i - theta_j`` is a linear function of the same vector, so
all ``K (K - 1) / 2`` of them come from one covariance matrix (never one regression per
pair).

* :func:`maxt_critical`: the critical value of the simultaneous (single-step max-t)
  intervals of a family of pairwise contrasts, from the joint multivariate-t
  distribution of the studentized contrasts (Hothorn, Bretz & Westfall 2008), computed
  by Monte Carlo: ``Z = E R'`` with ``R R' = V`` (symmetric square root) and ``E``
  standard normal (equivalently, a Gaussian multiplier bootstrap of the cluster score
  sums, whose covariance given the data is ``V``), divided by ``sqrt(chi2_df / df)``.
* :func:`rank_intervals`: simultaneous rank intervals by inverting simultaneous pairwise
  comparisons (Klein, Wright & Wieczorek 2020; Mogstad, Romano, Shaikh & Wilhelm 2024):
  ``rank_lo = 1 + #{models significantly better}``,
  ``rank_hi = K - #{models significantly worse}``. If the simultaneous intervals cover
  all differences with probability >= 1 - alpha, the rank intervals cover all true ranks
  jointly with at least that probability.
* Tier letters (compact letter display) are in :mod:`evalmix.inference.letters`.
* :func:`pairwise_satterthwaite`: the CR2 Satterthwaite degrees of freedom of every
  difference of two cell means at once (vectorised over pairs through K x K Gram
  matrices; :func:`evalmix.inference.compare_all.compare_all` uses it too).

References
----------
Hothorn, T., Bretz, F. & Westfall, P. (2008). Simultaneous inference in general
parametric models. Biometrical Journal 50, 346-363. doi:10.1002/bimj.200810425
Klein, M., Wright, T. & Wieczorek, J. (2020). A joint confidence region for an overall
ranking of populations. JRSS C 69, 589-606. doi:10.1111/rssc.12402
Mogstad, M., Romano, J. P., Shaikh, A. M. & Wilhelm, D. (2024). Inference for ranks with
applications to mobility across neighbourhoods and academic achievement across
countries. Review of Economic Studies 91, 476-518. doi:10.1093/restud/rdad006
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from evalmix.errors import EvalmixError, InvalidOptionError, check_level

__all__ = [
    "MaxT",
    "all_pairs",
    "pair_se",
    "maxt_critical",
    "maxt_adjusted_p",
    "rank_intervals",
    "pairwise_satterthwaite",
]

#: Draws x models held in memory at once by :func:`maxt_critical`.
CHUNK_ENTRIES = 4_000_000


def all_pairs(k: int) -> tuple[np.ndarray, np.ndarray]:
    """Index arrays ``(i, j)`` of the ``k (k - 1) / 2`` pairs ``i < j``."""
    i, j = np.triu_indices(k, 1)
    return i.astype(np.int64), j.astype(np.int64)


def pair_se(vcov: np.ndarray, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Standard errors of ``theta_i - theta_j`` from the covariance of ``theta``."""
    d = np.diag(vcov)
    var = d[i] + d[j] - 2 * vcov[i, j]
    return np.sqrt(np.maximum(var, 0.0))


def _sqrt_psd(vcov: np.ndarray) -> np.ndarray:
    """``R`` with ``R R' = vcov`` (eigenvalues below zero, from rounding, set to 0)."""
    lam, U = np.linalg.eigh((vcov + vcov.T) / 2)
    return U * np.sqrt(np.maximum(lam, 0.0))


@dataclass(frozen=True)
class MaxT:
    """Monte Carlo null distribution of ``max_p |T_p|``.

    Attributes
    ----------
    crit : float
        Its ``level`` quantile: the simultaneous critical value.
    maxabs : ndarray
        The sorted draws of ``max_p |T_p|`` (for adjusted p-values).
    df : float
        Degrees of freedom of the multivariate t (``inf``: multivariate normal).
    draws : int
    """

    crit: float
    maxabs: np.ndarray
    df: float
    draws: int


def maxt_critical(
    vcov: np.ndarray,
    i: np.ndarray,
    j: np.ndarray,
    *,
    level: float = 0.95,
    df: float = np.inf,
    draws: int = 10_000,
    rng: np.random.Generator,
) -> MaxT:
    """Simultaneous critical value for the contrasts ``theta_i - theta_j``.

    The studentized contrasts ``T_p = (c_p' Z) / se_p`` with ``Z ~ t_df(0, V)`` have the
    joint multivariate-t distribution of Hothorn, Bretz & Westfall (2008); ``crit`` is
    the ``level`` quantile of ``max_p |T_p|``, estimated from ``draws`` Monte Carlo
    draws of ``Z`` (nothing of size pairs x pairs is formed).

    Parameters
    ----------
    vcov : (K, K) array
        Covariance of the K estimates (e.g. cluster-robust).
    i, j : int arrays
        The family of contrasts.
    level : float
        Simultaneous confidence level.
    df : float
        Degrees of freedom (``G - 1`` for G clusters); ``inf`` for multivariate normal.
    draws : int
        Monte Carlo draws of the maximum |t|.
    rng : numpy.random.Generator
        Source of the draws.

    Returns
    -------
    MaxT

    Examples
    --------
    >>> V = np.eye(3)
    >>> i, j = all_pairs(3)
    >>> mt = maxt_critical(V, i, j, draws=20_000, rng=np.random.default_rng(1))
    >>> 2.2 < mt.crit < 2.5   # Tukey: studentized range q(0.95, 3, inf) / sqrt(2) = 2.34
    True

    References
    ----------
    Hothorn, Bretz & Westfall (2008), doi:10.1002/bimj.200810425.
    """
    level = check_level(level)
    if draws < 100:
        raise InvalidOptionError(f"draws must be at least 100 for a max-t quantile, got {draws}")
    i = np.asarray(i, dtype=np.int64)
    j = np.asarray(j, dtype=np.int64)
    se = pair_se(vcov, i, j)
    R = _sqrt_psd(np.asarray(vcov, dtype=float))
    k = R.shape[0]
    # inverse SEs as a K x K upper-triangular table: row a holds the pairs (a, b > a)
    inv = np.zeros((k, k))
    lo, hi = np.minimum(i, j), np.maximum(i, j)
    inv[lo, hi] = np.where(se > 0, 1.0 / np.where(se > 0, se, 1.0), 0.0)
    rows = np.flatnonzero(inv.any(axis=1))
    maxabs = np.zeros(draws)
    step = max(1, CHUNK_ENTRIES // k)
    for a in range(0, draws, step):
        b = min(step, draws - a)
        Zt = R @ rng.standard_normal((k, b))  # (K, b): draws in columns
        if np.isfinite(df):
            Zt /= np.sqrt(rng.chisquare(df, b) / df)[None, :]
        out = maxabs[a:a + b]
        for r in rows:  # one model against all later ones: no pairs x draws gather
            cols = np.flatnonzero(inv[r])
            d = np.abs(Zt[cols] - Zt[r])
            d *= inv[r, cols][:, None]
            np.maximum(out, d.max(axis=0), out=out)
    maxabs.sort()
    return MaxT(float(np.quantile(maxabs, level)), maxabs, float(df), int(draws))


def maxt_adjusted_p(maxt: MaxT, t: np.ndarray) -> np.ndarray:
    """Single-step max-t adjusted p-values ``P(max |T*| >= |t|)``."""
    t = np.abs(np.asarray(t, dtype=float))
    below = np.searchsorted(maxt.maxabs, t, side="left")
    out = (maxt.draws - below) / maxt.draws
    return np.where(np.isfinite(t), out, np.nan)


def rank_intervals(
    estimate: np.ndarray,
    better: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Point ranks and simultaneous rank intervals from significant comparisons.

    Parameters
    ----------
    estimate : (K,) array
        Higher is better; the point rank is 1 + the number of strictly larger estimates.
    better : (K, K) bool array
        ``better[a, b]``: model ``a`` is significantly better than ``b`` (from
        simultaneous intervals of all pairs).

    Returns
    -------
    rank, rank_lo, rank_hi : (K,) int arrays
        ``rank_lo = 1 + #{a: better[a, m]}``, ``rank_hi = K - #{b: better[m, b]}``
        (Klein, Wright & Wieczorek 2020, doi:10.1111/rssc.12402).
    """
    est = np.asarray(estimate, dtype=float)
    b = np.asarray(better, dtype=bool)
    k = est.size
    if b.shape != (k, k):
        raise EvalmixError(f"better must be ({k}, {k}), got {b.shape}")
    rank = 1 + (est[None, :] > est[:, None]).sum(axis=1)
    rank_lo = 1 + b.sum(axis=0)
    rank_hi = k - b.sum(axis=1)
    return rank.astype(np.int64), rank_lo.astype(np.int64), rank_hi.astype(np.int64)


def pairwise_satterthwaite(
    count: np.ndarray,
    factor: np.ndarray,
    i: np.ndarray | None = None,
    j: np.ndarray | None = None,
) -> np.ndarray:
    """CR2 Satterthwaite df of cell-mean differences ``mu_i - mu_j`` (or of each mean).

    For contrast ``c`` of the cell means of ``y ~ 0 + group`` with clusters ``g``:
    ``d_g = sum_m c_m^2 a_gm`` with ``a_gm = N_gm f_gm^2 / n_m^2`` and
    ``F_gm = c_m N_gm f_gm / n_m^{3/2}``; ``df = (sum d - sum F^2)^2 /
    (sum d^2 - 2 sum d f2 + ||F'F||^2)`` (Bell & McCaffrey 2002; Pustejovsky & Tipton
    2018). For two-entry contrasts every term is an entry of a K x K Gram matrix, so all
    pairs cost ``O(G K^2)``.

    Parameters
    ----------
    count : (G, K) array
        Rows per cluster x group cell.
    factor : (G, K) array
        CR2 factor of each cell, from :func:`evalmix.inference.compare_all.cell_means_vcov`.
    i, j : int arrays, optional
        Pairs; when omitted, the df of each mean (contrast ``e_m``).

    Returns
    -------
    ndarray
    """
    n_m = count.sum(axis=0)
    a = count * factor**2 / n_m**2
    bq = count * factor / n_m**1.5
    q = bq**2
    sa, sq = a.sum(axis=0), q.sum(axis=0)
    AA, AQ, BB = a.T @ a, a.T @ q, bq.T @ bq
    if i is None:
        trace = sa - sq
        frob = np.diag(AA) - 2 * np.diag(AQ) + np.diag(BB) ** 2
    else:
        trace = sa[i] + sa[j] - sq[i] - sq[j]
        d2 = AA[i, i] + 2 * AA[i, j] + AA[j, j]
        df2 = AQ[i, i] + AQ[i, j] + AQ[j, i] + AQ[j, j]
        ff = BB[i, i] ** 2 + 2 * BB[i, j] ** 2 + BB[j, j] ** 2
        frob = d2 - 2 * df2 + ff
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(frob > 0, trace**2 / frob, np.nan)
