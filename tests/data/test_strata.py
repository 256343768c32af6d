"""Strata: groupings chosen, not sampled (benchmark subsets, categories).

A stratum is held fixed: never sampled by default, never the recommended cluster unit
(the interval clusters within it). Log readers declare their format's strata; the user
overrides them with ``sampled=`` / ``strata=`` (``--sampled`` / ``--strata``), and the
report's opening sentence says which roles were used and how to change them.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import FIXTURES
from test_readers import inspect_logs  # noqa: F401  (a fixture: Inspect logs of two models)

import evalmix
from evalmix.compare.recommend import recommend_cluster
from evalmix.data.readers import read_log
from evalmix.errors import EvalmixError

LOGS = FIXTURES / "logs"
UP = FIXTURES / "upstream"


def _arena_hard_two_categories(tmp: Path) -> Path:
    """The arena-hard judgment fixture with its questions in two categories."""
    folder = tmp / "model_judgment" / "gpt-4-1106-preview"
    folder.mkdir(parents=True)
    for f in (UP / "arena_hard" / "model_judgment").rglob("*.jsonl"):
        lines = [json.loads(x) for x in f.read_text().splitlines() if x.strip()]
        for r in lines:
            r["category"] = "hard" if int(r["uid"]) % 2 else "creative"
        (folder / f.name).write_text("\n".join(json.dumps(r) for r in lines) + "\n")
    return folder


def _subsets_table(**kw):
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({"item": np.repeat([f"q{i}" for i in range(12)], 2),
                          "subset": np.repeat(["s1", "s2", "s3"], 8),
                          "model": np.tile(["m1", "m2"], 12),
                          "judge": np.tile(["j1", "j1", "j2", "j2"], 6)})
    frame["correct"] = rng.integers(0, 2, len(frame))
    return evalmix.read(frame, outcome="correct", condition="model",
                        clusters={"item": "item", "subset": "subset", "judge": "judge"}, **kw)


def test_a_stratum_is_fixed_and_never_the_recommended_cluster():
    t = _subsets_table()
    # without strata, the subset is sampled and, items being nested in it, recommended
    assert t.sampled == ("item", "subset") and recommend_cluster(t).cluster == ("subset",)
    s = _subsets_table(strata=["subset"])
    assert s.strata == ("subset",) and s.sampled == ("item",)
    assert s.fixed == ("subset", "judge")
    rec = recommend_cluster(s)
    assert rec.cluster == ("item",) and rec.strata == ("subset",) and rec.fixed == ("judge",)
    assert "subset is a stratum" in rec.sentence() and "--strata" in rec.sentence()
    assert "never by it" in rec.reason
    # the same through recommend_cluster's own options, and a role is one or the other
    assert recommend_cluster(t, strata=["subset"]) == rec
    with pytest.raises(EvalmixError, match="both sampled and a stratum"):
        t.with_sampled(["subset"], strata=["subset"])
    with pytest.raises(EvalmixError, match="not a cluster factor"):
        t.with_sampled(strata=["category"])


def test_sampled_overrides_a_stratum_and_strata_replace_the_declared_ones():
    s = _subsets_table(strata=["subset"])
    # naming a stratum sampled makes it an ordinary sampled role
    u = s.with_sampled(["subset"])
    assert u.sampled == ("subset",) and u.strata == ()
    # strata= replaces the declared strata; [] declares none (the default rule again)
    assert s.with_sampled(strata=[]).sampled == ("item", "subset")
    # a stratum named later leaves an explicit sampled list without it
    v = _subsets_table(sampled=["item", "subset"]).with_sampled(strata="subset")
    assert v.sampled == ("item",) and v.strata == ("subset",)
    # interaction cells with a stratum part are not sampled
    c = evalmix.read(s.frame().assign(cellcol=1), outcome="y", condition="condition",
                     clusters={"item": "item", "subset": "subset", "cell": "item:subset"},
                     strata=["subset"])
    assert c.sampled == ("item",)
    # kept through subset(), pickling and the roles' dict
    import pickle

    assert pickle.loads(pickle.dumps(s)).strata == ("subset",)
    assert s.subset(np.arange(s.n_obs) < 10).strata == ("subset",)
    assert s.roles.to_dict()["strata"] == ["subset"]


def test_roles_file_takes_strata(tmp_path):
    s = _subsets_table()
    path = tmp_path / "data.csv"
    s.frame().to_csv(path, index=False)
    roles = tmp_path / "roles.toml"
    roles.write_text('outcome = "y"\ncondition = "condition"\nstrata = ["subset"]\n'
                     '[clusters]\nitem = "item"\nsubset = "subset"\n')
    assert evalmix.read(path, roles=roles).strata == ("subset",)
    roles.write_text('outcome = "y"\nstrata = "subset"\n')
    with pytest.raises(EvalmixError, match="strata must be a list of cluster role names"):
        evalmix.read(path, roles=roles)


# ------------------------------------------------------------------ reader defaults
def _quiet_read(path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return read_log(path, **kw)


def test_alpaca_eval_subsets_are_strata_by_default():
    t = _quiet_read(LOGS / "alpaca_eval" / "results")
    assert t.strata == ("item_group",) and t.sampled == ("item",) and t.fixed == (
        "item_group", "judge")
    assert recommend_cluster(t).cluster == ("item",)
    # the user's sampled= wins over the reader's strata; strata=[] removes them
    assert _quiet_read(LOGS / "alpaca_eval" / "results",
                       sampled=["item_group"]).strata == ()
    t0 = _quiet_read(LOGS / "alpaca_eval" / "results", strata=[])
    assert t0.sampled == ("item", "item_group") and recommend_cluster(t0).cluster == (
        "item_group",)


def test_lm_eval_tasks_are_strata(tmp_path):
    import shutil

    folder = tmp_path / "org__model-x"
    shutil.copytree(LOGS / "lm_eval" / "org__model-x", folder)
    one = next(folder.glob("samples_mmlu_mini_*.jsonl"))
    # another task (not a byte-for-byte copy, which the reader would count once)
    (folder / one.name.replace("mmlu_mini", "mmlu_other")).write_text(
        one.read_text().replace("Find", "Compute"))
    t = _quiet_read(folder, metric="acc")
    assert t.strata == ("task",) and t.sampled == ("item",) and t.n_levels("task") == 2
    assert recommend_cluster(t).cluster == ("item",)


def test_mt_bench_and_arena_hard_categories_are_strata(tmp_path):
    t = _quiet_read(UP / "fastchat" / "gpt-4_pair.jsonl")
    assert t.strata == ("category",) and t.n_levels("category") == 8
    assert t.sampled == ("item",) and recommend_cluster(t).cluster == ("item",)
    assert "category is a stratum" in recommend_cluster(t).sentence()
    # arena-hard judgments with two categories (the fixture has one: no stratum role)
    assert "category" not in _quiet_read(UP / "arena_hard" / "model_judgment").clusters
    folder = _arena_hard_two_categories(tmp_path)
    a = _quiet_read(folder)
    assert a.strata == ("category",) and a.n_levels("category") == 2
    assert recommend_cluster(a).cluster == ("item",)
    assert recommend_cluster(a, strata=[]).cluster == ("category",)


def test_inspect_tasks_are_strata(request):
    root, _ = request.getfixturevalue("inspect_logs")
    t = _quiet_read(root, scorer="grade", clusters={"subject": "metadata.subject"},
                    strata=["subject"])
    assert t.strata == ("subject",) and t.sampled == ("item",)


# ------------------------------------------------------------------ every reader, CLI
def _table_csv(tmp: Path) -> tuple[str, list[str]]:
    path = tmp / "scores.csv"
    _subsets_table().frame().to_csv(path, index=False)
    return str(path), ["--outcome", "y", "--condition", "condition", "--cluster",
                       "item=item", "--cluster", "subset=subset"]


READERS = {
    # reader: (source, extra options, default cluster, --sampled, cluster, --strata, cluster)
    "table": (None, [], "subset", "item", "item", "subset", "item"),
    "alpaca_eval": (LOGS / "alpaca_eval" / "results", [], "item", "item_group",
                    "item_group", "", "item_group"),
    "lm_eval": (LOGS / "lm_eval", ["--read-option", "metric=acc", "--cluster",
                                   "subject=doc.subject"],
                "subject", "item", "item", "subject", "item"),
    "battles": (LOGS / "battles" / "gpt-4_pair.jsonl", [], "question", "item", "item",
                "question", "item"),
    "arena_hard": (None, [], "item", "category", "category", "", "category"),
    "inspect": (None, ["--read-option", "scorer=grade", "--cluster",
                       "subject=metadata.subject"], "subject", "item", "item", "subject",
                "item"),
    "helm": (None, ["--read-option", "metric=exact_match"], "item", "scenario", "scenario",
             "", "scenario"),
}


def _helm_two_scenarios(tmp: Path) -> Path:
    """Three HELM BBQ runs (tests/fixtures/helm) split into two scenarios by instance."""
    out = tmp / "helm"
    for run in sorted((FIXTURES / "helm").iterdir())[:3]:
        if not run.is_dir():
            continue
        stats = json.loads((run / "per_instance_stats.json").read_text())
        spec = json.loads((run / "run_spec.json").read_text())
        for part in (0, 1):
            folder = out / f"{run.name}_{part}"
            folder.mkdir(parents=True)
            name = spec["name"].replace("bbq:", f"bbq:part={part},")
            (folder / "run_spec.json").write_text(json.dumps({**spec, "name": name}))
            (folder / "per_instance_stats.json").write_text(
                json.dumps(stats[part * 50:(part + 1) * 50]))
    return out


def _report(main, tmp: Path, name: str, data: str, extra: list[str]) -> dict:
    out = tmp / name
    code = main(["report", data, *extra, "--fast", "--reps", "20", "--seed", "1",
                 "--quiet", "--cluster-levels", "none", "--out", str(out)])
    assert code == 0
    design = json.loads((out / "design.json").read_text())
    statement = design["recommendation"]["statement"]
    assert statement in " ".join((out / "report.md").read_text().split())
    return design["recommendation"]


def test_every_input_format_is_in_the_options_test():
    from evalmix.data.readers import FORMATS

    assert set(READERS) == set(FORMATS) - {"auto"}


@pytest.mark.parametrize("reader", sorted(READERS))
def test_sampled_and_strata_change_the_report_for_every_reader(reader, tmp_path, request,
                                                                capsys, monkeypatch):
    from evalmix.cli import main
    from evalmix.report import figures as plots
    from evalmix.report import render

    for module in (plots, render):  # the text is checked, the figures are not drawn
        monkeypatch.setattr(module, "figure_list", lambda rep: [])

    source, extra, default, sampled, s_cluster, strata, t_cluster = READERS[reader]
    if reader == "table":
        data, extra = _table_csv(tmp_path)
    elif reader == "inspect":
        root, _ = request.getfixturevalue("inspect_logs")
        data = str(root)
    elif reader == "arena_hard":
        data = str(_arena_hard_two_categories(tmp_path))
    elif reader == "helm":
        data = str(_helm_two_scenarios(tmp_path))
    else:
        data = str(source)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        base = _report(main, tmp_path, "default", data, extra)
        samp = _report(main, tmp_path, "sampled", data, [*extra, "--sampled", sampled])
        strat = _report(main, tmp_path, "strata", data, [*extra, "--strata", strata])
    assert base["cluster"] == default
    assert samp["cluster"] == s_cluster and samp["sampled"] == [sampled]
    assert strat["cluster"] == t_cluster and strat["strata"] == [r for r in [strata] if r]
    assert len({base["statement"], samp["statement"], strat["statement"]}) == 3
    capsys.readouterr()
