"""The package version and the one way to record the versions a result was made with.

A neutral module (standard library only), so every layer may record versions without
importing the package root.
"""

from __future__ import annotations

import importlib.metadata
import platform
import sys

__all__ = ["__version__", "package_versions"]

__version__ = "0.1.0"


def package_versions(*packages: str, loaded_only: bool = False) -> dict[str, str]:
    """Versions of evalmix, Python and ``packages`` (installed distributions).

    Packages that are not installed are left out; with ``loaded_only`` so are packages
    this process has not imported (a report lists what produced it, not what happens to
    be installed).

    Examples
    --------
    >>> sorted(package_versions("numpy"))
    ['evalmix', 'numpy', 'python']
    """
    out = {"evalmix": __version__, "python": platform.python_version()}
    for name in packages:
        if name in out or (loaded_only and not _loaded(name)):
            continue
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


def _loaded(name: str) -> bool:
    """Whether this process has imported package ``name`` or one of its modules
    (evalmix loads ``nutpie._lib`` alone, without ``nutpie``)."""
    return name in sys.modules or any(m.startswith(name + ".") for m in sys.modules)
