"""Coverage studies: interval methods over a grid of clustered designs, in parallel.

:func:`coverage` runs each design cell (clusters ``K``, cluster size ``m``, ICC or
difference ICC, size CV, few clusters) for ``reps`` replications and reports, per cell
and method, the coverage, mean width and Monte Carlo SE. Cells are independent, so they
run in parallel: joblib locally (``jobs``), or Dask distributed (``client=`` or a
scheduler address). Each cell's random numbers come from a ``numpy.random.SeedSequence``
keyed by the study seed and the cell's parameters, so joblib, Dask and a sequential run
give identical numbers, and a cell's numbers do not change when the grid around it does.
With ``out=`` every finished cell is appended to ``coverage.jsonl`` at once, so an
interrupted grid keeps what finished and ``resume=True`` continues it.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evalmix._progress import Progress
from evalmix._tasks import run_tasks
from evalmix.errors import EvalmixError, InvalidOptionError, check_level
from evalmix.plan._cells import CELL_DEFAULTS, FAST_METHODS, check_cell, run_cell
from evalmix.seeding import SeedLike, keyed_seed_sequence, resolve_seed
from evalmix.tidy import tidy_rows

__all__ = ["coverage", "CoverageResult", "DEFAULT_GRID", "COVERAGE_COLUMNS", "expand_grid"]

#: Issue 3's design: N = 1,000 scores, m in {1, 5, 10, 20, 50}, rho in {0.1, 0.2} (10 cells).
DEFAULT_GRID: dict[str, list[Any]] = {
    "cluster_size": [1, 5, 10, 20, 50],
    "icc": [0.1, 0.2],
}

PARAM_COLUMNS: tuple[str, ...] = tuple(CELL_DEFAULTS)
COVERAGE_COLUMNS: tuple[str, ...] = (
    "cell", *PARAM_COLUMNS, "method", "level", "coverage", "mcse", "mean_width",
    "miss_below", "miss_above", "mean_se", "sd_estimate", "reps", "n_failed", "boot_reps",
    "deff", "naive_analytic", "seed", "seconds",
)
_MANIFEST_KEYS = ("methods", "reps", "seed", "level", "boot_reps")


@dataclass(frozen=True, eq=False)
class CoverageResult:
    """Coverage of interval methods over a grid of designs.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per cell x method, columns :data:`COVERAGE_COLUMNS`: the cell's
        parameters, ``coverage`` (share of intervals containing the truth), ``mcse``
        (its Monte Carlo SE, sqrt(c (1 - c) / reps)), ``mean_width``, ``miss_below`` /
        ``miss_above`` (interval entirely below / above the truth), ``mean_se``,
        ``sd_estimate`` (empirical SD of the estimates), ``deff`` (the cell's design
        effect) and ``naive_analytic`` (2 Phi(z / sqrt(deff)) - 1, the large-sample
        coverage of the naive interval), ``seconds`` (wall time of the cell).
    methods, reps, seed, level, boot_reps : as requested
    out : pathlib.Path or None
        Folder holding ``coverage.jsonl`` (streamed) and ``coverage.csv`` (final).
    n_resumed : int
        Cells read back from ``out`` instead of run.
    seconds : float
        Wall time of the call.
    """

    table: pd.DataFrame
    methods: tuple[str, ...]
    reps: int
    seed: int
    level: float
    boot_reps: int
    out: Path | None = None
    n_resumed: int = 0
    seconds: float = 0.0
    backend: str = "sequential"
    notes: tuple[str, ...] = field(default_factory=tuple)

    def tidy(self) -> pd.DataFrame:
        """One row per cell x method in the result contract
        (:data:`evalmix.tidy.RESULT_COLUMNS`): ``contrast`` is ``"cell <i>"``,
        ``estimate`` the coverage and ``se`` its Monte Carlo SE (``scale="coverage"``);
        then the coverage table's columns (:data:`COVERAGE_COLUMNS`)."""
        t = self.table
        return tidy_rows(t.assign(contrast="cell " + t["cell"].astype(str),
                                  estimate=t["coverage"], se=t["mcse"]),
                         cluster="", scale="coverage", note="")

    def __str__(self) -> str:
        cols = ["cell", "estimand", "n_clusters", "cluster_size", "icc", "method", "coverage",
                "mcse", "mean_width"]
        return (f"CoverageResult({len(self.table)} rows, reps={self.reps}, seed={self.seed}, "
                f"level={self.level}, {self.seconds:.1f} s)\n"
                + self.table[cols].to_string(index=False, float_format="{:.4g}".format))


