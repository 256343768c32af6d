"""Arena-Hard-Auto judgments (``model_judgment/<judge>/<model>.jsonl``) and battles
(``data/arena_hard_battles.jsonl``) as a pairwise table with matched AB/BA games.

**Judgment files** (``gen_judgment.py``): one record per question and model,
``question_id`` (v0.1) or ``uid`` (v2), ``model``, ``judge``, v2 also ``baseline`` and
``category``, and ``games``: two judgments, each with a ``score`` label such as
``A>>B``. Game 1 shows the baseline as assistant A (first), game 2 swaps them. Labels:
``A>B``/``B<A`` A better, ``A>>B``/``B<<A`` A much better (a *strong* verdict),
``A=B``/``B=A`` a tie, and the mirror images for B; a null score is an NA outcome.

**Battles files** (arena-hard v0.1 ``show_result.py`` writes them): one row per game
in the baseline's frame (``model_a`` = baseline, ``winner`` model_a/model_b/tie), a
strong verdict written as 3 identical rows, a question's two games one after the other.
The reader splits each question's rows back into its games (runs of 1 or 3 rows; the
first is game 1, baseline shown first), so the x3 copies are one game, not three
duplicate judgments.

Layout: ``model_a`` = the baseline, ``model_b`` = the model, **item** = the question,
``first_shown`` ``a`` for game 1 and ``b`` for game 2 (a matched AB/BA pair), **judge**
when there are several, ``category`` kept as a column. Each game counts once; the
column ``upstream_rows`` keeps the weight arena-hard gives it (3 for a strong verdict),
from which :func:`evalmix.data.readers.upstream.arena_hard_leaderboard` reproduces
arena-hard's own score and interval.
"""

from __future__ import annotations

import warnings
from itertools import groupby
from pathlib import Path
from typing import Any

import pandas as pd

from evalmix.data.answers import attach
from evalmix.data.readers._common import (
    Source,
    add_category_stratum,
    as_paths,
    finish,
    label,
    load_records,
)
from evalmix.data.readers.model_answers import FEATURES, model_answers, with_model_answers
from evalmix.data.table import EvalTable
from evalmix.errors import DroppedRowsWarning, EvalmixError, EvalmixWarning

__all__ = ["read_arena_hard", "judgment_frame", "arena_hard_battles", "STRONG",
           "is_arena_hard_battles"]

#: weight arena-hard gives a strong verdict (``--weight`` / ``weight=3``)
STRONG = 3
# label -> (winning position, strong)
_LABELS: dict[str, tuple[str, bool]] = {
    "A>B": ("A", False), "B<A": ("A", False), "A>>B": ("A", True), "B<<A": ("A", True),
    "B>A": ("B", False), "A<B": ("B", False), "B>>A": ("B", True), "A<<B": ("B", True),
    "A=B": ("tie", False), "B=A": ("tie", False),
}
_BATTLE_KEYS = {"question_id", "model_a", "model_b", "winner"}


def _game_rows(path: Path, records: list[dict[str, Any]], baseline: str | None
               ) -> list[dict[str, Any]]:
    rows = []
    for i, r in enumerate(records):
        qid = r.get("uid", r.get("question_id"))
        games = r.get("games")
        if qid is None or "model" not in r or not isinstance(games, list):
            raise EvalmixError(
                f"{str(path)!r}: a record lacks question_id/uid, model or games (fields "
                f"{sorted(r)[:10]}); arena-hard judgment files have all three"
            )
        base = r.get("baseline", baseline)
        if base is None:
            raise EvalmixError(
                f"{str(path)!r}: the records do not name the baseline (arena-hard v0.1 "
                "files do not); pass baseline=... (v0.1's default is 'gpt-4-0314')"
            )
        for g, game in enumerate(games[:2]):
            score = game.get("score") if isinstance(game, dict) else None
            if score is not None and score not in _LABELS:
                raise EvalmixError(
                    f"{str(path)!r}: game {g + 1} of question {qid!r} has score {score!r}; "
                    f"arena-hard writes one of {', '.join(_LABELS)}"
                )
            pos, strong = _LABELS[score] if score is not None else (None, False)
            if pos == "tie" or pos is None:
                outcome = pos
            else:  # game 1: A is the baseline (model_a); game 2: A is the model
                outcome = "a" if (pos == "A") == (g == 0) else "b"
            rows.append({
                "question_id": str(qid), "model_a": str(base), "model_b": str(r["model"]),
                "judge": str(r.get("judge", path.parent.name)),
                "category": r.get("category"), "game": g + 1,
                "first_shown": "a" if g == 0 else "b", "arena_hard_score": score,
                "strong": strong, "outcome": outcome,
                "upstream_rows": (STRONG if strong else 1) if score is not None else 0,
                "file": str(path), "record": i,
            })
    return rows


def read_arena_hard(source: Source, *, baseline: str | None = None,
                    answers: Source | None = None, **read_kwargs: Any) -> EvalTable:
    """Read arena-hard-auto judgment files (see the module docstring).

    Parameters
    ----------
    source : path, folder or list of them
        ``<model>.jsonl`` judgment files or a ``model_judgment`` folder (searched
        recursively; the judge is the record's ``judge`` or the file's folder).
    baseline : str, optional
        The baseline model, for v0.1 records that do not name it.
    answers : path, folder or list of them, optional
        The ``model_answer`` files of the judged models and the baseline: adds each
        answer's ``length``, ``headers``, ``lists``, ``bold`` and ``tokens`` as
        ``<feature>_a`` / ``<feature>_b`` (:mod:`evalmix.data.readers.model_answers`),
        for the length- and style-controlled estimands.
    **read_kwargs
        Passed to :func:`evalmix.read` (``clusters=`` are added to the reader's).

    Returns
    -------
    EvalTable
        A pairwise table, one row per game (AB/BA matched within a question), ties as
        ``tie``; ``strong`` and ``upstream_rows`` columns keep arena-hard's x3 weight.
    """
    frame = judgment_frame(source, baseline)
    if answers is None:
        return finish(frame, frame.attrs["label"], _roles(frame), read_kwargs)
    frame = with_model_answers(frame, model_answers(answers))
    return attach(finish(frame, frame.attrs["label"], _roles(frame), read_kwargs), frame,
                  [f"{f}_{s}" for f in FEATURES for s in ("a", "b")])


