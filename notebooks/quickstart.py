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
# # Quickstart: read a pairwise judge table and describe its design
#
# This notebook is a plain-text [jupytext](https://jupytext.readthedocs.io) percent
# script (`notebooks/quickstart.py`); the documentation build executes it, so every
# output below was produced by the current version of evalmix. Open it in Jupyter
# with `jupytext --to notebook notebooks/quickstart.py`, or run it as a script.
#
# **The data.** *Judging the Judges* (Shi et al. 2024,
# [arXiv:2406.07791](https://doi.org/10.48550/arXiv.2406.07791)), MT-Bench part:
# 80 questions, 30 models each compared with vicuna-13b-v1.3 by 3 LLM judges, every
# comparison shown in both presentation orders. It ships with evalmix
# (`evalmix.datasets`, MIT licence), so this runs anywhere evalmix is installed.

# %%
import tempfile
import warnings
from pathlib import Path

import pandas as pd

import evalmix
import evalmix.datasets

pd.set_option("display.width", 120)
pd.set_option("display.max_columns", 20)

raw = evalmix.datasets.load("mtbench_position_bias")
raw.head()

# %% [markdown]
# One row per judgment: the question (`item_id`, inside a category `item_group`), the two
# models, the judge, whose answer was shown first (`first_shown`) and the verdict
# (`outcome`: `a`, `b`, `tie`, or missing when the judge's reply could not be parsed).
# That is the long format evalmix reads. Your own logs only need to be reshaped to
# it: one row per score or judgment, one column per thing that can cluster the rows.

# %% [markdown]
# ## Read: map columns to roles
#
# `evalmix.read` takes a file path (CSV, Parquet, JSON Lines) or a DataFrame, checks it
# once and returns an immutable `EvalTable`. Roles say which column means what: the
# verdict, the two models, the presentation order, and the *cluster factors* (free role
# names on the left, your column names on the right). Rows with a missing verdict are
# dropped, counted, and a `DroppedRowsWarning` says so.

# %%
table = evalmix.read(
    raw,
    outcome="outcome",
    model_a="model_a",
    model_b="model_b",
    first_shown="first_shown",
    clusters={"item": "item_id", "category": "item_group", "judge": "judge"},
    ties="half",
)
table

# %% [markdown]
# `evalmix.datasets.load_table("mtbench_position_bias")` does the same with the data
# set's default roles (the category role is called `item_group` there).

# %% [markdown]
# ## Describe: what does the design look like?
#
# `describe()` returns a `DesignSummary`: rows read and used, dropped rows by reason,
# levels and cluster sizes per factor, which factors are crossed or nested, and the AB/BA
# balance. Printing it gives Markdown.

# %%
summary = table.describe()
print(summary)

# %%
summary.factors

# %% [markdown]
# The relations decide which interval is right (see
# [Which interval should I report?](../which-interval.html)): items are nested in
# categories, and both are crossed with judges.

# %%
summary.relations

# %%
summary.pairs

# %% [markdown]
# ## The canonical frame
#
# `y` is 1 when model_a (here vicuna-13b-v1.3) wins, 0 when model_b wins and 0.5 for a
# tie under `ties="half"`; `pair_id` links the AB and BA records of one comparison;
# `a_first` says whether model_a's answer was shown first. `table.data` is a fresh
# copy-on-write view: changing it never changes the table.

# %%
table.data.head()

# %% [markdown]
# ## Other tie policies, and roles from a file
#
# `ties="exclude"` drops ties (counted), `"separate"` keeps them as a third verdict with
# `y` the strict win of model_a. The same roles can live in a TOML file
# (`docs/examples/roles.toml` in the source tree); keyword arguments override it.

# %%
roles_toml = """
outcome = "outcome"
model_a = "model_a"
model_b = "model_b"
first_shown = "first_shown"
ties = "half"

[clusters]
item = "item_id"
category = "item_group"
judge = "judge"
"""
roles_file = Path(tempfile.mkdtemp()) / "roles.toml"
roles_file.write_text(roles_toml)

with warnings.catch_warnings():
    # the 32 dropped NA verdicts, already reported above
    warnings.simplefilter("ignore")
    excluded = evalmix.read(raw, roles=roles_file, ties="exclude")
dict(excluded.dropped), excluded.n_obs

# %% [markdown]
# ## One interval
#
# gpt-4's win rate against vicuna-13b-v1.3, CR2 clustered by question: the 6 judgments
# of one question (3 judges x 2 orders) are not 6 independent pieces of evidence.

# %%
gpt4 = table.subset((table.data["model_b"] == "gpt-4").to_numpy())
naive = evalmix.interval(gpt4, "win_rate", model="gpt-4", method="naive")
cr2 = evalmix.interval(
    gpt4, "win_rate", model="gpt-4", method="CR2", cluster="item"
)
print(naive)
print(cr2)
print(
    "clustering by question widens the interval "
    f"{(cr2.hi - cr2.lo) / (naive.hi - naive.lo):.2f}x"
)

# %% [markdown]
# Next: the [MT-Bench case study](mtbench_position_bias.html) (position bias by judge and
# what AB/BA swapping buys), or [Getting started](../getting-started.html) for the full
# analysis and the report.
