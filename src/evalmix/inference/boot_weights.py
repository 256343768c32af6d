"""Resampling weights of the pairs cluster bootstrap: multinomial counts of clusters per
replicate, drawn in chunks of at most :data:`CHUNK_ENTRIES` entries, and the gathered sums
of a chunk's drawn clusters (also nested in strata).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

#: Largest number of weight entries (replicates x resampled units) held at once.
CHUNK_ENTRIES = 2_000_000


def cluster_weights(n_clusters: int, reps: int, rng: np.random.Generator) -> np.ndarray:
    """Multinomial resampling counts: (reps, n_clusters), each row sums to n_clusters.

    Row ``b`` counts how often each cluster was drawn when ``n_clusters`` clusters are
    drawn with replacement (equivalently Multinomial(G, 1/G each)).
    """
    return _counts(_draw_indices(n_clusters, reps, rng), n_clusters)


def _draw_indices(n_clusters: int, reps: int, rng: np.random.Generator) -> np.ndarray:
    """(reps, n_clusters) cluster indices drawn with replacement (the one random step)."""
    return rng.integers(0, int(n_clusters), size=(reps, int(n_clusters)))


def index_chunks(groups: list[np.ndarray], reps: int, rng: np.random.Generator,
                 n_blocks: int | None = None
                 ) -> Iterator[tuple[int, int, np.ndarray]]:
    """Drawn cluster indices, a block of replicates at a time: ``(a, b, idx)`` with
    ``idx`` of shape ``(b - a, G)`` holding the clusters of replicates ``a..b-1``.

    ``groups`` lists the cluster codes of each stratum (one array ``arange(G)`` when
    there are none): every stratum's clusters are drawn with replacement among
    themselves, so each stratum keeps its number of clusters. Blocks hold at most
    :data:`CHUNK_ENTRIES` entries of ``n_blocks`` columns (default ``G``). Every pairs
    cluster bootstrap in evalmix draws through this function, so the same seed gives the
    same resamples for a built-in estimand and a custom statistic.
    """
    g = sum(int(m.size) for m in groups)
    chunk = max(1, CHUNK_ENTRIES // max(n_blocks or g, 1))
    for a in range(0, reps, chunk):
        b = min(reps, a + chunk)
        if len(groups) == 1 and np.array_equal(groups[0], np.arange(g)):
            yield a, b, _draw_indices(g, b - a, rng)
        else:
            yield a, b, np.concatenate(
                [m[_draw_indices(m.size, b - a, rng)] for m in groups], axis=1)


def _counts(idx: np.ndarray, n_clusters: int) -> np.ndarray:
    """Resampling counts (reps, G) from drawn indices."""
    reps, g = idx.shape[0], int(n_clusters)
    flat = (idx + (np.arange(reps, dtype=np.int64) * g)[:, None]).ravel()
    return np.bincount(flat, minlength=reps * g).reshape(reps, g).astype(np.float64)


def _gather_sums(idx: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """Sum of per-cluster statistics over the drawn clusters: (reps, p).

    Equal to ``_counts(idx) @ columns`` but cheaper when ``columns`` has few columns
    (no (reps x G) count matrix is built).
    """
    p = columns.shape[1]
    if p % 2:
        columns = np.column_stack([columns, np.zeros(columns.shape[0])])
    out = []
    for j in range(0, columns.shape[1], 2):  # two real columns per complex gather
        z = np.take(columns[:, j] + 1j * columns[:, j + 1], idx).sum(axis=1)
        out += [z.real, z.imag]
    return np.stack(out[:p], axis=1)


def _nested_weights(block_cluster: np.ndarray, n_clusters: int, reps: int,
                    rng: np.random.Generator) -> np.ndarray:
    """Two-stage counts on units: draw clusters, then units within each drawn copy."""
    order = np.argsort(block_cluster, kind="stable")
    size = np.bincount(block_cluster, minlength=n_clusters)
    start = np.concatenate([[0], np.cumsum(size)[:-1]])
    n_units = block_cluster.size
    picked = rng.integers(0, n_clusters, size=(reps, n_clusters))
    counts = size[picked].ravel()
    rows = np.repeat(np.repeat(np.arange(reps), n_clusters), counts)
    first = np.repeat(start[picked].ravel(), counts)
    within = np.floor(rng.random(counts.sum()) * np.repeat(counts, counts)).astype(np.int64)
    unit_sorted = first + within
    w_sorted = np.bincount(rows * n_units + unit_sorted, minlength=reps * n_units)
    w = np.empty((reps, n_units))
    w[:, order] = w_sorted.reshape(reps, n_units)
    return w
