"""Every option vocabulary of the public API, in one leaf module.

Each option that takes one of a fixed set of words is typed by a ``Literal`` defined here
and nowhere else (as pyfixest keeps its ``estimation/internals/literals.py``), so a word
means one thing across the package and a new function reuses the set it needs. The
modules that accept an option check it with :func:`evalmix.errors.check_option` against
``typing.get_args`` of its ``Literal``; the glossary in ``docs/architecture.md`` gives the
one word per idea that the names below follow.

The module imports nothing from evalmix (it is a leaf of the import contracts).
"""

from __future__ import annotations

from typing import Literal

__all__ = [
    # the table
    "Kind", "OutcomeType", "TiePolicy", "ReadOutcomeType", "OutcomeKind", "Unmatched",
    "OrderDesign", "OnUnparsed", "LogFormat", "AlpacaFailures",
    # families
    "Family", "Regression",
    # design-based intervals
    "IntervalEstimand", "IntervalMethod", "CRType", "MultiwayCRType", "CIType", "WildWeights", "Scale",
    "Paired", "LeaderboardEstimand", "Adjust", "Crossed", "ControlledEstimand",
    # models
    "Backend", "FitBackend", "FitMethod", "Engine", "Sampler", "SensitivityMethod", "DfMethod",
    # generalizability theory
    "GStudyMethod", "FacetKind", "FacetRole", "Criterion",
    # judges against humans
    "AgreementMethod", "AgreementPairs", "AgreementWeights", "MeasurementLevel",
    "HumanTies", "Scoring", "PPIEstimand", "PPIMethod", "RatingKind",
    # planning
    "PowerEstimand", "PilotEstimand", "PilotDifference", "Alternative", "Distribution",
    "PlanEstimand", "JudgeRule",
]

# -- the table ---------------------------------------------------------------------------
#: scores (one outcome per row) or pairwise verdicts (model_a against model_b)
Kind = Literal["scores", "pairwise"]
#: what the outcome column holds once read
OutcomeType = Literal["binary", "proportion", "numeric"]
#: ``read(outcome_type=)``: an :data:`OutcomeType` or inferred from the values
ReadOutcomeType = Literal["auto", "binary", "proportion", "numeric"]
#: how a pairwise tie counts: dropped, half a win each, or its own outcome
TiePolicy = Literal["exclude", "half", "separate"]
#: how pairwise verdicts are written: A/B verdicts or the winner's name
OutcomeKind = Literal["auto", "verdict", "winner"]
#: what to do with AB/BA records that have no partner
Unmatched = Literal["error", "drop"]
#: whether both presentation orders were run for each pair
OrderDesign = Literal["auto", "matched", "single"]
#: what to do with verdicts that cannot be parsed
OnUnparsed = Literal["auto", "error", "drop"]
#: the eval-log formats :func:`evalmix.data.readers.read_log` knows
LogFormat = Literal["auto", "table", "inspect", "lm_eval", "alpaca_eval", "battles",
                    "arena_hard", "helm"]
#: what an AlpacaEval annotation that failed to parse counts as
AlpacaFailures = Literal["tie", "drop"]

# -- families ------------------------------------------------------------------------------
#: the outcome families of a model fit
Family = Literal["gaussian", "bernoulli", "binomial", "cumulative"]
#: the families of a least-squares or logistic regression of one outcome
Regression = Literal["gaussian", "binomial"]

# -- design-based intervals ---------------------------------------------------------------
#: one quantity of :func:`evalmix.interval`, each one coefficient of a linear or logit fit
IntervalEstimand = Literal["mean", "win_rate", "controlled_win_rate", "difference", "coef"]
#: the interval methods of :func:`evalmix.interval`
IntervalMethod = Literal["naive", "wilson", "clopper_pearson", "CR0", "CR1", "CR2", "CR3",
                         "bootstrap", "wild"]
