"""Clustered-scores simulator: beta-binomial clusters with known accuracy and ICC."""

from __future__ import annotations

import numpy as np
import pandas as pd

from evalmix.errors import InvalidOptionError, check_number
from evalmix.seeding import SeedLike, as_generator, seeded_rng
from evalmix.sim._common import SimResult

__all__ = ["clustered_scores", "cluster_sizes"]


def cluster_sizes(
    n_clusters: int, cluster_size: float, *, size_cv: float = 0.0, seed: SeedLike = None
) -> np.ndarray:
    """Cluster sizes with mean ``cluster_size`` and coefficient of variation ``size_cv``.

    ``size_cv=0`` gives equal sizes; otherwise sizes are Gamma-distributed (rounded, at
    least 1), so the design effect for unequal sizes, 1 + ((1 + CV^2) m_bar - 1) rho,
    can be checked.
    """
    if n_clusters < 1 or cluster_size < 1:
        raise InvalidOptionError("n_clusters and cluster_size must be at least 1")
    if size_cv <= 0:
        return np.full(n_clusters, int(round(cluster_size)), dtype=np.int64)
    rng = as_generator(seed)
    shape = 1.0 / size_cv**2
    sizes = rng.gamma(shape, cluster_size / shape, size=n_clusters)
    return np.maximum(1, np.round(sizes)).astype(np.int64)


def clustered_scores(
    n_clusters: int = 50,
    cluster_size: int | np.ndarray = 10,
    *,
    p: float = 0.7,
    icc: float = 0.1,
    size_cv: float = 0.0,
    seed: SeedLike = None,
) -> SimResult:
    """Binary scores in clusters: beta-binomial with accuracy ``p`` and ICC ``icc``.

    Each cluster ``k`` draws ``p_k ~ Beta(a, b)`` with ``a = p (1 - icc) / icc`` and
    ``b = (1 - p)(1 - icc) / icc``, so ``E[p_k] = p`` and the intra-cluster correlation
    of the 0/1 scores is exactly ``icc``; then its items are Bernoulli(``p_k``).

    Parameters
    ----------
    n_clusters : int
        Number of clusters.
    cluster_size : int or array of int
        Items per cluster, or one size per cluster.
    p : float
        Population accuracy (the true mean).
    icc : float
        Intra-cluster correlation in [0, 1).
    size_cv : float
        Coefficient of variation of cluster sizes when ``cluster_size`` is an int.
    seed : int or numpy.random.Generator
        Seeds the random draws (``None``: fresh entropy; see :mod:`evalmix.seeding`).

    Returns
    -------
    SimResult
        ``data`` has columns ``cluster``, ``item``, ``y``; ``truth`` holds ``p``,
        ``icc``, ``sizes`` and the design effect ``deff`` for these sizes.

    References
    ----------
    Kish, L. (1965). Survey Sampling. Wiley. (design effect 1 + (m - 1) rho)

    Examples
    --------
    >>> from evalmix.sim import clustered_scores
    >>> res = clustered_scores(20, 5, p=0.6, icc=0.2, seed=1)
    >>> res.data.shape
    (100, 3)
    """
    p = check_number("p", p, low=0, high=1, low_open=True, high_open=True)
    icc = check_number("icc", icc, low=0, high=1, high_open=True)
    rng, seed = seeded_rng(seed)
    if np.ndim(cluster_size) == 0:
        sizes = cluster_sizes(n_clusters, float(cluster_size), size_cv=size_cv, seed=rng)
    else:
        sizes = np.asarray(cluster_size, dtype=np.int64)
        if sizes.shape != (n_clusters,) or (sizes < 1).any():
            raise InvalidOptionError("cluster_size as an array needs one size >= 1 per cluster")
    if icc == 0:
        pk = np.full(n_clusters, p)
    else:
        scale = (1 - icc) / icc
        pk = rng.beta(p * scale, (1 - p) * scale, size=n_clusters)
    cluster = np.repeat(np.arange(n_clusters), sizes)
    y = (rng.random(cluster.size) < pk[cluster]).astype(np.int64)
    item = np.arange(cluster.size)
    data = pd.DataFrame({"cluster": [f"c{k:04d}" for k in cluster],
                         "item": [f"i{i:06d}" for i in item], "y": y})
    m_bar = sizes.mean()
    cv2 = sizes.var() / m_bar**2
    truth = {"p": p, "icc": icc, "sizes": sizes, "cluster_p": pk,
             "deff": 1 + ((1 + cv2) * m_bar - 1) * icc}
    return SimResult(data=data, truth=truth,
                     read_kwargs={"outcome": "y", "clusters": {"cluster": "cluster"}},
                     seed=seed)
