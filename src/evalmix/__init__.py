"""evalmix: honest uncertainty for LLM-evaluation results.

Read a long-format eval table once (:func:`read`), then set model-based and
design-based intervals side by side.

Heavy back ends (PyMC, Bambi, statsmodels) are imported only when used; the names
below are resolved lazily so ``import evalmix`` stays fast.
"""

from __future__ import annotations

import importlib
from typing import Any

from evalmix._version import __version__
from evalmix.data import EvalTable, read
from evalmix.errors import (
    ConvergenceWarning,
    DroppedRowsWarning,
    EvalmixError,
    EvalmixWarning,
    FewClustersWarning,
    InvalidOptionError,
    InvalidTableError,
    NotEstimableWarning,
    SingularFitWarning,
    TooFewClustersError,
)

# public name -> module that defines it (imported on first access)
_LAZY: dict[str, str] = {
    "interval": "evalmix.inference.api",
    "IntervalResult": "evalmix.inference.result",
    "compare_all": "evalmix.inference.compare_all",
    "leaderboard": "evalmix.inference.leaderboard",
    "LeaderboardResult": "evalmix.inference.leaderboard",
    "leaderboard_bootstrap": "evalmix.inference.board_bootstrap",
    "LeaderboardBootstrap": "evalmix.inference.board_bootstrap",
    "length_controlled_win_rate": "evalmix.inference.length_control",
    "style_controlled_bt": "evalmix.inference.style_control",
    "design_effect": "evalmix.design.effect",
    "gstudy": "evalmix.compare.gstudy",
    "GStudyResult": "evalmix.design.gresult",
    "dstudy": "evalmix.plan.dstudy",
    "DStudyResult": "evalmix.plan.dstudy",
    "fit": "evalmix.models.api",
    "Bayes": "evalmix.models.backends",
    "REML": "evalmix.models.backends",
    "Laplace": "evalmix.models.backends",
    "VB": "evalmix.models.backends",
    "MAP": "evalmix.models.backends",
    "ModelFit": "evalmix.models.result",
    "analyze": "evalmix.report.analyze",
    "Report": "evalmix.report.report",
    "power": "evalmix.plan.power",
    "mde": "evalmix.plan.power",
    "n_clusters_for_power": "evalmix.plan.power",
    "sim": "evalmix.sim",
    "agreement": "evalmix.humans.concordance",
    "alt_test": "evalmix.humans.alternative",
    "ppi": "evalmix.humans.anchored",
    "rogan_gladen": "evalmix.humans.misclassification",
    "bootstrap": "evalmix.inference.custom",
    "StatisticBootstrap": "evalmix.inference.custom",
    "permutation_test": "evalmix.inference.permutation",
    "PermutationResult": "evalmix.inference.permutation",
    "compare_runs": "evalmix.report.compare_runs",
    "RunComparison": "evalmix.compare.runs",
    "read_plan": "evalmix.data.analysis_plan",
    "AnalysisPlan": "evalmix.data.analysis_plan",
    "position_classes": "evalmix.compare.position",
}

__all__ = [
    "EvalTable",
    "read",
    "EvalmixError",
    "EvalmixWarning",
    "InvalidTableError",
    "InvalidOptionError",
    "TooFewClustersError",
    "FewClustersWarning",
    "ConvergenceWarning",
    "DroppedRowsWarning",
    "SingularFitWarning",
    "NotEstimableWarning",
    "__version__",
    *_LAZY,
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module = importlib.import_module(_LAZY[name])
        value = module if module.__name__ == f"evalmix.{name}" else getattr(module, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'evalmix' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
