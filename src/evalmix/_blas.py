"""One BLAS thread for code that makes many small dense LAPACK calls.

Used by the per-cluster CR2 path of :mod:`evalmix.inference.sandwich`, the leaderboard's
many small sandwiches and the crossed mixed-model fits in :mod:`evalmix.models`. On a
busy 2-core machine OpenBLAS's second thread made a 203 x 203 Cholesky 250x slower
(350 ms vs 1.4 ms measured) and many small eigen-decompositions 8x slower.
"""

from __future__ import annotations

from threadpoolctl import threadpool_limits

__all__ = ["one_blas_thread"]


def one_blas_thread() -> threadpool_limits:
    """Context manager limiting BLAS (OpenBLAS, MKL, ...) to one thread."""
    return threadpool_limits(1, user_api="blas")
