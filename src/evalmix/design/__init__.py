"""evalmix.design: ICC, design effect and effective sample size."""

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

__all__ = [
    "DesignEffectResult",
    "FactorDesignEffect",
    "ICCResult",
    "deff_empirical",
    "deff_equal",
    "deff_unequal",
    "design_effect",
    "icc_anova",
]
