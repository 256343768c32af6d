"""Agreement coefficients as functions of totals, vectorised over replicates.

Every coefficient here is a function of a vector of totals (an agreement table, a
coincidence matrix, per-unit counts or moments) summed over units, so that
:mod:`evalmix.inference.totals` can give it a delta-method and a cluster-bootstrap
interval. Each function takes totals of shape ``(r, d)`` (``r`` replicates) and returns
``(r,)``; all are complex-safe (the delta method differentiates them by complex step).

Pair statistics take the ``K x K`` agreement table ``C`` of two raters on a common
ordered category list (rows: first rater). Panel statistics take per-unit category
counts. Definitions:

* percent agreement ``p_o = trace(C) / n``;
* Cohen's kappa ``1 - sum(w P) / sum(w E)`` with disagreement weights ``w`` = ``1 - I``
  (unweighted), ``|i - j|`` (linear) or ``(i - j)^2`` (quadratic) on category positions,
  exactly as ``sklearn.metrics.cohen_kappa_score`` (Cohen 1960, 1968);
* Gwet's AC1 ``(p_o - p_e) / (1 - p_e)``, ``p_e = sum_k pi_k (1 - pi_k) / (q - 1)``,
  ``pi_k`` the mean share of category ``k`` and ``q`` the number of categories of the
  scale (Gwet 2008, with his multi-rater form for panels);
* Krippendorff's alpha ``1 - (n - 1) sum(o d) / sum(n_c n_k d)`` from the coincidence
  matrix ``o`` with the nominal, ordinal or interval metric ``d`` (Krippendorff 2011),
  as the ``krippendorff`` package computes it; for continuous ratings the interval alpha
  is written with moments, ``1 - (n - 1) sum_u q_u / (2 (n S2 - S1^2))``;
* Fleiss' kappa generalised to any number of raters per unit (Fleiss 1971);
* Kendall's tau-b and Spearman's rho (average ranks) of the contingency table, as
  ``scipy.stats.kendalltau`` and ``spearmanr`` compute them on the ratings.

References
----------
Cohen, J. (1960). A coefficient of agreement for nominal scales. Educational and
Psychological Measurement 20, 37-46. doi:10.1177/001316446002000104
Cohen, J. (1968). Weighted kappa. Psychological Bulletin 70, 213-220.
doi:10.1037/h0026256
Fleiss, J. L. (1971). Measuring nominal scale agreement among many raters.
Psychological Bulletin 76, 378-382. doi:10.1037/h0031619
Gwet, K. L. (2008). Computing inter-rater reliability and its variance in the presence
of high agreement. British Journal of Mathematical and Statistical Psychology 61,
29-48. doi:10.1348/000711006X126600
Krippendorff, K. (2011). Computing Krippendorff's alpha-reliability.
https://repository.upenn.edu/asc_papers/43
Hayes, A. F. & Krippendorff, K. (2007). Answering the call for a standard reliability
measure for coding data. Communication Methods and Measures 1, 77-89.
doi:10.1080/19312450709336664
"""

from __future__ import annotations

from typing import get_args

import numpy as np

from evalmix.vocabulary import AgreementWeights, MeasurementLevel

__all__ = ["WEIGHTS", "METRICS", "table_stat", "panel_totals", "panel_stat",
           "moment_totals", "alpha_moments", "pooled_ratio"]

WEIGHTS: tuple[str, ...] = get_args(AgreementWeights)
METRICS: tuple[str, ...] = get_args(MeasurementLevel)


# ------------------------------------------------------------------ metrics
def _weights(k: int, weights: str) -> np.ndarray:
    i = np.arange(k, dtype=float)
    if weights == "linear":
        return np.abs(i[:, None] - i[None, :])
    if weights == "quadratic":
        return (i[:, None] - i[None, :]) ** 2
    return 1.0 - np.eye(k)


def _delta(metric: str, values: np.ndarray, nc: np.ndarray) -> np.ndarray:
    """Krippendorff's squared difference ``(r, K, K)`` (ordinal depends on the marginals)."""
    k = values.size
    if metric == "nominal":
        return np.broadcast_to(1.0 - np.eye(k), (nc.shape[0], k, k))
    if metric == "interval":
        d = (values[:, None] - values[None, :]) ** 2
        return np.broadcast_to(d, (nc.shape[0], k, k))
    cum = np.concatenate([np.zeros((nc.shape[0], 1), dtype=nc.dtype), np.cumsum(nc, axis=1)],
                         axis=1)
    # for c <= k: sum_{g=c..k} n_g - (n_c + n_k) / 2
    span = cum[:, None, 1:] - cum[:, :-1, None] - (nc[:, :, None] + nc[:, None, :]) / 2
    upper = np.triu(np.ones((k, k), dtype=bool))
    span = np.where(upper, span, np.swapaxes(span, 1, 2))
    return span**2


