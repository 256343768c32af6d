"""Tier letters (compact letter display) as maximal cliques: the same letters as R's
multcompView::multcompLetters (frozen, names included) and as Piepho's insert-and-absorb
(the implementation evalmix had before issue 37, kept here only as the reference), "share
a letter iff not significant", and time and memory that stay small at hundreds of
models."""

from __future__ import annotations

import time
import tracemalloc
import warnings
from string import ascii_letters

import numpy as np
import pandas as pd
import pytest
from conftest import REFERENCE

import evalmix
import evalmix.inference.leaderboard
import evalmix.report.analyze
from evalmix.cli import build_parser
from evalmix.errors import InvalidOptionError
from evalmix.inference.leaderboard import leaderboard
from evalmix.inference.letters import MAX_LETTERS, compact_letters, maximal_cliques
from evalmix.report.leaderboard_view import leaderboard_markdown
from evalmix.sim.boards import baseline_leaderboard

LETTERS = REFERENCE / "letters"


def _letter(n: int) -> str:
    if n < len(ascii_letters):
        return ascii_letters[n]
    return f"{ascii_letters[n // len(ascii_letters) - 1]}{ascii_letters[n % len(ascii_letters)]}"


def insert_absorb(order: np.ndarray, different: np.ndarray) -> list[str]:
    """evalmix's compact_letters before issue 37, verbatim: Piepho's insert-and-absorb on
    letters x models boolean arrays (letters x letters x models per split)."""
    diff = np.asarray(different, dtype=bool)
    k = diff.shape[0]
    cols = np.ones((1, k), dtype=bool)
    for a, b in zip(*np.nonzero(np.triu(diff | diff.T, 1)), strict=True):
        hit = cols[:, a] & cols[:, b]
        if not hit.any():
            continue
        one, two = cols[hit].copy(), cols[hit].copy()
        one[:, a] = False
        two[:, b] = False
        kept = cols[~hit]
        cand = np.vstack([one, two])
        inside_kept = ~(cand[:, None, :] & ~kept[None, :, :]).any(axis=2)
        sub = ~(cand[:, None, :] & ~cand[None, :, :]).any(axis=2)
        equal = sub & sub.T
        earlier = np.tri(len(cand), k=-1, dtype=bool)
        drop = (np.any(inside_kept, axis=1) | np.any(sub & ~equal, axis=1)
                | np.any(equal & earlier, axis=1) | ~np.any(cand, axis=1))
        cols = np.vstack([kept, cand[~drop]])
    rank_of = np.empty(k, dtype=np.int64)
    rank_of[np.asarray(order, dtype=np.int64)] = np.arange(k)
    first = np.where(cols, rank_of[None, :], k).min(axis=1)
    cols = cols[np.lexsort((-cols.sum(axis=1), first))]
    columns = list(cols)
    sep = "" if len(columns) <= len(ascii_letters) else "."
    return [sep.join(_letter(n) for n, col in enumerate(columns) if col[m])
            for m in range(k)]


def _groups(letters: list[str]) -> set[frozenset[int]]:
    """The letters as sets of models."""
    out: dict[str, set[int]] = {}
    dotted = any("." in s for s in letters)  # more than 52 letters
    for m, s in enumerate(letters):
        for name in (s.split(".") if dotted else list(s)):
            out.setdefault(name, set()).add(m)
    return {frozenset(v) for v in out.values()}


def _share(letters: list[str]) -> np.ndarray:
    """``share[a, b]``: models a and b have a letter in common (diagonal True)."""
    k = len(letters)
    share = np.eye(k, dtype=bool)
    for g in _groups(letters):
        idx = np.array(sorted(g))
        share[np.ix_(idx, idx)] = True
    return share


def _ties(letters: list[str], order: np.ndarray) -> bool:
    """Two letters with the same best model (their order is a convention)."""
    rank_of = np.argsort(order)
    keys = [min(rank_of[m] for m in g) for g in _groups(letters)]
    return len(keys) != len(set(keys))


def _board(rng: np.random.Generator, k: int, kind: int) -> tuple[np.ndarray, np.ndarray]:
    est = rng.normal(size=k)
    if kind == 0:  # significance ordered by the estimates (one SE)
        d = np.abs(est[:, None] - est[None, :]) > rng.uniform(0.2, 1.5)
    elif kind == 1:  # heterogeneous SEs, as on a real board
        se = rng.uniform(0.1, 0.5, k)
        d = np.abs(est[:, None] - est[None, :]) > 2.5 * np.hypot(se[:, None], se[None, :])
    else:  # any pattern at all
        d = np.triu(rng.random((k, k)) < rng.uniform(0.1, 0.9), 1)
        d = d | d.T
    return np.argsort(-est), d


