# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # A crossed judge audit with known truth: every interval family side by side
#
# Audits of conversational models in the PsycheEval style cross several factors: each
# *scenario* (a situation) is played with several *personas* (user profiles), the
# conversation is written by one of a few *authors* (scripts or generator models), and
# every output is rated by several LLM *judges*, pairwise against a reference answer, in
# both presentation orders. Rows are not independent along any of those factors.
#
# Real audits of this kind rarely come with the truth, so this one is simulated
# (`evalmix.sim.pairwise_judges`): crossed random effects for scenario, persona, author
# and judge, a judge-specific position bias, ties, and a treatment that truly improves
# on the control. Because the truth is known, we can see which intervals contain it.

# %%
import warnings

import numpy as np
import pandas as pd

import evalmix
from evalmix.sim import pairwise_judges

pd.set_option("display.width", 140)
pd.set_option("display.max_columns", 20)
pd.set_option("display.max_rows", 60)
pd.set_option("display.precision", 4)

sim = pairwise_judges(
    n_scenarios=24, n_personas=6, n_authors=3, n_judges=3, seed=7
)
sim.data.head()

# %% [markdown]
# `sim.data` has the columns a real log would have; `sim.table()` reads it with
# `evalmix.read` and the simulator's roles. 24 scenarios x 6 personas x 3 authors x
# 3 judges x 2 conditions x 2 orders = 5,184 judgments.

# %%
table = sim.table()
summary = table.describe()
summary.factors

# %% [markdown]
# Every factor is crossed with every other (each scenario meets each persona, author and
# judge), and every comparison was shown in both orders:

# %%
summary.relations

# %%
summary.pairs

# %% [markdown]
# ## The truth
#
# Two true values answer two different questions:
#
# * `given_authors_judges`: the treatment-minus-control difference in score for *these*
#   3 authors and 3 judges, averaged over the population of scenarios and personas.
#   This is what an interval that resamples scenarios and personas (but not authors or
#   judges) estimates.
# * `marginal`: the same difference averaged over the population of authors and judges
#   too: what a crossed random-effects model that integrates every factor out targets.

# %%
truth = {
    "given_authors_judges": sim.truth["given_authors_judges"][
        "difference_score"
    ],
    "marginal": sim.truth["marginal"]["difference_score"],
}
truth

# %% [markdown]
# ## Every interval family
#
# `evalmix.analyze` runs every estimand x method x cluster level: naive and Wilson rows,
# CR1/CR2/CR3 sandwiches clustered by each factor, two-way clustering over crossed pairs,
# the cluster and wild bootstraps, the Laplace GLMM and the Bayesian crossed GLMM. The
# MCMC is small here (300 draws per chain, 499 bootstrap replicates) to keep the
# documentation build fast; real analyses use the defaults.

# %%
with warnings.catch_warnings():
    # the warnings are collected in report.warnings
    warnings.simplefilter("ignore")
    report = evalmix.analyze(
        table, seed=1, draws=300, reps=499, progress=False
    )

cols = [
    "method",
    "cluster",
    "estimate",
    "lo",
    "hi",
    "df",
    "n_clusters",
    "decision",
]
diff = report.intervals.query("estimand == 'difference'")[cols].copy()
target = np.where(
    diff["cluster"] == "model",
    truth["marginal"],
    truth["given_authors_judges"],
)
diff["truth"] = target
diff["contains truth"] = (diff["lo"] <= target) & (target <= diff["hi"])
diff.reset_index(drop=True)

# %% [markdown]
# How to read the table:
#
# * `naive` treats the 5,184 judgments (2,592 pairs) as independent. It is the narrowest
#   row and the one a spreadsheet would give.
# * Clustering by **scenario** (24 clusters) widens it; clustering by **persona** (6)
#   or **author** / **judge** (3) widens it far more, partly because the degrees of
#   freedom collapse: with 3 clusters a t interval has 2 df.
# * Two-way rows (`scenario+persona`, ...) account for two crossed factors at once.
# * Rows with `decision` missing have no interval (a bootstrap with fewer than 5
#   clusters is refused rather than reported); unbounded wild-bootstrap rows with 3
#   clusters say honestly that 3 clusters cannot settle anything.
# * `model` rows come from the crossed GLMMs and target the marginal truth.

# %% [markdown]
# ## What the headline says, and why
#
# The headline puts, for each primary contrast, the naive interval next to the one
# evalmix recommends, and flags a contrast as *fragile* when reasonable rows disagree
# about whether it excludes the null:

# %%
report.headline[
    [
        "estimand",
        "contrast",
        "estimate",
        "naive_lo",
        "naive_hi",
        "method",
        "cluster",
        "lo",
        "hi",
        "width_ratio",
        "fragile",
        "message",
    ]
]

# %%
rec = report.recommendation
print(
    f"recommended: {rec['method']} clustered by {rec['cluster']!r} "
    f"({rec['n_clusters']} clusters)"
)
print("why:", rec["reason"])

# %% [markdown]
# The recommendation follows from the design, not from the results:
#
# * The **sampled** factors are the ones the claim generalises over. By default every
#   cluster role is sampled except judge-like and replicate roles: here scenario,
#   persona and author are samples of possible scenarios, personas and authors, while
#   the 3 judges are the instrument chosen for this audit (fixed). Declare otherwise
#   with `sampled=` (`--sampled` on the command line).
# * One sampled factor, or a nest of them, is clustered at its coarsest sampled level
#   with CR2 and Satterthwaite degrees of freedom; two or more **crossed** sampled
#   factors call for clustering over all of them at once (multiway), with a small-cluster
#   degrees-of-freedom correction. Few clusters get a warning, fewer than 2 a refusal.
#
# See [Which interval should I report?](../which-interval.html) for the full decision
# guide and the coverage evidence behind each rule.

# %%
for w in report.warnings:
    print("-", w)

# %% [markdown]
# ## Why the rows disagree: where the variance is
#
# The variance components of the two model back ends show which factors carry the
# clustering. A factor with 3 levels has a barely identified variance (wide interval),
# which is why the Bayesian back end also reports a prior-sensitivity refit.

# %%
report.variance[["factor", "backend", "sd", "sd_lo", "sd_hi", "share"]]

# %%
report.prior_sensitivity  # None when every factor has 5 or more levels

# %% [markdown]
# ## What to write
#
# > Judgments are crossed over 24 scenarios, 6 personas, 3 authors and 3 LLM judges and
# > were collected in both presentation orders. We report the treatment-minus-control
# > difference in pairwise score with a 95% cluster-robust interval over the sampled
# > factors (method and clusters as recommended by evalmix, with Satterthwaite / small-
# > cluster degrees of freedom), treating the judges as fixed; naive, one-way, bootstrap
# > and crossed random-effects intervals are reported as sensitivity analyses
# > (supplementary table).
#
# And say which truth the interval is about: these judges and authors, or judges and
# authors in general. With 3 judges, a claim about judges in general is only as strong
# as the judge-clustered rows above, which is to say weak.
