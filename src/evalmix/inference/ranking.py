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
* :func:`rank_sets`: marginal and simultaneous rank confidence sets by the step-down
  procedure of Mogstad, Romano, Shaikh & Wilhelm (2024), as their R package csranks
  (``csranks``): one-sided tests of every ordered pair ``theta_a > theta_b``, the
  critical value re-estimated on the hypotheses not yet rejected until no more are.
  Its first step is the single-step max-t above, so its sets are never wider.
  :func:`tau_best` (csranks' ``cstaubest``): the models that may be among the best
  ``tau``; :func:`tie_groups`: blocks of models that cannot be ordered against each other.
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
    "RankSets",
    "rank_sets",
    "tau_best",
    "tie_groups",
]

#: entries (models x draws) per block of the max-t and rank-set loops: a block of the
#: null statistics stays in cache while its maxima are taken (a K x draws table does not:
#: 16 MB at K = 200 and 10,000 draws); blocking changes no number (a maximum is a maximum)
BLOCK_ENTRIES = 2**18


def _draw_block(k: int) -> int:
    """Draws per block for ``k`` models (:data:`BLOCK_ENTRIES`, at least 64)."""
    return max(64, BLOCK_ENTRIES // max(k, 1))

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


#: the last covariance :func:`_sqrt_psd` factored and its factor: a leaderboard asks for
#: the same K x K factor three times (max-t, simultaneous and marginal rank sets), an
#: eigendecomposition of 1.4 s each at K = 2,000
_LAST_ROOT: list[tuple[np.ndarray, np.ndarray]] = []


def _sqrt_psd(vcov: np.ndarray) -> np.ndarray:
    """``R`` with ``R R' = vcov`` (eigenvalues below zero, from rounding, set to 0).

    The factor of the previous call is returned again (as a copy) when ``vcov`` is
    equal to that call's, element for element.
    """
    last = _LAST_ROOT[0] if _LAST_ROOT else None  # one read: safe beside other threads
    if last is not None and last[0].shape == vcov.shape and np.array_equal(last[0], vcov):
        return last[1].copy()
    lam, U = np.linalg.eigh((vcov + vcov.T) / 2)
    root = U * np.sqrt(np.maximum(lam, 0.0))
    _LAST_ROOT[:] = [(np.array(vcov, copy=True), root.copy())]
    return root


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
        block = _draw_block(k)
        for c in range(0, b, block):  # a cache-sized block of draws at a time
            e = min(b, c + block)
            out = maxabs[a + c:a + e]
            Zb = Zt[:, c:e]
            for r in rows:  # one model against all later ones: no pairs x draws gather
                cols = np.flatnonzero(inv[r])
                d = np.abs(Zb[cols] - Zb[r])
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


# --------------------------------------------------------------------------- rank sets
@dataclass(frozen=True)
class RankSets:
    """Rank confidence sets ``{lo, ..., hi}`` of K estimates (rank 1 = largest).

    Attributes
    ----------
    rank, lo, hi : (K,) int arrays
        Point rank (1 + the number of strictly larger estimates) and the set's bounds.
    better : (K, K) bool array or None
        ``better[a, b]``: ``theta_a > theta_b`` rejected-against, i.e. model ``a`` is
        significantly better than ``b`` (simultaneous sets only; the family they invert).
    simultaneous, stepdown : bool
    level : float
    steps : int
        Steps of the (largest) step-down run (1: single step).
    """

    rank: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    better: np.ndarray | None
    simultaneous: bool
    stepdown: bool
    level: float
    steps: int


def _null_draws(vcov: np.ndarray, df: float, draws: int, rng: np.random.Generator
                ) -> np.ndarray:
    """``(K, draws)`` draws of the estimation error: N(0, V), or multivariate t_df."""
    z = _sqrt_psd(np.asarray(vcov, dtype=float)) @ rng.standard_normal(
        (np.shape(vcov)[0], draws))
    if np.isfinite(df):
        z /= np.sqrt(rng.chisquare(df, draws) / df)[None, :]
    return z


def _inverse_se(vcov: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(se, 1 / se)`` of all ``theta_a - theta_b`` as K x K tables (``1 / 0 -> 0``)."""
    d = np.diag(vcov)
    se = np.sqrt(np.maximum(d[:, None] + d[None, :] - 2 * vcov, 0.0))
    np.fill_diagonal(se, 0.0)
    return se, np.where(se > 0, 1.0 / np.where(se > 0, se, 1.0), 0.0)


def _t_table(est: np.ndarray, se: np.ndarray) -> np.ndarray:
    """``t[a, b] = (est_a - est_b) / se_ab`` (``+-inf`` at zero SE, 0 on ties)."""
    diff = est[:, None] - est[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        t = diff / se
    return np.where(diff == 0, 0.0, t)


def _simultaneous(t: np.ndarray, inv: np.ndarray, z: np.ndarray, level: float,
                  stepdown: bool, rejected: np.ndarray | None) -> tuple[np.ndarray, int]:
    """Step-down test of every ordered pair ``H_ab: theta_a <= theta_b``.

    The null statistic of ``H_ab`` is ``(Z_a - Z_b) / se_ab``; each step's critical value
    is the ``level`` quantile of its maximum over the hypotheses not yet rejected (held
    per draw as one running maximum per row ``a``, recomputed only for the rows that
    lost a hypothesis). Romano & Wolf (2005), Algorithm 2.1; csranks' ``csdiffmeans``.
    """
    k, n = z.shape
    better = np.zeros((k, k), dtype=bool) if rejected is None else rejected.copy()
    if rejected is not None and (not stepdown or not rejected.any()):
        return better, 1  # the given first step rejected nothing: so does the step-down
    active = ~np.eye(k, dtype=bool) & ~better
    rowmax = np.full((k, n), -np.inf, dtype=z.dtype)
    dirty = np.ones(k, dtype=bool)
    steps = 0
    while active.any():
        for a in np.flatnonzero(dirty):
            cols = np.flatnonzero(active[a])
            if not cols.size:
                rowmax[a] = -np.inf
            block = _draw_block(cols.size)
            for c in range(0, n if cols.size else 0, block):
                e = min(n, c + block)
                s = z[a, c:e][None, :] - z[cols, c:e]
                s *= inv[a, cols][:, None]
                rowmax[a, c:e] = s.max(axis=0)
        steps += 1
        crit = float(np.quantile(rowmax.max(axis=0), level))
        new = active & (t > crit)
        if not new.any():
            break
        better |= new
        active &= ~new
        dirty = new.any(axis=1)
        if not stepdown:
            break
    return better, steps


def _marginal(t: np.ndarray, inv: np.ndarray, z: np.ndarray, level: float, stepdown: bool
              ) -> tuple[np.ndarray, np.ndarray, int]:
    """Each model's own family: ``H_jk`` and ``H_kj`` for all ``k``, stepped down."""
    k, n = z.shape
    n_better = np.zeros(k, dtype=np.int64)
    n_worse = np.zeros(k, dtype=np.int64)
    most = 0
    for j in range(k):
        up = np.ones(k, dtype=bool)  # H_jm: is j better than m?
        up[j] = False
        dn = up.copy()  # H_mj: is m better than j?
        steps = 0
        while up.any() or dn.any():
            steps += 1
            crit = float(np.quantile(_family_max(z, j, inv[j], up, dn), level))
            new_up, new_dn = up & (t[j] > crit), dn & (-t[j] > crit)
            if not (new_up.any() or new_dn.any()):
                break
            n_worse[j] += int(new_up.sum())
            n_better[j] += int(new_dn.sum())
            up &= ~new_up
            dn &= ~new_dn
            if not stepdown:
                break
        most = max(most, steps)
    return 1 + n_better, k - n_worse, most


def _family_max(z: np.ndarray, j: int, inv_j: np.ndarray, up: np.ndarray, dn: np.ndarray
                ) -> np.ndarray:
    """Per draw, the maximum of the null statistics ``s_m = (z_j - z_m) inv_jm`` over the
    active ``H_jm`` (``up``) and of ``-s_m`` over the active ``H_mj`` (``dn``): formed
    only for the active rows, a block of draws at a time (a maximum over a union is the
    maximum of the parts' maxima, so the numbers are those of the whole table)."""
    n = z.shape[1]
    m = np.full(n, -np.inf, dtype=z.dtype)
    parts = [(rows, sign) for rows, sign in ((np.flatnonzero(up & dn), 0),
                                              (np.flatnonzero(up & ~dn), 1),
                                              (np.flatnonzero(dn & ~up), -1)) if rows.size]
    block = _draw_block(z.shape[0])
    for a in range(0, n, block):
        b = min(n, a + block)
        out = m[a:b]
        for rows, sign in parts:
            s = (z[j, a:b][None, :] - z[rows, a:b]) * inv_j[rows][:, None]
            if sign >= 0:
                np.maximum(out, s.max(axis=0), out=out)
            if sign <= 0:
                np.maximum(out, -s.min(axis=0), out=out)
    return m


def rank_sets(
    estimate: np.ndarray,
    vcov: np.ndarray,
    *,
    level: float = 0.95,
    simultaneous: bool = True,
    stepdown: bool = True,
    df: float = np.inf,
    draws: int = 10_000,
    rng: np.random.Generator,
    rejected: np.ndarray | None = None,
) -> RankSets:
    """Marginal or simultaneous confidence sets for the ranks of K estimates.

    The procedure of Mogstad, Romano, Shaikh & Wilhelm (2024) as their R package csranks
    implements it (``csranks(x, Sigma, simul=, stepdown=)``): test every ordered pair
    ``H_ab: theta_a <= theta_b`` with ``t_ab = (x_a - x_b) / se_ab`` against the
    ``level`` quantile of ``max t*`` over the hypotheses not yet rejected, ``t*`` drawn
    from ``N(0, V)`` (a parametric bootstrap; multivariate t with ``df`` degrees of
    freedom when finite), and repeat on the rest until nothing more is rejected. Then
    ``lo = 1 + #{rejected: a better than m}``, ``hi = K - #{rejected: m better than a}``.

    * ``simultaneous=True``: one family of all ``K (K - 1)`` ordered pairs; the K sets
      hold jointly with probability ``level`` (asymptotically). The first step equals the
      single-step max-t of :func:`maxt_critical`, so step-down sets are never wider.
    * ``simultaneous=False``: for each model its own ``2 (K - 1)`` hypotheses; each set
      covers its model's rank with probability ``level``.

    Unlike csranks, the same ``draws`` serve every step (common random numbers: the
    critical values then fall monotonically and the result is reproducible from the
    seed); csranks redraws at each step. Both estimate the same quantiles.

    Parameters
    ----------
    estimate : (K,) array
        Estimates; higher is better (rank 1).
    vcov : (K, K) array
        Their covariance (e.g. cluster-robust).
    level : float
        Confidence level.
    simultaneous : bool
        Joint sets for all K ranks (True) or each model's own set (False).
    stepdown : bool
        Step down (True) or stop after the single step (False).
    df : float
        Degrees of freedom of the multivariate t (``G - 1`` for G clusters; ``inf``:
        normal, as csranks).
    draws : int
        Monte Carlo draws (csranks' ``R``; default 1000 there).
    rng : numpy.random.Generator
        Source of the draws.
    rejected : (K, K) bool array, optional
        Simultaneous only: ``a`` better than ``b`` already established by a valid
        single-step test of the whole family at ``level`` (e.g. the max-t intervals of
        :func:`maxt_critical`, as the leaderboard has them), taken as the first step:
        the next steps test the rest, so the sets are never wider than that test's,
        whatever the Monte Carlo draws, and when it rejected nothing the procedure
        stops there (no second look at the whole family with new draws).

    Returns
    -------
    RankSets

    Examples
    --------
    >>> est = np.array([3.0, 2.9, 0.0, -3.0])
    >>> sets = rank_sets(est, np.eye(4) * 0.01, rng=np.random.default_rng(1))
    >>> sets.lo.tolist(), sets.hi.tolist()
    ([1, 1, 3, 4], [2, 2, 3, 4])

    References
    ----------
    Mogstad, Romano, Shaikh & Wilhelm (2024), doi:10.1093/restud/rdad006; Romano, J. P.
    & Wolf, M. (2005). Exact and approximate stepdown methods for multiple hypothesis
    testing. JASA 100, 94-108. doi:10.1198/016214504000000539
    """
    level = check_level(level)
    if draws < 100:
        raise InvalidOptionError(f"draws must be at least 100 for a rank set, got {draws}")
    est = np.asarray(estimate, dtype=float)
    V = np.asarray(vcov, dtype=float)
    k = est.size
    if V.shape != (k, k) or not np.all(np.isfinite(est)) or not np.all(np.isfinite(V)):
        raise EvalmixError(f"rank_sets needs {k} finite estimates and a finite ({k}, {k}) "
                           f"covariance, got {V.shape}")
    se, inv = _inverse_se(V)
    t = _t_table(est, se)
    # single precision for the null draws: quantiles to ~1e-7 relative, half the memory
    # traffic of the K^2 x draws statistics
    z = _null_draws(V, df, int(draws), rng).astype(np.float32)
    inv = inv.astype(np.float32)
    rank = (1 + (est[None, :] > est[:, None]).sum(axis=1)).astype(np.int64)
    if simultaneous:
        if rejected is not None and np.shape(rejected) != (k, k):
            raise EvalmixError(f"rejected must be ({k}, {k}), got {np.shape(rejected)}")
        better, steps = _simultaneous(t, inv, z, level, stepdown, None if rejected is None
                                      else np.asarray(rejected, dtype=bool))
        _, lo, hi = rank_intervals(est, better)
        return RankSets(rank, lo, hi, better, True, stepdown, level, steps)
    lo, hi, steps = _marginal(t, inv, z, level, stepdown)
    return RankSets(rank, lo.astype(np.int64), hi.astype(np.int64), None, False,
                    stepdown, level, steps)


def tau_best(sets: RankSets, tau: int = 1) -> np.ndarray:
    """Confidence set for the ``tau`` best (csranks' ``cstaubest``): ``lo <= tau``.

    With simultaneous sets at level ``1 - alpha``, every model whose true rank is at most
    ``tau`` has ``lo <= tau`` with probability at least ``1 - alpha`` (the projection
    set of Mogstad et al. 2024); ``tau = 1`` is the set for the best model. csranks
    tests the one-sided family ``theta_b > theta_a`` for this set, which over all ordered
    pairs is the two-sided family, so the result is the same.

    Returns
    -------
    (K,) bool array
    """
    if not sets.simultaneous:
        raise InvalidOptionError("tau_best needs simultaneous rank sets (simultaneous=True); "
                                 "a marginal set covers one model's rank, not the top tau")
    if not isinstance(tau, (int, np.integer)) or not 1 <= tau <= sets.rank.size:
        raise InvalidOptionError(f"tau must be an integer from 1 to {sets.rank.size}, "
                                 f"got {tau!r}")
    return sets.lo <= tau


def tie_groups(estimate: np.ndarray, better: np.ndarray) -> np.ndarray:
    """Tie groups: 1 for the top block, 2 for the next, ... (per model).

    Order the models by estimate (ties by index); a boundary falls after the first
    ``r`` models exactly when each of them is significantly better than each model after
    them (``better[a, b]`` for all such pairs), so a group is a block of models that
    cannot be separated from the models next to them, and every model in a group is
    significantly better than every model in any later group. With simultaneous
    ``better`` all the boundaries hold jointly at its level.
    """
    est = np.asarray(estimate, dtype=float)
    k = est.size
    order = np.lexsort((np.arange(k), -est))
    miss = (~np.asarray(better, dtype=bool)[np.ix_(order, order)]).astype(np.int64)
    P = miss.cumsum(axis=0).cumsum(axis=1)  # P[r, c]: misses in rows <= r, cols <= c
    r = np.arange(1, k)  # boundary after the first r models: rows < r, cols >= r
    cut = (P[r - 1, k - 1] - P[r - 1, r - 1]) == 0
    group = np.empty(k, dtype=np.int64)
    group[order] = 1 + np.concatenate([[0], np.cumsum(cut)])
    return group
