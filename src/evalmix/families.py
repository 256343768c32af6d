"""The one vocabulary of outcome families, shared by every layer.

========== ================================================ ==========================
family     outcome and link                                 where it is used
========== ================================================ ==========================
gaussian   numeric score, identity link (least squares)     models, design-based
                                                            regressions, planning
bernoulli  0/1 outcome, logit link                          models (chosen from data)
binomial   successes out of trials, or a fraction in        models, design-based
           [0, 1] (ties as 1/2), logit link                 logit regressions, planning
cumulative ordered categories, cumulative logit             models (``family="ordinal"``
                                                            or ``ties="separate"``)
========== ================================================ ==========================

The design-based estimators (:mod:`evalmix.inference`) and the planners
(:mod:`evalmix.plan`) take one of :data:`REGRESSION_FAMILIES`. Older spellings are
mapped by :func:`family_name`: ``"ordinal"`` (the everyday word for the cumulative
logit) is accepted as is; ``"linear"`` and ``"logit"`` (the design-based estimators'
names before there was one vocabulary) still work with a :class:`FutureWarning`.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import get_args

from evalmix.errors import InvalidOptionError
from evalmix.vocabulary import Family, Regression

__all__ = ["Family", "FAMILIES", "Regression", "REGRESSION_FAMILIES", "family_name"]

FAMILIES: tuple[str, ...] = get_args(Family)
#: the families of a least-squares or logistic regression of one outcome
REGRESSION_FAMILIES: tuple[str, ...] = get_args(Regression)
#: accepted spellings -> (family, whether the spelling is deprecated)
_ALIASES = {"ordinal": ("cumulative", False), "linear": ("gaussian", True),
            "logit": ("binomial", True)}


def family_name(value: object, allowed: Sequence[str] = FAMILIES) -> str:
    """The family ``value`` names, checked against ``allowed``.

    Raises :class:`~evalmix.errors.InvalidOptionError` naming the choices.

    Examples
    --------
    >>> family_name("ordinal")
    'cumulative'
    >>> family_name("gaussian", REGRESSION_FAMILIES)
    'gaussian'
    """
    name, deprecated = _ALIASES.get(value, (value, False)) if isinstance(value, str) \
        else (value, False)
    if name not in allowed:
        choices = ", ".join(repr(a) for a in allowed) + "".join(
            f" (or {k!r} for {v!r})" for k, (v, old) in _ALIASES.items()
            if v in allowed and not old)
        raise InvalidOptionError(f"family={value!r} is not allowed; choose one of {choices}")
    if deprecated:
        warnings.warn(f"family={value!r} is now spelled family={name!r} (one family "
                      "vocabulary across evalmix); the old name will be removed",
                      FutureWarning, stacklevel=3)
    return str(name)