# ------------------------------------------------------------------------------ grid
def expand_grid(grid: Any) -> list[dict[str, Any]]:
    """Cells from a dict of lists (Cartesian product), a list of dicts or a DataFrame.

    With ``n_obs`` in a dict grid (total items), ``n_clusters`` is ``n_obs / cluster_size``.
    """
    if grid is None:
        grid = {**DEFAULT_GRID, "n_obs": [1000]}
    if isinstance(grid, pd.DataFrame):
        cells = grid.to_dict("records")
    elif isinstance(grid, Mapping):
        keys = list(grid)
        values = [v if isinstance(v, list | tuple | np.ndarray) else [v] for v in grid.values()]
        cells = [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*values)]
    elif isinstance(grid, Iterable):
        cells = [dict(c) for c in grid]
    else:
        raise InvalidOptionError(f"grid must be a dict of lists, a list of dicts or a DataFrame, "
                                 f"got {type(grid).__name__}")
    out = []
    for c in cells:
        c = {k: (v.item() if isinstance(v, np.generic) else v) for k, v in c.items()}
        if "n_obs" in c:
            n_obs = c.pop("n_obs")
            c["n_clusters"] = int(round(n_obs / c.get("cluster_size",
                                                      CELL_DEFAULTS["cluster_size"])))
        out.append(check_cell(c))
    if not out:
        raise EvalmixError("the grid has no cells")
    return out


def _cell_key(cell: Mapping[str, Any]) -> str:
    return json.dumps({k: cell[k] for k in PARAM_COLUMNS}, sort_keys=True)


def cell_seed(seed: int, cell: Mapping[str, Any]) -> np.random.SeedSequence:
    """SeedSequence of one cell: the study seed plus a hash of the cell's parameters."""
    return keyed_seed_sequence(seed, _cell_key(cell))


def _task(index: int, cell: dict[str, Any], methods: tuple[str, ...], reps: int, level: float,
          boot_reps: int, seed: int, interval_kwargs: Mapping[str, Any] | None):
    rows = run_cell(cell, methods, reps=reps, level=level, boot_reps=boot_reps,
                    seed_seq=cell_seed(seed, cell), interval_kwargs=interval_kwargs)
    for r in rows:
        r["cell"] = index
        r["seed"] = seed
    return index, rows


# ------------------------------------------------------------------------ streaming
class _Sink:
    """Appends finished cells to ``coverage.jsonl``; reads them back on resume."""

    def __init__(self, out: Path | None, manifest: dict[str, Any], resume: bool):
        self.path: Path | None = None
        self.done: dict[str, list[dict[str, Any]]] = {}
        if out is None:
            return
        out = Path(out)
        path = self.path = out / "coverage.jsonl"
        out.mkdir(parents=True, exist_ok=True)
        man_path = out / "manifest.json"
        if path.exists() and path.stat().st_size > 0 and not resume:
            raise EvalmixError(f"{path} already holds results; pass resume=True (--resume) "
                               "to continue that run, or choose another out folder")
        if resume and man_path.exists():
            old = json.loads(man_path.read_text())
            diff = [k for k in _MANIFEST_KEYS if old.get(k) != manifest[k]]
            if diff:
                raise EvalmixError(
                    f"cannot resume {out}: its run used {', '.join(f'{k}={old.get(k)!r}' for k in diff)}"
                    f" but this call asks for {', '.join(f'{k}={manifest[k]!r}' for k in diff)}")
        man_path.write_text(json.dumps(manifest, indent=1))
        good: list[str] = []
        if resume and path.exists():
            for line in path.read_text().splitlines():
                try:
                    rec = json.loads(line)
                    self.done[rec["key"]] = rec["rows"]
                    good.append(line)
                except (json.JSONDecodeError, KeyError, TypeError):
                    continue  # a line cut short by an interruption
            # rewrite without the broken tail so appends start on a clean line
            path.write_text("".join(g + "\n" for g in good))
        elif not path.exists():
            path.touch()

    def write(self, key: str, rows: list[dict[str, Any]]) -> None:
        if self.path is None:
            return
        with self.path.open("a") as fh:
            fh.write(json.dumps({"key": key, "rows": rows}, default=float) + "\n")
            fh.flush()


