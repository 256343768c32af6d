"""Seeds: validation, recorded ints that reproduce a run, child seeds (evalmix.seeding)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from evalmix.errors import InvalidOptionError
from evalmix.inference.bootstrap import cluster_bootstrap
from evalmix.inference.compare_all import compare_all
from evalmix.inference.leaderboard import leaderboard
from evalmix.inference.wild import wild_cluster_bootstrap
from evalmix.seeding import (
    SEED_BOUND,
    as_generator,
    child_seed,
    keyed_seed_sequence,
    resolve_seed,
    seeded_rng,
)
from evalmix.sim import pairwise_judges
from evalmix.sim.boards import baseline_leaderboard


def _data(seed=0):
    rng = np.random.default_rng(seed)
    g = np.repeat(np.arange(24), 4)
    X = np.column_stack([np.ones(96), rng.integers(0, 2, 96)])
    y = 0.3 * X[:, 1] + rng.normal(size=24)[g] + rng.normal(size=96)
    return X, y, g


def test_resolve_seed_keeps_ints_and_draws_ints_otherwise():
    assert resolve_seed(7) == 7 and isinstance(resolve_seed(np.int64(7)), int)
    a, b = resolve_seed(None), resolve_seed(None)
    assert 0 <= a < SEED_BOUND and 0 <= b < SEED_BOUND
    assert a != b  # fresh entropy each call (equal with probability 2^-31)
    # a Generator contributes one draw: same state -> same int; the Generator advances
    gen = np.random.default_rng(5)
    first = resolve_seed(gen)
    assert first == resolve_seed(np.random.default_rng(5)) != resolve_seed(gen)


@pytest.mark.parametrize("seed", [-1, 1.5, "7", True])
def test_bad_seeds_are_refused_everywhere(seed):
    for fn in (resolve_seed, seeded_rng, as_generator):
        with pytest.raises(InvalidOptionError, match="seed"):
            fn(seed)


def test_seeded_rng_is_default_rng_of_the_recorded_int():
    rng, recorded = seeded_rng(None)
    assert np.array_equal(rng.random(5), np.random.default_rng(recorded).random(5))
    rng, recorded = seeded_rng(11)
    assert recorded == 11
    assert np.array_equal(rng.random(5), np.random.default_rng(11).random(5))


def test_as_generator_continues_a_generator_stream():
    gen = np.random.default_rng(3)
    assert as_generator(gen) is gen
    assert np.array_equal(as_generator(4).random(3), np.random.default_rng(4).random(3))


def test_child_and_keyed_seeds_are_unchanged_from_the_code_they_replace():
    # frozen from compare.analyze._seed_for and sim.study.cell_seed before the move
    assert child_seed(2026, 3) == 3401383424
    assert keyed_seed_sequence(5, '{"a": 1}').generate_state(2).tolist() == [
        1214504062, 154761892]
    assert child_seed(1, 0) != child_seed(1, 1) and child_seed(1, 0) != child_seed(2, 0)


def test_bootstrap_seed_none_records_an_int_that_reproduces_it():
    X, y, g = _data()
    res = cluster_bootstrap(X, y, g, target=1, reps=200, seed=None)
    assert isinstance(res.seed, int)
    again = cluster_bootstrap(X, y, g, target=1, reps=200, seed=res.seed)
    assert np.array_equal(res.draws, again.draws) and (res.lo, res.hi) == (again.lo, again.hi)
    gen = cluster_bootstrap(X, y, g, target=1, reps=200, seed=np.random.default_rng(9))
    assert np.array_equal(gen.draws,
                          cluster_bootstrap(X, y, g, target=1, reps=200, seed=gen.seed).draws)


@pytest.mark.parametrize("weights", ["rademacher", "webb"])
def test_wild_seed_none_records_an_int_that_reproduces_it(weights):
    X, y, g = _data(1)
    res = wild_cluster_bootstrap(X, y, g, target=1, reps=499, weights=weights, seed=None)
    assert isinstance(res.seed, int)
    again = wild_cluster_bootstrap(X, y, g, target=1, reps=499, weights=weights,
                                   seed=res.seed)
    assert np.array_equal(res.t_draws, again.t_draws)
    assert (res.p_value, res.lo, res.hi) == (again.p_value, again.lo, again.hi)


def test_compare_all_and_leaderboard_record_a_reproducing_int():
    table = pairwise_judges(n_scenarios=30, seed=1).table()
    a = compare_all(table, cluster="scenario", reps=200, seed=None)
    seed = a.seed
    assert isinstance(seed, int | np.integer) and (a.table["seed"] == seed).all()
    b = compare_all(table, cluster="scenario", reps=200, seed=int(seed))
    assert a.crit == b.crit and a.table.equals(b.table)
    board_table = baseline_leaderboard(n_models=5, n_items=60, seed=1).table()
    board = leaderboard(board_table, cluster="item", seed=None)
    assert isinstance(board.seed, int)
    rerun = leaderboard(board_table, cluster="item", seed=board.seed)
    assert board.tidy().equals(rerun.tidy())


def test_inference_does_not_load_the_simulators():
    code = ("import sys, evalmix.inference.bootstrap, evalmix.inference.wild, "
            "evalmix.inference.compare_all, evalmix.inference.leaderboard, evalmix.plan.pilot; "
            "print(sorted(m for m in sys.modules if m.startswith(('evalmix.sim', "
            "'evalmix.models', 'evalmix.report'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"
