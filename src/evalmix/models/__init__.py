"""evalmix.models: crossed random-effects models (Bayesian PyMC/nutpie, statsmodels).

``fit`` is imported lazily so that importing the spec does not import PyMC.
"""

from evalmix.models.result import ModelFit
from evalmix.models.spec import ModelSpec, RandomTerm, build_spec, collapse, parse_formula

__all__ = ["ModelFit", "ModelSpec", "RandomTerm", "build_spec", "collapse", "parse_formula",
           "fit"]


def __getattr__(name: str):
    if name == "fit":
        from evalmix.models.api import fit

        return fit
    raise AttributeError(f"module 'evalmix.models' has no attribute {name!r}")
