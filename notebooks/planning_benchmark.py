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
# # Planning a benchmark: how many questions, judgments and judges?
#
# An eval's precision grows with the number of independent **clusters** (questions,
# scenarios, passages), not with the number of rows. This notebook plans a pairwise
# judge benchmark from a pilot:
#
# 1. measure the clustering in a pilot (`evalmix.design_effect`);
# 2. turn it into power, minimum detectable effect and the number of questions needed
#    (`evalmix.power`, `evalmix.mde`, `evalmix.n_clusters_for_power`);
# 3. decide between more questions and more judgments per question, and see what a
#    handful of judges does to a claim about judges in general;
# 4. check the analytic answer against a simulation with known truth.
#
# The formulas and their validation are in [Planning](../planning.html).

# %%
import warnings

import numpy as np
import pandas as pd

import evalmix
import evalmix.datasets
from evalmix.sim import clustered_scores

pd.set_option("display.width", 120)
pd.set_option("display.precision", 4)

# %% [markdown]
# ## 1. The pilot: how clustered are the judgments?
#
# As the pilot we take one comparison from the bundled MT-Bench data (gpt-4 against
# vicuna-13b-v1.3): 80 questions, each judged by 3 judges in 2 orders, so 6 judgments per
# question. The ICC is the share of the verdicts' variance that is shared within a
# question; the design effect `DEFF = 1 + (m - 1) ICC` is how much that inflates the
# variance of a win rate over `m` judgments per question.

# %%
with warnings.catch_warnings():
    warnings.simplefilter("ignore", evalmix.DroppedRowsWarning)
    table = evalmix.datasets.load_table("mtbench_position_bias")
pilot = table.subset((table.data["model_b"] == "gpt-4").to_numpy())
deff = evalmix.design_effect(pilot).tidy()
deff[
    [
        "cluster",
        "n_clusters",
        "mean_size",
        "icc",
        "icc_lo",
        "icc_hi",
        "deff",
        "n_eff",
    ]
]

# %%
by_item = deff.set_index("cluster").loc["item"]
icc, m = float(by_item["icc"]), int(by_item["mean_size"])
print(
    f"question ICC {icc:.3f} "
    f"(95% CI {by_item['icc_lo']:.3f}-{by_item['icc_hi']:.3f}), "
    f"{m} judgments per question: DEFF {by_item['deff']:.2f}, so the "
    f"{int(by_item['n_obs'])} judgments carry the information of about "
    f"{by_item['n_eff']:.0f} independent ones"
)

# %% [markdown]
# The ICC's interval is wide: a pilot of 80 questions pins it down only roughly, so plan
# with its upper end as well as its estimate.

# %% [markdown]
# ## 2. Power for a win rate of 0.55
#
# Suppose the new benchmark must detect a model that wins 55% of comparisons against a
# baseline (effect 0.05 over 0.5) with a two-sided 5% test. `evalmix.power` gives the
# power of the cluster-robust t test with `K - 1` degrees of freedom; arguments
# broadcast, so an array of question counts gives a curve.

# %%
n_questions = np.array([40, 80, 160, 320, 640])
curve = evalmix.power(
    0.05, n_clusters=n_questions, cluster_size=m, icc=icc, estimand="win_rate"
)
curve.tidy()[["n_clusters", "cluster_size", "icc", "deff", "se", "power"]]

# %%
need = evalmix.n_clusters_for_power(
    0.8, effect=0.05, cluster_size=m, icc=icc, estimand="win_rate"
)
need_hi = evalmix.n_clusters_for_power(
    0.8,
    effect=0.05,
    cluster_size=m,
    icc=float(by_item["icc_hi"]),
    estimand="win_rate",
)
mde80 = evalmix.mde(
    0.8, n_clusters=80, cluster_size=m, icc=icc, estimand="win_rate"
)
print(
    f"questions for 80% power: {float(need.n_clusters):.0f} at the pilot ICC, "
    f"{float(need_hi.n_clusters):.0f} at its upper 95% limit"
)
print(
    f"with MT-Bench's 80 questions the minimum detectable win rate is "
    f"{0.5 + float(mde80.mde):.3f}"
)

