"""Independent tasks run here, on joblib workers or on a Dask cluster, collected as they
finish: the one home of evalmix's parallel back ends.

The coverage grid (:func:`evalmix.plan.coverage`: one task per design cell) and the
bootstrap leaderboard (:func:`evalmix.inference.board_bootstrap.leaderboard_bootstrap`:
one task per block of replicates) both call :func:`run_tasks`. A task's result must not
depend on where it runs (each task seeds itself from the run's seed and its own key), so
the three back ends give the same numbers.

This module imports only :mod:`evalmix.errors`, so every layer may use it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from evalmix.errors import EvalmixError

__all__ = ["run_tasks", "DASK_CONNECT_TIMEOUT"]

#: seconds to wait for a Dask scheduler given by address
DASK_CONNECT_TIMEOUT = 10


def run_tasks(task: Callable[..., Any], arguments: Sequence[tuple[Any, ...]],
              collect: Callable[[Any], None], *, jobs: int = 1, client: Any = None,
              shared: Any = None) -> str:
    """``collect(task(*args))`` for every ``args`` of ``arguments``, in the order the
    tasks finish; the back end's name (``"sequential"``, ``"joblib"`` or ``"dask"``).

    Parameters
    ----------
    task : callable
        A module-level function (it is pickled for joblib and Dask).
    arguments : sequence of tuple
        One tuple of positional arguments per task.
    collect : callable
        Called in this process with each task's result as it finishes.
    jobs : int
        joblib worker processes (``-1``: all cores); 1 runs in this process.
    client : dask.distributed.Client or str, optional
        A Dask client, or a scheduler address (``"tcp://host:8786"``) to connect to;
        it takes precedence over ``jobs``.
    shared : object, optional
        Passed to every task as its first argument; on Dask it is sent to the workers
        once (``scatter``), not with every task.

    Examples
    --------
    >>> out = []
    >>> run_tasks(pow, [(2, 3), (3, 2)], out.append)
    'sequential'
    >>> out
    [8, 9]
    """
    calls: list[tuple[Any, ...]] = [
        tuple(args) if shared is None else (shared, *args) for args in arguments]
    if client is not None and calls:
        _run_dask(client, task, arguments, collect, shared)
        return "dask"
    if jobs != 1 and len(calls) > 1:
        _run_joblib(int(jobs), task, calls, collect)
        return "joblib"
    for args in calls:
        collect(task(*args))
    return "sequential"


def _run_joblib(jobs: int, task: Callable[..., Any], calls: Iterable[tuple[Any, ...]],
                collect: Callable[[Any], None]) -> None:
    """Tasks on loky worker processes, shut down when all are done (or one fails):
    loky keeps idle workers alive for minutes otherwise."""
    from joblib import Parallel, delayed
    from joblib.externals.loky import get_reusable_executor

    try:
        par = Parallel(n_jobs=jobs, return_as="generator_unordered")
        for result in par(delayed(task)(*args) for args in calls):
            collect(result)
    finally:
        get_reusable_executor().shutdown(wait=True, kill_workers=True)


def _run_dask(client: Any, task: Callable[..., Any], arguments: Sequence[tuple[Any, ...]],
              collect: Callable[[Any], None], shared: Any) -> None:
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise EvalmixError("a Dask client or --scheduler needs Dask, an optional "
                           "dependency: pip install 'evalmix[dask]', or run locally with "
                           "jobs= (--jobs)") from None

    own = isinstance(client, str)
    if own:
        try:
            dask_client = Client(client, timeout=DASK_CONNECT_TIMEOUT)
        except (OSError, TimeoutError, ValueError) as exc:
            raise EvalmixError(
                f"could not connect to the Dask scheduler at {client!r} within "
                f"{DASK_CONNECT_TIMEOUT} s ({type(exc).__name__}: "
                f"{' '.join(str(exc).split())[:160]}); check the address (tcp://host:8786) "
                "and that the scheduler is running, or drop --scheduler to run locally"
            ) from None
    else:
        dask_client = client
    try:
        head = () if shared is None else (dask_client.scatter([shared], broadcast=True)[0],)
        futures = [dask_client.submit(task, *head, *args, pure=False) for args in arguments]
        for fut in as_completed(futures):
            collect(fut.result())
    finally:
        if own:
            dask_client.close()
