"""evalmix.design: ICC, design effect, effective sample size and G coefficients."""

from evalmix.design.effect import (
    DesignEffectResult,
    FactorDesignEffect,
    ICCResult,
    deff_empirical,
    deff_equal,
    deff_unequal,
    design_effect,
    icc_anova,
)
from evalmix.design.gresult import GStudyResult
from evalmix.design.gtheory import GDesign, coefficients

__all__ = [
    "DesignEffectResult",
    "FactorDesignEffect",
    "ICCResult",
    "deff_empirical",
    "deff_equal",
    "deff_unequal",
    "design_effect",
    "icc_anova",
    "GDesign",
    "GStudyResult",
    "coefficients",
]