# %% [markdown]
# ## 3. More questions, or more judgments per question?
#
# Each extra judgment of the same question adds less than the last, because it shares
# that question's difficulty. The number of questions needed for 80% power, by judgments
# per question:

# %%
sizes = np.array([1, 2, 4, 6, 12, 24])
per_size = evalmix.n_clusters_for_power(
    0.8, effect=0.05, cluster_size=sizes, icc=icc, estimand="win_rate"
).tidy()
per_size["judgments"] = per_size["n_clusters"] * per_size["cluster_size"]
per_size[["cluster_size", "n_clusters", "judgments", "deff"]]

# %% [markdown]
# Past about `1 / ICC` judgments per question (here about 8), each doubling of the
# judgments per question saves only a few questions, while the total number of judgments
# keeps growing. Write new questions rather than judging the same ones more often.
#
# ## Judges: a fixed panel, or a sample of judges?
#
# If the claim is about *these* judges (judge a fixed factor), judges cost nothing in
# the plan above. If the claim is about LLM judges in general, the judges are a sample
# and their variance does not shrink with more questions: `crossed=` adds a factor whose
# number of levels stays fixed. With the pilot's judge ICC and 3 judges:

# %%
icc_judge = float(deff.set_index("cluster").loc["judge", "icc"])
judges = pd.DataFrame(
    [
        {
            "judges": k,
            "questions for 80% power": float(
                evalmix.n_clusters_for_power(
                    0.8,
                    effect=0.05,
                    cluster_size=m,
                    icc=icc,
                    estimand="win_rate",
                    crossed={"judge": (icc_judge, k)},
                ).n_clusters
            ),
        }
        for k in (3, 10, 30, 100, 300)
    ]
)
print(f"judge ICC in the pilot: {icc_judge:.3f}")
judges

# %% [markdown]
# `NaN` means no number of questions reaches 80% power: with a handful of judges carrying
# that much variance, a claim about judges in general cannot be supported by adding
# questions; it needs more judges. (The judge ICC from 3 judges is itself very uncertain;
# see its interval in the table of section 1.)
#
# ## 4. Check: simulate the plan
#
# The analytic power is exact for normal cluster means and an approximation for 0/1
# verdicts. A quick check with known truth: draw beta-binomial data with the planned
# design (`evalmix.sim.clustered_scores`: true win rate 0.55, the pilot's ICC), read it,
# and count how often the CR1 interval of `evalmix.interval` excludes 0.5. 400
# replications keep this notebook fast; the Monte Carlo SE is printed with the result.

# %%
K = int(np.ceil(float(need.n_clusters)))
reps = 400
rejections = 0
for r in range(reps):
    sim = clustered_scores(K, m, p=0.55, icc=icc, seed=1000 + r)
    t = evalmix.read(sim.data, outcome="y", clusters={"question": "cluster"})
    res = evalmix.interval(
        t, "mean", method="CR1", cluster="question", null=0.5
    )
    rejections += (res.lo > 0.5) or (res.hi < 0.5)
simulated = rejections / reps
analytic = float(
    evalmix.power(
        0.05,
        n_clusters=K,
        cluster_size=m,
        icc=icc,
        sd=np.sqrt(0.55 * 0.45),
        null=0.5,
    ).power
)
mcse = np.sqrt(analytic * (1 - analytic) / reps)
print(
    f"K = {K} questions x {m} judgments: analytic power {analytic:.3f}, "
    f"simulated {simulated:.3f} (Monte Carlo SE {mcse:.3f}, "
    f"difference {(simulated - analytic) / mcse:+.1f} SE)"
)

# %% [markdown]
# ## What to write
#
# > The benchmark has *K* questions with *m* judgments each. From a pilot (ICC *x*,
# > design effect *d*), *K* questions give 80% power to detect a win rate of 0.55 with
# > the cluster-robust t test (evalmix `n_clusters_for_power`, Kish design effect); the
# > power was checked by simulation.
#
# Planning from a fitted crossed model instead of one ICC, and coverage studies of the
# interval methods on a design like yours: [Planning](../planning.html)
# (`evalmix.plan.parametric_power`, `evalmix.plan.coverage`).
