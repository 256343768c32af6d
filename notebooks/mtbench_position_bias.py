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
# # MT-Bench: position bias by judge, and what AB/BA swapping buys
#
# LLM judges shown two answers often prefer one *position* regardless of content. The
# *Judging the Judges* study (Shi et al. 2024,
# [arXiv:2406.07791](https://doi.org/10.48550/arXiv.2406.07791)) showed every MT-Bench
# comparison to each judge in both orders (AB and BA). That data ships with evalmix as
# `evalmix.datasets.load("mtbench_position_bias")`: 80 questions in 8 categories, 30
# models each compared with vicuna-13b-v1.3, 3 judges (gemini-pro, gpt-3.5-turbo-1106,
# gpt-4-0613), both orders: 14,400 judgments.
#
# Three questions a user of these judges should ask:
#
# 1. How strongly does each judge prefer one position, with an honest interval?
# 2. What would a win rate have been had the comparisons been shown in one order only?
# 3. Which interval should go into the paper?

# %%
import warnings

import pandas as pd

import evalmix
import evalmix.datasets

pd.set_option("display.width", 120)
pd.set_option("display.max_columns", 20)
pd.set_option("display.precision", 4)

table = evalmix.datasets.load_table("mtbench_position_bias")
summary = table.describe()
summary.factors

# %%
summary.relations

# %% [markdown]
# `load_table` reads the data set with its default roles (pairwise verdicts,
# `first_shown` for the order, clusters `item`, `item_group` (a stratum) and `judge`); the 32
# unparsable verdicts are dropped and counted. Every comparison appears in both orders,
# so `read` matched each AB record with its BA partner (`pair_id`).

# %% [markdown]
# ## 1. Position bias by judge
#
# On a pairwise table the `position` coefficient of `evalmix.interval(..., "coef")` is
# the advantage model_a gets from being shown first, on the probability scale: the
# regression `y ~ 1 + model dummies + (a_first - 1/2)`. 0 means no position preference;
# a negative value means the judge favours the answer shown *second*. The interval is
# CR2 clustered by question: the 60 judgments of one question by one judge share that
# question's difficulty, so they are one cluster, not 60 independent observations.

# %%
judge_col = table.data["judge"]
rows = []
for judge in table.levels("judge"):
    one_judge = table.subset((judge_col == judge).to_numpy())
    res = evalmix.interval(
        one_judge, "coef", term="position", method="CR2", cluster="item"
    )
    rows.append(res.tidy().assign(judge=judge))
position = pd.concat(rows, ignore_index=True)
position[["judge", "estimate", "lo", "hi", "df", "n_clusters", "n_obs"]]

# %%
strongest = position.loc[position["estimate"].abs().idxmax()]
print(
    f"{strongest.judge}: shown first, an answer's chance of winning changes by "
    f"{strongest.estimate:+.3f} [{strongest.lo:+.3f}, {strongest.hi:+.3f}]"
)
excludes_zero = position[(position["lo"] > 0) | (position["hi"] < 0)][
    "judge"
].tolist()
print("intervals that exclude 0 (a position preference):", excludes_zero)

# %% [markdown]
# The judges differ a lot: these three judges are the ones the study chose, not a sample
# of judges, so their position biases are reported one by one (judge is a *fixed*
# factor), not averaged into a "typical judge".

# %% [markdown]
# ## 2. What AB/BA swapping buys
#
# Take one comparison, gpt-4 against vicuna-13b-v1.3, and compute gpt-4's win rate three
# ways: from both orders (what the study did), and from each single order alone (what a
# benchmark that shows every pair once, always in the same order, would report).

# %%
model_b = table.data["model_b"]
gpt4 = table.subset((model_b == "gpt-4").to_numpy())
a_first = gpt4.data["a_first"]


def gpt4_win_rate(t, method="CR2", cluster="item"):
    """gpt-4's win rate against vicuna-13b-v1.3 on table ``t``."""
    return evalmix.interval(
        t, "win_rate", model="gpt-4", method=method, cluster=cluster
    )


