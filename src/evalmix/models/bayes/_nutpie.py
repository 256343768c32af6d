"""nutpie's sampler, driven through its compiled core (``nutpie._lib``).

``import nutpie`` imports ArviZ (``nutpie.sample`` does, at the top), and ArviZ imports
matplotlib, ``scipy.stats``, xarray and compiles a Numba ``vectorize``: ~2.7-3.4 s of a
fresh process here, three times the default 4,320-row fit itself (docs/models.md,
*Latency*). The fits read nutpie's raw Arrow trace and never use its ArviZ conversion, so
this module loads the compiled extension on its own, registered under its own name
(``nutpie._lib``: a later ``import nutpie`` finds it there and does not initialise it
twice), and drives it as ``nutpie.sample(..., return_raw_trace=True, blocking=False)``
does: the same settings, model and storage objects, so the same draws for the same seed
(tested). Two things are left to nutpie's Python layer: compiling a PyMC model
(``engine="pymc"``, which imports PyMC anyway), and the notebook progress bar (HTML,
through IPython): with ``progress=True`` in a notebook the sampler is started by
nutpie's own ``_BackgroundSampler``.

This uses nutpie's private extension API (``PyNutsSettings``, ``PySampler.from_pymc``,
``PyMcModel``, ``LogpFunc``, ``ExpandFunc``, ``PyVariable``), pinned by the
``nutpie`` requirement in pyproject.toml and tested against ``nutpie.sample``.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["Run", "in_notebook", "lib", "model_from_callbacks", "start"]


@cache
def lib() -> Any:
    """``nutpie._lib``, loaded without running ``nutpie/__init__.py``."""
    if "nutpie._lib" in sys.modules:
        return sys.modules["nutpie._lib"]
    spec = importlib.util.find_spec("nutpie")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("nutpie is not installed (pip install nutpie)")
    for location in spec.submodule_search_locations:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = str(Path(location) / f"_lib{suffix}")
            if Path(path).exists():
                loader = importlib.machinery.ExtensionFileLoader("nutpie._lib", path)
                ext = importlib.util.spec_from_file_location("nutpie._lib", path,
                                                             loader=loader)
                assert ext is not None
                module = importlib.util.module_from_spec(ext)
                sys.modules["nutpie._lib"] = module
                loader.exec_module(module)
                return module
    raise ImportError("nutpie's compiled extension (nutpie/_lib*.so) was not found")


def model_from_callbacks(*, ndim: int, n_expanded: int, logp: Any, expand: Any,
                         user_data: np.ndarray, keep: Any, names: list[str],
                         shapes: list[tuple[int, ...]], coords: dict[str, list],
                         dims: dict[str, tuple[str, ...]], initial_point: Any) -> Any:
    """A ``nutpie._lib.PyMcModel`` whose log density and expansion are Numba C
    callbacks (``logp(ndim, x, grad, logp_out, user_data)`` and the expansion) reading
    ``user_data`` (what ``nutpie.compile_pymc.CompiledPyMCModel._make_model`` builds);
    ``keep`` is held by the model so the arrays behind ``user_data`` stay alive."""
    core = lib()
    expand_fn = core.ExpandFunc(ndim, n_expanded, expand.address, user_data.ctypes.data,
                                keep)
    logp_fn = core.LogpFunc(logp.address, user_data.ctypes.data, keep)
    sizes = {name: len(vals) for name, vals in coords.items()}
    variables = core.PyVariable.new_variables(names, ["float64"] * len(names), shapes,
                                              sizes, dims)
    return core.PyMcModel(logp_fn, expand_fn, variables, ndim, sizes, coords,
                          initial_point, _no_transform_adapter)


def _no_transform_adapter(*args: Any, **kwargs: Any) -> Any:
    raise NotImplementedError("evalmix's kernel does not use nutpie's transform adaptation")


@dataclass(frozen=True)
class Run:
    """A running sampler: ``snapshot()`` copies the trace so far (nutpie's raw Arrow
    trace), ``results()`` waits for the end and returns it, ``cancel()`` stops it."""

    sampler: Any
    owner: Any = None       # nutpie's notebook wrapper, kept alive with its callback

    def finished(self) -> bool:
        try:
            return bool(self.sampler.is_finished())
        except TimeoutError:   # nutpie raises it while the sampler still runs
            return False

    def snapshot(self) -> Any:
        return self.sampler.inspect()

    def results(self) -> Any:
        """The trace at the end; after Ctrl-C, the chains are stopped and the trace so
        far is returned (as ``nutpie.sample`` does); after another error they are
        stopped and it is raised."""
        try:
            self.sampler.wait(None)
        except KeyboardInterrupt:
            self.cancel()
        except BaseException:
            self.cancel()
            raise
        return self.sampler.take_results()

    def cancel(self) -> None:
        self.sampler.abort()


def in_notebook() -> bool:
    """A Jupyter kernel or Colab (where nutpie shows an HTML progress bar)."""
    if "google.colab" in sys.modules:
        return True
    shell = sys.modules.get("IPython")
    ip = shell.get_ipython() if shell is not None else None  # type: ignore[attr-defined]
    return ip is not None and type(ip).__name__ == "ZMQInteractiveShell"


def start(model: Any, *, draws: int, tune: int, chains: int, seed: int, progress: bool,
          low_rank: bool = False, **settings: Any) -> Run:
    """Start ``chains`` chains of nutpie's NUTS on ``model`` (a ``PyMcModel``) in
    parallel threads, as ``nutpie.sample(model, draws=, tune=, chains=, cores=chains,
    seed=, low_rank_modified_mass_matrix=low_rank, return_raw_trace=True,
    blocking=False, **settings)`` starts them."""
    core = lib()
    config = (core.PyNutsSettings.LowRank if low_rank else core.PyNutsSettings.Diag)(seed)
    config.num_tune, config.num_draws, config.num_chains = tune, draws, chains
    for name, value in settings.items():
        setattr(config, name, value)
    store = core.PyStorage.arrow()
    if progress and in_notebook():
        from nutpie.sample import _BackgroundSampler  # its HTML progress; imports ArviZ

        owner = _BackgroundSampler(_Prebuilt(model), config, np.zeros(0), chains,
                                   progress_bar=True, return_raw_trace=True, store=store)
        return Run(owner._sampler, owner)
    kind = core.ProgressType.indicatif(100) if progress else core.ProgressType.none()
    return Run(core.PySampler.from_pymc(config, chains, model, kind, store))


@dataclass(frozen=True)
class _Prebuilt:
    """What nutpie's ``_BackgroundSampler`` asks of a compiled model: ``_make_sampler``."""

    model: Any

    def _make_sampler(self, settings: Any, init_mean: Any, cores: int, progress_type: Any,
                      store: Any) -> Any:
        return lib().PySampler.from_pymc(settings, cores, self.model, progress_type, store)