def test_letters_by_hand():
    # a > b > c, only a vs c significant: a "a", b "ab", c "b"
    d = np.zeros((3, 3), dtype=bool)
    d[0, 2] = d[2, 0] = True
    assert compact_letters(np.arange(3), d) == ["a", "ab", "b"]
    # nothing significant: one letter; everything significant: one letter each
    assert compact_letters(np.arange(4), np.zeros((4, 4), bool)) == ["a"] * 4
    assert compact_letters(np.array([2, 0, 1]), ~np.eye(3, dtype=bool)) == ["b", "c", "a"]
    assert compact_letters(np.arange(1), np.zeros((1, 1), bool)) == ["a"]
    assert compact_letters(np.arange(0), np.zeros((0, 0), bool)) == []


def test_letters_equal_insert_and_absorb_on_small_boards():
    rng = np.random.default_rng(37)
    exact = 0
    for rep in range(450):
        order, d = _board(rng, int(rng.integers(2, 15)), rep % 3)
        new, old = compact_letters(order, d), insert_absorb(order, d)
        assert _groups(new) == _groups(old)  # the same letters (maximal cliques)
        assert (_share(new) == ~d).all()  # share a letter iff not significant
        if not _ties(old, order):
            assert new == old  # and named alike
            exact += 1
        else:  # letters with the same best model: only their order may differ
            assert rep % 3 != 0  # never when significance follows the estimates
    assert exact > 300


def test_letters_equal_multcompview():
    """R multcompView 0.1-8 ``multcompLetters`` on 142 boards of 2-24 models (frozen:
    tests/reference/letters/letters.R): the same letters on every board, named alike
    wherever no model is the best of three or more letters. (multcompLetters orders
    letters with the same best model by one pass of pairwise swaps over the order its
    splits made them, so from three such letters on its names depend on that history.)"""
    boards = pd.read_csv(LETTERS / "boards.csv", keep_default_na=False)
    want = pd.read_csv(LETTERS / "letters.csv")
    assert boards["board"].nunique() == want["board"].nunique() == 142
    exact = 0
    for b, rows in boards.groupby("board"):
        k = int(rows["k"].iloc[0])
        d = np.zeros((k, k), dtype=bool)
        pairs = rows[rows["a"] != ""]
        ia = pairs["a"].str[1:].astype(int).to_numpy()
        ib = pairs["b"].str[1:].astype(int).to_numpy()
        d[ia, ib] = d[ib, ia] = True
        r = want[want["board"] == b].sort_values("model")["letters"].tolist()
        new = compact_letters(np.arange(k), d)
        assert _groups(new) == _groups(r), b
        heads = np.bincount([min(g) for g in _groups(r)])
        if heads.max() < 3:
            assert new == r, b
            exact += 1
        else:
            exact += new == r
    assert exact == 130  # of 142: 111 without three letters sharing a best model, 19 with


def test_letters_equal_insert_and_absorb_with_two_character_names():
    # 120 models with one SE: 60 letters, names "ab.ac..."
    rng = np.random.default_rng(3)
    est = np.sort(rng.normal(size=120))[::-1]
    d = np.abs(est[:, None] - est[None, :]) > 0.1
    order = np.arange(120)
    new = compact_letters(order, d)
    assert len(_groups(new)) > 52 and "." in "".join(new)
    assert new == insert_absorb(order, d)


def test_maximal_cliques_equal_networkx():
    nx = pytest.importorskip("networkx")
    rng = np.random.default_rng(11)
    for rep in range(40):
        k = int(rng.integers(1, 30))
        same = np.triu(rng.random((k, k)) < rng.uniform(0.1, 0.9), 1)
        same = same | same.T
        want = {frozenset(c) for c in nx.find_cliques(nx.from_numpy_array(same.astype(int)))}
        order = rng.permutation(k) if rep % 2 else None
        got = maximal_cliques(same, order=order)
        assert got is not None and len(got) == len(want)
        assert {frozenset(i for i in range(k) if c >> i & 1) for c in got} == want


def test_letters_above_the_cap_are_none():
    rng = np.random.default_rng(5)
    order, d = _board(rng, 40, 2)
    n = len(_groups(insert_absorb(order, d)))
    assert compact_letters(order, d, max_letters=n) is not None
    assert compact_letters(order, d, max_letters=n - 1) is None
    assert maximal_cliques(~d, limit=n - 1) is None
    with pytest.raises(InvalidOptionError, match="max_letters is at most"):
        compact_letters(order, d, max_letters=MAX_LETTERS + 1)


def _issue_table(k: int, items: int = 20, seed: int = 1) -> evalmix.EvalTable:
    """Issue 37's board: 0/1 scores of ``k`` models on ``items`` items."""
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.2, 0.9, k)
    y = (rng.random((k, items)) < p[:, None]).astype(int)
    df = pd.DataFrame({"model": np.repeat([f"m{i:04d}" for i in range(k)], items),
                       "item": np.tile([f"q{j}" for j in range(items)], k),
                       "score": y.ravel()})
    return evalmix.read(df, outcome="score", condition="model", clusters={"item": "item"})


def _cost(fn) -> tuple[float, int]:  # noqa: ANN001
    """Seconds (without tracing) and traced peak bytes of ``fn()``."""
    t0 = time.perf_counter()
    fn()
    seconds = time.perf_counter() - t0
    tracemalloc.start()
    try:
        fn()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return seconds, peak