designs = {
    "both orders (AB/BA)": gpt4,
    "gpt-4 always shown first": gpt4.subset((a_first == 0).to_numpy()),
    "gpt-4 always shown second": gpt4.subset((a_first == 1).to_numpy()),
}
orders = pd.concat(
    [gpt4_win_rate(t).tidy() for t in designs.values()], ignore_index=True
)
orders.insert(0, "design", list(designs))
orders[["design", "estimate", "lo", "hi", "n_obs"]]

# %%
swing = orders["estimate"].max() - orders["estimate"].min()
print(f"the two single-order designs differ by {swing:.3f}")

# %% [markdown]
# With one order only, the win rate carries the judges' position bias: the two
# single-order designs disagree by the swing printed above; compare it with the
# half-width of either interval. No interval method repairs that: the bias is in the estimate,
# not in its standard error. Showing both orders cancels it, because each comparison
# contributes once with each model first.
#
# The *controlled win rate* makes that explicit: it regresses the verdict on the order
# and reports the intercept `(p_AB + p_BA) / 2`, using complete AB/BA pairs only. On a
# perfectly balanced design like this one it equals the plain win rate; on a design
# where some comparisons lost their partner (an unparsable verdict, a failed API call)
# it still cancels the bias, while the plain win rate does not.

# %%
plain = gpt4_win_rate(gpt4)
with warnings.catch_warnings():
    warnings.simplefilter("ignore", evalmix.DroppedRowsWarning)
    controlled = evalmix.interval(
        gpt4,
        "controlled_win_rate",
        model="gpt-4",
        method="CR2",
        cluster="item",
    )
print(plain)
print(controlled)

# %% [markdown]
# ## 3. Which cluster level?
#
# Judgments cluster by question (a hard question is hard for every judge and both
# orders), questions by category. The design effect says how much each level inflates
# the variance of a mean compared with independent rows:

# %%
deff = evalmix.design_effect(gpt4).tidy()
deff[["cluster", "n_clusters", "mean_size", "icc", "deff", "n_eff"]]

# %% [markdown]
# and the interval for gpt-4's win rate at each level, next to the naive one:

# %%
levels = {
    "naive (rows independent)": ("naive", None),
    "CR2 by question": ("CR2", "item"),
    "CR2 by category (8 clusters)": ("CR2", "item_group"),
}
by_level = pd.concat(
    [gpt4_win_rate(gpt4, m, c).tidy() for m, c in levels.values()],
    ignore_index=True,
)
by_level.insert(0, "interval", list(levels))
width = by_level["hi"] - by_level["lo"]
by_level["width / naive"] = width / width.iloc[0]
by_level[
    [
        "interval",
        "estimate",
        "se",
        "lo",
        "hi",
        "df",
        "n_clusters",
        "width / naive",
    ]
]

# %% [markdown]
# Which row to report depends on what the claim generalises over, not on which row looks
# best:
#
# * **Over questions only** ("on MT-Bench's 8 categories, gpt-4 beats vicuna-13b"): the
#   categories are fixed strata of the benchmark's definition, the questions are the
#   sample. Cluster by question (80 clusters).
# * **Over questions and categories** ("on chat questions like these"): the categories
#   were sampled too, and a nest is clustered at its coarsest sampled level, by category.
#   With 8 clusters CR2's Satterthwaite degrees of freedom drop to about 7 (`df` above)
#   and the t quantile widens the interval: the honest price of few clusters, flagged
#   with a `FewClustersWarning`.
#
# `load_table` declares the categories a *stratum* (chosen, not sampled), so
# `evalmix.analyze` recommends the question level here, the first claim; declaring them
# sampled (`strata=[]` in Python, `--strata ''` on the command line) states the second
# instead. [Which interval should I report?](../which-interval.html) has the rules and
# the coverage evidence behind them.
#
# ## What to write
#
# > Each comparison was judged in both presentation orders (AB and BA) by three LLM
# > judges; we report win rates over both orders with 95% CR2 cluster-robust intervals
# > clustered by question (80 clusters; Satterthwaite degrees of freedom; evalmix), and
# > position bias per judge as the first-shown advantage with the same intervals.
#
# (Replace "question (80 clusters)" by "category (8 clusters)" if the claim is meant to
# carry to other categories.) For the full analysis, every method and cluster level side
# by side with the crossed random-effects model and the report files, run
# `evalmix.analyze(table)` or `evalmix report` on the command line
# ([the report](../report.html)).