# ------------------------------------------------------------------------- progress
# ------------------------------------------------------------------------------ main
def coverage(
    methods: Sequence[str] = ("naive", "CR1", "bootstrap"),
    grid: Any = None,
    *,
    reps: int = 2000,
    seed: SeedLike = None,
    level: float = 0.95,
    boot_reps: int = 999,
    jobs: int = 1,
    client: Any = None,
    out: str | Path | None = None,
    resume: bool = False,
    progress: bool = True,
    interval_kwargs: Mapping[str, Any] | None = None,
) -> CoverageResult:
    """Coverage, width and Monte Carlo SE of interval methods over a grid of designs.

    Parameters
    ----------
    methods : sequence of str
        ``"naive"``, ``"CR1"``, ``"CR2"``, ``"bootstrap"`` (percentile),
        ``"bootstrap-t"`` and ``"bootstrap-expanded"`` (expanded percentile) run vectorised over all replications of a cell (array-level
        sandwich and bootstrap on stacked replications). Any other name (e.g. ``"CR3"``,
        ``"wild"``) calls :func:`evalmix.interval` on each replication's table.
    grid : dict of lists, list of dicts or DataFrame
        Design cells; keys ``estimand`` ("mean": beta-binomial 0/1 scores with accuracy
        ``p``; "difference": normal per-item differences with mean ``effect`` and SD
        ``sd``), ``n_clusters``, ``cluster_size``, ``icc`` (the difference ICC for
        "difference"), ``size_cv`` (Gamma-distributed unequal sizes) and ``n_obs`` (sets
        ``n_clusters = n_obs / cluster_size``). A dict is expanded to its Cartesian
        product. Default: :data:`DEFAULT_GRID` with ``n_obs = 1000`` (10 cells).
    reps : int
        Replications per cell. The Monte Carlo SE of a coverage near 0.95 is
        ``sqrt(0.95 * 0.05 / reps)`` (0.0049 at 2,000 reps, 0.0022 at 10,000).
    seed : int or numpy.random.Generator, optional
        Study seed; cell ``c`` uses ``SeedSequence(seed, spawn_key=hash(c's parameters))``.
        A Generator contributes one drawn int and None draws one, recorded in the result
        (``seed``) and the manifest; a resumed run (``resume=True``) without a seed
        continues with its manifest's.
    level : float
        Nominal level of every interval.
    boot_reps : int
        Bootstrap resamples per replication.
    jobs : int
        Parallel joblib workers (``-1``: all cores); 1 runs in this process.
    client : dask.distributed.Client or str, optional
        A Dask client, or a scheduler address (``"tcp://host:8786"``) to connect to;
        cells are submitted as Dask tasks and collected as they finish.
    out : path, optional
        Folder for ``coverage.jsonl`` (one line per finished cell, written at once),
        ``manifest.json`` and the final ``coverage.csv``.
    resume : bool
        Continue a run in ``out``: cells already there are read back, not rerun (the
        settings must match; a line cut short by an interruption is dropped and rerun).
    progress : bool
        Show a rich progress bar over cells.
    interval_kwargs : mapping, optional
        Extra keyword arguments for :func:`evalmix.interval` (generic methods only).

    Returns
    -------
    CoverageResult

    References
    ----------
    Morris, T. P., White, I. R., & Crowther, M. J. (2019). Using simulation studies to
    evaluate statistical methods. *Statistics in Medicine*, 38(11), 2074-2102.
    https://doi.org/10.1002/sim.8086
    Cameron, A. C., Gelbach, J. B., & Miller, D. L. (2008). Bootstrap-based improvements
    for inference with clustered errors. *Review of Economics and Statistics*, 90(3),
    414-427. https://doi.org/10.1162/rest.90.3.414
    Pustejovsky, J. E., & Tipton, E. (2018). Small-sample methods for cluster-robust
    variance estimation and hypothesis testing in fixed effects models. *Journal of
    Business & Economic Statistics*, 36(4), 672-683.
    https://doi.org/10.1080/07350015.2016.1247004

    Examples
    --------
    >>> from evalmix.plan import coverage
    >>> res = coverage(["naive", "CR1"], {"n_clusters": [30], "cluster_size": [10],
    ...                "icc": [0.2]}, reps=500, seed=1, progress=False)
    >>> res.table[["method", "coverage"]].round(2).values.tolist()
    [['naive', 0.77], ['CR1', 0.96]]
    """
    t0 = time.perf_counter()
    methods = tuple(methods)
    if not methods:
        raise InvalidOptionError(f"no methods given; fast ones are {FAST_METHODS}")
    if int(reps) < 2 or int(boot_reps) < 2:
        raise InvalidOptionError(f"reps and boot_reps must be at least 2, got {reps}, {boot_reps}")
    # per-cell seeds derive from an int: a Generator (or None) contributes one, recorded
    if seed is None and resume and out is not None and (Path(out) / "manifest.json").is_file():
        seed = json.loads((Path(out) / "manifest.json").read_text()).get("seed")
    seed = resolve_seed(seed)
    if isinstance(jobs, bool) or not isinstance(jobs, int | np.integer) or jobs == 0:
        raise InvalidOptionError(f"jobs={jobs!r}: give the number of worker processes (1 = "
                                 "in this process, -1 = all cores)")
    level = check_level(level)
    seed, reps, boot_reps = int(seed), int(reps), int(boot_reps)
    cells = expand_grid(grid)
    keys = [_cell_key(c) for c in cells]
    if len(set(keys)) != len(keys):
        raise InvalidOptionError("the grid repeats a cell; every cell must differ in some parameter")
    manifest = {"methods": list(methods), "reps": reps, "seed": seed, "level": level,
                "boot_reps": boot_reps}
    sink = _Sink(None if out is None else Path(out), manifest, resume)
    results: dict[int, list[dict[str, Any]]] = {}
    for i, key in enumerate(keys):
        if key in sink.done:
            results[i] = [{**r, "cell": i} for r in sink.done[key]]
    n_resumed = len(results)
    todo = [i for i in range(len(cells)) if i not in results]
    args = (methods, reps, level, boot_reps, seed, interval_kwargs)
    backend = "sequential"
    with Progress(progress) as bar:
        task = bar.task("coverage grid: cells", len(cells), done=n_resumed)

        def collect(index: int, rows: list[dict[str, Any]]) -> None:
            # written first, counted after: an interrupt between the two never reports a
            # cell as kept that is not in coverage.jsonl
            sink.write(keys[index], rows)
            results[index] = rows
            bar.advance(task)

        try:
            if client is not None and todo:
                backend = "dask"
                _run_dask(client, todo, cells, args, collect)
            elif jobs != 1 and len(todo) > 1:
                backend = "joblib"
                _run_joblib(int(jobs), todo, cells, args, collect)
            else:
                for i in todo:
                    collect(*_task(i, cells[i], *args))
        except KeyboardInterrupt:
            kept = (f"kept {len(results)} of {len(cells)} cells in {sink.path}; rerun with "
                    "resume=True (CLI: --resume) to continue" if sink.path is not None
                    else f"{len(results)} of {len(cells)} cells had finished; nothing "
                    "written")
            raise KeyboardInterrupt(kept) from None
    rows = [r for i in sorted(results) for r in results[i]]
    table = pd.DataFrame(rows)
    table = table[list(COVERAGE_COLUMNS)]
    if out is not None:
        table.to_csv(Path(out) / "coverage.csv", index=False)
    return CoverageResult(table=table, methods=methods, reps=reps, seed=seed, level=level,
                          boot_reps=boot_reps, out=None if out is None else Path(out),
                          n_resumed=n_resumed, seconds=time.perf_counter() - t0,
                          backend=backend)


def _run_joblib(jobs: int, todo: list[int], cells, args, collect) -> None:
    """Cells on loky worker processes (:func:`evalmix._tasks.run_tasks`)."""
    run_tasks(_task, [(i, cells[i], *args) for i in todo], lambda r: collect(*r), jobs=jobs)


def _run_dask(client: Any, todo: list[int], cells, args, collect) -> None:
    """Cells as Dask tasks, collected as they finish (:func:`evalmix._tasks.run_tasks`)."""
    run_tasks(_task, [(i, cells[i], *args) for i in todo], lambda r: collect(*r),
              client=client)
