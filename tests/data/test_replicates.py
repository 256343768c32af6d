"""Replicates (repeated runs nested within the item): roles, pairing, design summary."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import evalmix
from evalmix.cli import main
from evalmix.data.summary import replicate_agreement
from evalmix.errors import EvalmixError, EvalmixWarning


def scores() -> pd.DataFrame:
    """2 models x 3 items x 3 epochs; per (model, item) the runs are
    x: 1,1,1 | 0,1,0 | 1,1,1   y: 0,0,0 | 1,1,0 | 0,1,1"""
    runs = {("x", "i1"): [1, 1, 1], ("x", "i2"): [0, 1, 0], ("x", "i3"): [1, 1, 1],
            ("y", "i1"): [0, 0, 0], ("y", "i2"): [1, 1, 0], ("y", "i3"): [0, 1, 1]}
    return pd.DataFrame([{"model": m, "item": i, "epoch": e + 1, "correct": v}
                         for (m, i), vs in runs.items() for e, v in enumerate(vs)])


def test_replicate_role_is_not_a_cluster_and_summary_reports_agreement():
    t = evalmix.read(scores(), outcome="correct", condition="model",
                     clusters={"item": "item"}, replicate="epoch")
    assert t.replicate == "epoch" and t.clusters == ("item",)
    assert sorted(t.data["replicate"].unique()) == ["1", "2", "3"]
    r = replicate_agreement(t)
    # 3 of the 6 cells have identical runs; within-cell SDs 0, .577, 0, 0, .577, .577
    sd = np.std([0, 1, 0], ddof=1)
    assert r == {"column": "epoch", "levels": 3, "cells": 6, "cells_with_replicates": 6,
                 "runs_per_cell_median": 3.0, "agreement": 0.5,
                 "within_sd": pytest.approx(3 * sd / 6)}
    s = t.describe()
    assert s.to_dict()["replicates"]["agreement"] == 0.5
    assert "Replicates (`epoch`, nested within the item): 3 runs" in s.to_markdown()
    assert "epoch" not in set(s.factors["factor"]) and s.relations.empty
    with pytest.raises(EvalmixError, match="cluster 'epoch' is not a cluster factor"):
        t.codes("epoch")
    # without a replicate role there is no replicate section
    plain = evalmix.read(scores(), outcome="correct", condition="model",
                         clusters={"item": "item", "epoch": "epoch"})
    assert replicate_agreement(plain) == {} and plain.describe().to_dict()["replicates"] == {}


def test_replicate_column_may_not_play_two_roles_and_roles_file(tmp_path):
    with pytest.raises(EvalmixError, match="column 'epoch' is given 2 roles"):
        evalmix.read(scores(), outcome="correct", condition="model",
                     clusters={"item": "item", "run": "epoch"}, replicate="epoch")
    roles = tmp_path / "roles.toml"
    roles.write_text('outcome = "correct"\ncondition = "model"\nreplicate = "epoch"\n'
                     '[clusters]\nitem = "item"\n')
    t = evalmix.read(scores(), roles=roles)
    assert t.replicate == "epoch" and t.roles.to_dict()["replicate"] == "epoch"


def test_pairwise_runs_without_replicate_warn_with_the_count_and_the_fix():
    df = evalmix.datasets.load("mtbench_repetition")
    kw = dict(outcome="outcome", model_a="model_a", model_b="model_b",
              first_shown="first_shown", clusters={"item": "item_id", "judge": "judge"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", evalmix.errors.DroppedRowsWarning)
        with pytest.warns(EvalmixWarning, match=r"^864 comparisons have several records "
                          r"in the same order \(5184 records\).*replicate="):
            grouped = evalmix.read(df, **kw)
        paired = evalmix.read(df, **kw, replicate="rep")
    # 24 questions x 4 models x 9 judges = 864 comparisons, 3 runs x 2 orders each
    assert grouped.pairs_read["comparisons"] == 864
    assert paired.pairs_read["comparisons"] == 2_592 and paired.replicate == "rep"
    r = paired.describe().replicates
    # agreement recomputed directly from the raw table (NA outcomes dropped): cells are
    # 864 comparisons x 2 orders, less those whose 3 runs were all NA
    raw = df.dropna(subset=["outcome"])
    cells = raw.groupby(["item_id", "model_b", "judge", "first_shown"])["outcome"]
    assert r["levels"] == 3 and r["cells"] == cells.ngroups and 1_700 < r["cells"] <= 1_728
    rep = cells.size() >= 2
    assert r["cells_with_replicates"] == int(rep.sum())
    assert r["agreement"] == pytest.approx(float((cells.nunique()[rep] == 1).mean()))


def test_cli_replicate_option(tmp_path):
    import json

    path = tmp_path / "s.csv"
    scores().to_csv(path, index=False)
    out = tmp_path / "rep"
    assert main(["report", str(path), "--outcome", "correct", "--condition", "model",
                 "--cluster", "item=item", "--replicate", "epoch", "--fast", "--reps", "50",
                 "--seed", "1", "--quiet", "--out", str(out)]) == 0
    design = json.loads((out / "design.json").read_text())
    assert design["roles"]["replicate"] == "epoch" and design["replicates"]["agreement"] == 0.5