def test_letters_time_and_memory_grow_smoothly():
    # issue 37: the 160- and 199-model boards of 0/1 scores on 20 items took 6.7 s / 607
    # MB and 341 s / 7.6 GB in analyze (51x the time, 13x the memory for 24% more models).
    # Their letters stop at the default cap (no more letters than models)
    cost = {}
    for k in (160, 199):
        t = _issue_table(k)
        cost[k] = _cost(lambda t=t: leaderboard(t, cluster="item", seed=1, reps=500))
    assert cost[199][0] < 10 and cost[199][1] < 100e6
    assert cost[199][0] / cost[160][0] < 4 and cost[199][1] / cost[160][1] < 2.5
    # a board of 400 models whose significance follows the estimates: 387 letters
    rng = np.random.default_rng(1)
    est = np.sort(rng.normal(size=400))[::-1]
    se = rng.uniform(0.05, 0.2, 400)
    d = np.abs(est[:, None] - est[None, :]) > 3.5 * np.hypot(se[:, None], se[None, :])
    letters = compact_letters(np.arange(400), d)
    assert letters is not None and len(_groups(letters)) == 387
    assert (_share(letters) == ~d).all()


@pytest.mark.slow
def test_issue_199_model_table_in_seconds():
    """The issue's own call, ``analyze(t, fast=True, reps=99, seed=1)``, at 160 and 199
    models: time and traced memory grow like the number of models (before: 51x the
    time and 13x the memory)."""
    cost = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k in (160, 199):
            t = _issue_table(k)
            cost[k] = _cost(lambda t=t: evalmix.analyze(t, fast=True, reps=99, seed=1,
                                                        progress=False))
    assert cost[199][0] < 120 and cost[199][1] < 1e9
    assert cost[199][0] / cost[160][0] < 3 and cost[199][1] / cost[160][1] < 2.5


def test_letters_can_be_skipped_and_capped_on_a_board_and_in_the_report(monkeypatch):
    t = baseline_leaderboard(n_models=8, n_items=40, n_judges=2, seed=2).table()
    full = leaderboard(t, cluster="item", seed=4)
    n = len(_groups(list(full.tidy()["tier"])))
    assert n > 1 and not full.notes
    capped = leaderboard(t, cluster="item", seed=4, max_letters=n - 1)
    assert (capped.tidy()["tier"] == "").all()
    assert capped.notes == (f"leaderboard: no tier letters (the 8 models need more than "
                            f"{n - 1} letters); the rank ranges give the comparisons",)
    assert capped.notes[0] in str(capped)
    skipped = leaderboard(t, cluster="item", seed=4, letters=False)
    assert (skipped.tidy()["tier"] == "").all() and not skipped.notes
    rest = [c for c in full.tidy().columns if c != "tier"]
    assert skipped.tidy()[rest].equals(full.tidy()[rest])
    md = leaderboard_markdown(skipped.tidy())
    assert "| tier |" not in md and "no tier letters on this board" in md
    assert "| tier |" in leaderboard_markdown(full.tidy())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reps = {flag: evalmix.analyze(t, fast=True, methods=["naive", "CR2"], progress=False,
                                      seed=4, letters=flag) for flag in (True, False)}
    assert (reps[False].leaderboard["tier"] == "").all()
    assert reps[True].leaderboard["tier"].tolist() == full.tidy()["tier"].tolist()
    assert not any("tier letters" in w for w in reps[True].warnings)
    # above the cap the report says so (the cap set to 1 letter here)
    monkeypatch.setattr(evalmix.inference.leaderboard, "MAX_LETTERS", 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rep = evalmix.analyze(t, fast=True, methods=["naive", "CR2"], progress=False, seed=4)
    assert (rep.leaderboard["tier"] == "").all()
    assert ("leaderboard: no tier letters (the 8 models need more than 1 letters); the rank "
            "ranges give the comparisons") in rep.warnings


def test_no_letters_flag_reaches_analyze(tmp_path, monkeypatch):
    seen: list[dict] = []

    class _Stop(Exception):
        pass

    def fake_analyze(table, **kwargs):  # noqa: ANN001, ANN003, ANN202
        seen.append(kwargs)
        raise _Stop

    csv = tmp_path / "t.csv"
    pd.DataFrame({"item": [f"q{i // 2}" for i in range(20)], "model": ["a", "b"] * 10,
                  "score": [0, 1] * 10}).to_csv(csv, index=False)
    monkeypatch.setattr(evalmix.report.analyze, "analyze", fake_analyze)
    base = ["report", str(csv), "--outcome", "score", "--condition", "model", "--cluster",
            "item=item", "--quiet", "--out", str(tmp_path / "x")]
    for extra in (["--no-letters"], []):
        args = build_parser().parse_args(base + extra)
        with pytest.raises(_Stop):
            args.func(args)
    assert [s["letters"] for s in seen] == [False, True]