def _alpha(o: np.ndarray, metric: str, values: np.ndarray) -> np.ndarray:
    nc = o.sum(axis=2)
    n = nc.sum(axis=1)
    d = _delta(metric, values, nc)
    observed = (o * d).sum(axis=(1, 2))
    expected = (nc[:, :, None] * nc[:, None, :] * d).sum(axis=(1, 2))
    return 1 - (n - 1) * observed / expected


# ------------------------------------------------------------------ pair tables
def _midranks(counts: np.ndarray) -> np.ndarray:
    before = np.cumsum(counts, axis=1) - counts
    return before + (counts + 1) / 2


def _kendall(C: np.ndarray) -> np.ndarray:
    # pairs (i' < i): above[i, j] = sum_{i' < i} C[i', j]; concordant partners lie to
    # the left of (i, j) in those rows, discordant ones to the right
    above = np.cumsum(C, axis=1) - C
    left_incl = np.cumsum(above, axis=2)
    concordant = (C * (left_incl - above)).sum(axis=(1, 2))
    discordant = (C * (above.sum(axis=2)[:, :, None] - left_incl)).sum(axis=(1, 2))
    n = C.sum(axis=(1, 2))
    rows, cols = C.sum(axis=2), C.sum(axis=1)
    n0 = n * (n - 1) / 2
    ties_r = (rows * (rows - 1)).sum(axis=1) / 2
    ties_c = (cols * (cols - 1)).sum(axis=1) / 2
    return (concordant - discordant) / np.sqrt((n0 - ties_r) * (n0 - ties_c))


def _spearman(C: np.ndarray) -> np.ndarray:
    n = C.sum(axis=(1, 2))
    rows, cols = C.sum(axis=2), C.sum(axis=1)
    mid = ((n + 1) / 2)[:, None]
    a = _midranks(rows) - mid
    b = _midranks(cols) - mid
    cov = np.einsum("rij,ri,rj->r", C, a, b)
    return cov / np.sqrt((rows * a**2).sum(axis=1) * (cols * b**2).sum(axis=1))


def table_stat(name: str, values: np.ndarray, n_scale: int,
               shape: tuple[int, int] | None = None):  # noqa: ANN201
    """The pair statistic ``name`` as a function of flattened ``K x K`` tables.

    ``values`` are the K ordered category values (positions for nominal labels);
    ``n_scale`` is the number of categories of the scale (Gwet's ``q``). ``shape``
    gives a rectangular table (each rater's own ordered values) for ``spearman`` and
    ``kendall``, which need only the order of each margin.
    Names: ``percent_agreement``, ``cohen_kappa``, ``kappa_linear``, ``kappa_quadratic``,
    ``gwet_ac1``, ``alpha_nominal``, ``alpha_ordinal``, ``alpha_interval``, ``spearman``,
    ``kendall``.

    Examples
    --------
    >>> f = table_stat("cohen_kappa", np.arange(2.0), 2)
    >>> float(f(np.array([[40., 10, 5, 45]]))[0])
    0.7
    """
    values = np.asarray(values, dtype=float)
    k = values.size
    rows, cols = shape or (k, k)

    def stat(t: np.ndarray) -> np.ndarray:
        C = t.reshape(t.shape[0], rows, cols)
        n = C.sum(axis=(1, 2))
        if name == "spearman":
            return _spearman(C)
        if name == "kendall":
            return _kendall(C)
        if name == "percent_agreement":
            return np.trace(C, axis1=1, axis2=2) / n
        if name in ("cohen_kappa", "kappa_linear", "kappa_quadratic"):
            w = _weights(k, {"cohen_kappa": "none", "kappa_linear": "linear",
                             "kappa_quadratic": "quadratic"}[name])
            P = C / n[:, None, None]
            E = P.sum(axis=2)[:, :, None] * P.sum(axis=1)[:, None, :]
            return 1 - (w * P).sum(axis=(1, 2)) / (w * E).sum(axis=(1, 2))
        if name == "gwet_ac1":
            po = np.trace(C, axis1=1, axis2=2) / n
            pi = (C.sum(axis=2) + C.sum(axis=1)) / (2 * n[:, None])
            pe = (pi * (1 - pi)).sum(axis=1) / (n_scale - 1)
            return (po - pe) / (1 - pe)
        if name.startswith("alpha_"):
            return _alpha(C + np.swapaxes(C, 1, 2), name[len("alpha_"):], values)
        raise ValueError(f"unknown statistic {name!r}")

    return stat