#: the cluster-robust sandwich corrections
CRType = Literal["CR0", "CR1", "CR2", "CR3"]
#: the corrections a multiway (crossed) sandwich takes
MultiwayCRType = Literal["CR0", "CR1", "CR2"]
#: the intervals of the pairs cluster bootstrap
CIType = Literal["percentile", "expanded", "bca", "studentized"]
#: how a bootstrap of two crossed sampled factors resamples: the two-way (multiway)
#: variance or the pigeonhole (product) bootstrap
Crossed = Literal["multiway", "pigeonhole"]
#: the wild cluster bootstrap's weights (``auto``: Webb below 12 clusters)
WildWeights = Literal["auto", "rademacher", "webb"]
#: the scale an interval is set on before it is mapped back
Scale = Literal["auto", "identity", "logit"]
#: paired (within-unit) differences, unpaired, or decided from the design
Paired = bool | Literal["auto"]
#: the per-model quantity of a leaderboard
LeaderboardEstimand = Literal["auto", "mean", "win_rate", "bradley_terry"]
#: the multiplicity adjustment of a leaderboard's pairwise differences
Adjust = Literal["max-t", "bonferroni", "none"]
#: the report's length- or style-controlled estimand: decided from the table (auto),
#: AlpacaEval's length-controlled win rate, style-controlled Bradley-Terry, or none
ControlledEstimand = Literal["auto", "length", "style", "none"]

# -- models -------------------------------------------------------------------------------
#: the model back ends (which of them ``analyze`` runs)
Backend = Literal["bayes", "statsmodels"]
#: ``fit(backend=)`` by name: one back end (the words of ``ModelFit.backend`` and
#: ``analyze(methods=)``) or ``"statsmodels"``, the frequentist default for the outcome
FitBackend = Literal["bayes", "statsmodels", "mixedlm", "glmm_laplace", "glmm_vb", "glmm_map"]
#: the fitting method of the statsmodels back end
FitMethod = Literal["auto", "mixedlm", "laplace", "vb", "map"]
#: the Bayesian engine
Engine = Literal["auto", "kernel", "pymc", "bambi"]
#: the MCMC sampler
Sampler = Literal["auto", "nutpie", "pymc"]
#: how the prior-sensitivity fits are made
SensitivityMethod = Literal["auto", "psis", "refit"]
#: the degrees of freedom of a REML fit's fixed-effect intervals
DfMethod = Literal["containment", "none"]

# -- generalizability theory --------------------------------------------------------------
#: how a G study estimates its variance components
GStudyMethod = Literal["auto", "anova", "reml", "bayes"]
#: what a facet is in the design
FacetKind = Literal["sample", "judge", "repeat", "counterbalance", "fixed"]
#: where a variance component counts in a G coefficient
FacetRole = Literal["universe", "relative", "absolute", "excluded"]
#: what a D study optimises
Criterion = Literal["erho2", "phi", "se_score", "se_diff"]

# -- judges against humans ----------------------------------------------------------------
#: the intervals of an agreement coefficient
AgreementMethod = Literal["both", "delta", "bootstrap"]
#: which rater pairs an agreement table compares
AgreementPairs = Literal["auto", "all", "humans"]
#: the disagreement weights of a kappa
AgreementWeights = Literal["none", "linear", "quadratic"]
#: Krippendorff's level of measurement
MeasurementLevel = Literal["nominal", "ordinal", "interval"]
#: whether tied verdicts are kept as a category or dropped in agreement
HumanTies = Literal["keep", "exclude"]
#: how the alt-test scores a judge against the human panel
Scoring = Literal["auto", "accuracy", "neg_rmse"]
#: the human-anchored (PPI) quantities
PPIEstimand = Literal["mean", "win_rate", "difference"]
#: the standard error of a human-anchored estimate
PPIMethod = Literal["naive", "CR1", "CR2"]
#: what a rating is
RatingKind = Literal["verdict", "label", "score"]

# -- planning ------------------------------------------------------------------------------
#: the quantities of the closed-form power calculations
PowerEstimand = Literal["mean", "win_rate", "difference"]
#: the quantities of the pilot-based power simulations
PilotEstimand = Literal["mean", "win_rate", "controlled_win_rate", "difference"]
#: the quantities of the parametric power simulation from a pilot
PilotDifference = Literal["mean", "difference"]
#: the alternative hypothesis of a test or a power calculation (statsmodels' words)
Alternative = Literal["two-sided", "larger", "smaller"]
#: the reference distribution of a power calculation
Distribution = Literal["t", "normal"]
#: the estimands an analysis plan may declare primary (the report's contrasts)
PlanEstimand = Literal["mean", "win_rate", "controlled_win_rate", "difference"]
#: how an analysis plan pools the judges
JudgeRule = Literal["pooled", "per_judge", "sampled"]