def judgment_frame(source: Source, baseline: str | None = None) -> pd.DataFrame:
    """The games of arena-hard judgment files, one row each, in file order."""
    paths = as_paths(source, ("*.jsonl",), "arena-hard judgment files")
    rows = []
    for p in paths:
        part = _game_rows(p, load_records(p), baseline)
        own = [r for r in part if r["model_a"] == r["model_b"]]
        if own:
            warnings.warn(
                f"skipped {len(own) // 2 or 1} records of {str(p)!r} that compare "
                f"{own[0]['model_a']!r} with itself (the baseline)", EvalmixWarning,
                stacklevel=3)
        rows += [r for r in part if r["model_a"] != r["model_b"]]
    if not rows:
        raise EvalmixError(f"the arena-hard judgments {label(paths)} hold no records")
    frame = pd.DataFrame(rows)
    frame["category"] = frame["category"].astype("string").fillna("")
    frame.attrs["label"] = label(paths)
    return frame


def _roles(frame: pd.DataFrame) -> dict[str, Any]:
    clusters = {"item": "question_id"}
    if frame["judge"].nunique() > 1:
        clusters["judge"] = "judge"
    roles: dict[str, Any] = {"outcome": "outcome", "model_a": "model_a",
                             "model_b": "model_b", "clusters": clusters}
    add_category_stratum(frame, clusters, roles)
    if "first_shown" in frame.columns:
        roles.update(first_shown="first_shown", order_design="matched")
    return roles


def is_arena_hard_battles(records: list[dict[str, Any]]) -> bool:
    """Battle records as arena-hard writes them: only question_id, the two models and
    the winner (plus style metadata), with some comparison on several rows."""
    keys = set().union(*(r.keys() for r in records[:50]))
    if not _BATTLE_KEYS <= keys or keys - _BATTLE_KEYS - {"conv_metadata"}:
        return False
    comps = [(r.get("question_id"), r.get("model_a"), r.get("model_b")) for r in records]
    return len(set(comps)) < len(comps)


def _split_games(winners: list[str]) -> list[tuple[str, int]] | None:
    """A question's rows in file order as its games (winner, rows): runs of identical
    winners made of games of 1 or :data:`STRONG` rows, at most two games."""
    games: list[tuple[str, int]] = []
    for winner, run in groupby(winners):
        n = len(list(run))
        if n == 1 or n == STRONG:
            games.append((winner, n))
        elif n == 2:
            games += [(winner, 1), (winner, 1)]
        elif n == STRONG + 1:  # a strong and a weak verdict for the same winner
            games += [(winner, STRONG), (winner, 1)]
        elif n == 2 * STRONG:
            games += [(winner, STRONG), (winner, STRONG)]
        else:
            return None
    return games if len(games) <= 2 else None


def arena_hard_battles(path: Path, records: list[dict[str, Any]]) -> tuple[
        pd.DataFrame, dict[str, Any]]:
    """An arena-hard battles file's rows as one row per game, and the reader's roles."""
    groups: dict[tuple[str, str, str], list[str]] = {}
    for r in records:
        key = (str(r["question_id"]), str(r["model_a"]), str(r["model_b"]))
        groups.setdefault(key, []).append(str(r["winner"]))
    rows = []
    lone = 0
    both = any(len(g) == 2 for g in map(_split_games, groups.values()) if g)
    for (qid, a, b), winners in groups.items():
        games = _split_games(winners)
        if games is None:
            raise EvalmixError(
                f"{str(path)!r}: question {qid!r} ({a} vs {b}) has the rows "
                f"{winners[:8]}, which do not split into two arena-hard games of 1 or "
                f"{STRONG} identical rows; check the file"
            )
        if both and len(games) == 1:
            lone += 1  # which game survived (and so the order) is unknown
            continue
        ambiguous = len(games) == 2 and games[0] == (games[1][0], games[0][1]) and \
            {games[0][1], games[1][1]} == {1, STRONG}
        for g, (winner, n) in enumerate(games):
            rows.append({
                "question_id": qid, "model_a": a, "model_b": b, "game": g + 1,
                "winner": winner, "outcome": {"model_a": "a", "model_b": "b"}.get(
                    winner, "tie" if winner.startswith("tie") else winner),
                "strong": pd.NA if ambiguous else n == STRONG, "upstream_rows": n,
                **({"first_shown": "a" if g == 0 else "b"} if both else {}),
            })
    if lone:
        warnings.warn(
            f"{str(path)!r}: dropped {lone} questions with one game only (the other "
            "failed); the file does not say which game survived, so its order is unknown",
            DroppedRowsWarning, stacklevel=3)
    frame = pd.DataFrame(rows)
    frame["judge"] = "judge"
    roles = _roles(frame)
    if not both:
        roles.pop("first_shown", None)
        roles.pop("order_design", None)
    return frame.drop(columns=["judge"]), roles


def read_arena_hard_battles(path: Path, records: list[dict[str, Any]],
                            read_kwargs: dict[str, Any]) -> EvalTable:
    frame, roles = arena_hard_battles(path, records)
    return finish(frame, str(path), roles, read_kwargs)