# ------------------------------------------------------------------ panels
def panel_totals(counts: np.ndarray) -> np.ndarray:
    """Per-unit totals of a panel from its category counts ``(n_units, K)``.

    Columns: the coincidence contributions (K*K), then ``[m >= 2, p_a term, m >= 1]``,
    the shares ``R_uk / m_u`` (K), and the pooled pair counts ``[agreeing pairs, pairs]``.
    """
    R = np.asarray(counts, dtype=float)
    n_u, k = R.shape
    m = R.sum(axis=1)
    pairable = m >= 2
    with np.errstate(divide="ignore", invalid="ignore"):
        coin = (R[:, :, None] * R[:, None, :] - R[:, :, None] * np.eye(k)) / np.where(
            pairable, m - 1, 1)[:, None, None]
        pa = np.where(pairable, (R * (R - 1)).sum(axis=1) / (m * (m - 1)), 0.0)
        share = np.where((m >= 1)[:, None], R / np.where(m >= 1, m, 1)[:, None], 0.0)
    coin[~pairable] = 0.0
    agree = (R * (R - 1)).sum(axis=1)
    return np.column_stack([coin.reshape(n_u, k * k), pairable, pa, m >= 1, share,
                            agree, m * (m - 1)]).astype(float)


def panel_stat(name: str, values: np.ndarray, n_scale: int):  # noqa: ANN201
    """The panel statistic ``name`` of :func:`panel_totals` (``percent_agreement``,
    ``fleiss_kappa``, ``gwet_ac1``, ``alpha_nominal``, ``alpha_ordinal``,
    ``alpha_interval``)."""
    values = np.asarray(values, dtype=float)
    k = values.size

    def stat(t: np.ndarray) -> np.ndarray:
        o = t[:, :k * k].reshape(t.shape[0], k, k)
        n2, pa, n1 = t[:, k * k], t[:, k * k + 1], t[:, k * k + 2]
        share = t[:, k * k + 3:k * k + 3 + k]
        agree, pairs = t[:, -2], t[:, -1]
        if name == "percent_agreement":
            return agree / pairs
        if name.startswith("alpha_"):
            return _alpha(o, name[len("alpha_"):], values)
        po = pa / n2
        pi = share / n1[:, None]
        if name == "fleiss_kappa":
            pe = (pi**2).sum(axis=1)
        elif name == "gwet_ac1":
            pe = (pi * (1 - pi)).sum(axis=1) / (n_scale - 1)
        else:
            raise ValueError(f"unknown statistic {name!r}")
        return (po - pe) / (1 - pe)

    return stat


# ------------------------------------------------------------------ continuous ratings
def moment_totals(values: np.ndarray) -> np.ndarray:
    """Per-unit moments ``[m, S1, S2, q]`` of a ratings matrix ``(n_units, raters)`` with
    NaN for missing; units with fewer than two ratings contribute zeros."""
    V = np.asarray(values, dtype=float)
    ok = np.isfinite(V)
    m = ok.sum(axis=1).astype(float)
    x = np.where(ok, V, 0.0)
    s1, s2 = x.sum(axis=1), (x**2).sum(axis=1)
    pairable = m >= 2
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(pairable, 2 * (m * s2 - s1**2) / np.where(pairable, m - 1, 1), 0.0)
    out = np.column_stack([m, s1, s2, q])
    out[~pairable] = 0.0
    return out


def alpha_moments(t: np.ndarray) -> np.ndarray:
    """Krippendorff's interval alpha of :func:`moment_totals`."""
    n, s1, s2, q = t[:, 0], t[:, 1], t[:, 2], t[:, 3]
    return 1 - (n - 1) * q / (2 * (n * s2 - s1**2))


def pooled_ratio(t: np.ndarray) -> np.ndarray:
    """``t[:, 0] / t[:, 1]``: agreeing pairs over pairs (pooled percent agreement)."""
    return t[:, 0] / t[:, 1]
