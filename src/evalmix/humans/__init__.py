"""evalmix.humans: judges against humans.

Agreement with design-based intervals (:func:`agreement`), the alternative annotator
test (:func:`alt_test`), estimates anchored on a human-labelled subset
(:func:`ppi`, :func:`rogan_gladen`), the transport check of a judge's errors and the
number of human labels a target precision needs (:func:`label_budget`). Every function
reads the same long table of ratings (:func:`read_ratings`). Submodules are imported
lazily.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY: dict[str, str] = {
    "read_ratings": "evalmix.humans.ratings",
    "Ratings": "evalmix.humans.ratings",
    "agreement": "evalmix.humans.concordance",
    "AgreementResult": "evalmix.humans.concordance",
    "alt_test": "evalmix.humans.alternative",
    "AltTestResult": "evalmix.humans.alternative",
    "ppi": "evalmix.humans.anchored",
    "PPIResult": "evalmix.humans.anchored",
    "ppi_arrays": "evalmix.humans.ppi_core",
    "rogan_gladen": "evalmix.humans.misclassification",
    "RoganGladenResult": "evalmix.humans.misclassification",
    "rogan_gladen_interval": "evalmix.humans.misclassification",
    "allocate_calibration": "evalmix.humans.misclassification",
    "transport_check": "evalmix.humans.transport",
    "TransportResult": "evalmix.humans.transport",
    "label_budget": "evalmix.humans.budget",
    "plan_labels": "evalmix.humans.budget",
    "LabelBudget": "evalmix.humans.budget",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'evalmix.humans' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
