"""Each tool's own headline numbers, computed the tool's way from its own files.

evalmix reports a recommended interval; a user comparing it with the leaderboard first
wants to see the leaderboard's number come out. :func:`upstream` re-reads the files the
way the tool does and returns its numbers, and :func:`upstream_line` one line of text
for the report. Each computation follows the tool's code at the commit named in
``tests/reference/upstream/README.md``, where tests compare it with that code's output:

- **AlpacaEval** (``metrics/helpers.py``, ``describe_head2head``): judge failures
  dropped; win rate = ``mean(preference - 1) x 100``, standard error = ``sem x 100``
  (ddof 1), per model and annotator.
- **FastChat MT-Bench pairwise** (``llm_judge/show_result.py``,
  ``display_result_pairwise``): records with an ``error`` game dropped; a tie or two
  games that disagree count as a tie for both models; ``win_rate_adjusted`` = (wins +
  ties / 2) / comparisons. No standard error.
- **arena-hard-auto** (``show_result.py``, ``load_judgments`` and ``print_leaderboard``):
  a strong verdict counts 3 times; records with a failed game dropped; 100 bootstrap
  resamples of each model's rows; score = mean of the bootstrap means, interval = their
  5% and 95% quantiles (90%). The bootstrap draws are numpy's legacy ``RandomState``
  in pandas' order, so with the same ``seed`` the interval is upstream's to the digit.
  A battles file gets v0.1's computation by default (:func:`arena_hard_v01`: the code
  that wrote the file; Bradley-Terry, 95%).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from evalmix.data.table import EvalTable
from evalmix.errors import EvalmixError

__all__ = ["Upstream", "upstream", "upstream_line", "alpaca_eval_leaderboard",
           "fastchat_pairwise", "arena_hard_leaderboard", "arena_hard_v01"]


@dataclass(frozen=True)
class Upstream:
    """A tool's own numbers for the models in a file or folder.

    Attributes
    ----------
    tool : str
        The tool and the function reproduced.
    rows : pandas.DataFrame
        One row per model (and annotator or category where the tool splits by them):
        ``model``, ``estimate`` (win rate in [0, 1]), ``se`` or ``lower``/``upper``
        (NaN where the tool gives none), ``level`` of the interval, and the tool's own
        columns.
    method : str
        How the tool computes its number.
    differs : str
        How and why evalmix's recommended interval differs.
    """

    tool: str
    rows: pd.DataFrame
    method: str
    differs: str

    def line(self, digits: int = 1) -> str:
        """One line: the tool, then each model's number as the tool prints it."""
        parts = []
        for r in self.rows.itertuples(index=False):
            est = f"{100 * r.estimate:.{digits}f}"
            if np.isfinite(r.se):
                est += f" (SE {100 * r.se:.{digits}f})"
            elif np.isfinite(r.lower):
                est += (f" [{100 * r.lower:.{digits}f}, {100 * r.upper:.{digits}f}]")
            parts.append(f"{r.model} {est}")
        return f"Upstream ({self.tool}; {self.method}): " + "; ".join(parts) + "."


def _rows(frame: pd.DataFrame) -> pd.DataFrame:
    for col in ("se", "lower", "upper", "level"):
        if col not in frame.columns:
            frame[col] = np.nan
    lead = ["model", "estimate", "se", "lower", "upper", "level"]
    return frame[lead + [c for c in frame.columns if c not in lead]].reset_index(drop=True)


# --------------------------------------------------------------------------- AlpacaEval
def alpaca_eval_leaderboard(frame: pd.DataFrame) -> pd.DataFrame:
    """AlpacaEval's ``describe_head2head`` per model (and annotator) from the frame of
    :func:`~evalmix.data.readers.alpaca_eval.alpaca_eval_frame`."""
    out = []
    keys = ["generator_2"] + (["annotator"] if "annotator" in frame.columns else [])
    for key, part in frame.groupby(keys, sort=True):
        pref = part["preference_value"].dropna() - 1.0   # failures dropped, as upstream
        discrete = part["preference_value"].dropna().replace({1.5: 0.0}).round()
        discrete = discrete.replace({0.0: 1.5}) - 1.0
        key = key if isinstance(key, tuple) else (key,)
        out.append({
            "model": key[0], "estimate": pref.mean(), "se": pref.sem(),
            "win_rate": pref.mean() * 100, "standard_error": pref.sem() * 100,
            "n_wins": int((pref > 0.5).sum()), "n_wins_base": int((pref < 0.5).sum()),
            "n_draws": int((pref == 0.5).sum()), "n_total": int(len(pref)),
            "discrete_win_rate": discrete.mean() * 100,
            **({"annotator": key[1]} if len(key) > 1 else {}),
        })
    return _rows(pd.DataFrame(out))


# --------------------------------------------------------------------------- FastChat
def fastchat_pairwise(frame: pd.DataFrame, baseline: str | None = None) -> pd.DataFrame:
    """FastChat's ``display_result_pairwise`` from the reader's frame of
    ``*_pair.jsonl`` records (one row per game: ``first_shown``, raw ``winner``).

    ``baseline``: keep only comparisons with this model and leave it out of the rows
    (``--mode pairwise-baseline``); ``None`` is ``--mode pairwise-all``.
    """
    g1 = frame.loc[frame["first_shown"] == "a"].set_index("record")
    g2 = frame.loc[frame["first_shown"] == "b"].set_index("record")["winner"]
    wide = pd.DataFrame({"model_a": g1["model_a"], "model_b": g1["model_b"],
                         "a": g1["winner"], "b": g2.reindex(g1.index)})
    wide = wide.loc[(wide["a"] != "error") & (wide["b"] != "error")]
    if baseline is not None:
        wide = wide.loc[(wide["model_a"] == baseline) | (wide["model_b"] == baseline)]
    tally: dict[str, list[int]] = {}
    for m1, m2, g1, g2 in wide[["model_a", "model_b", "a", "b"]].itertuples(index=False):
        if g1 == "tie" or g1 != g2:
            res = {m1: 2, m2: 2}
        else:
            winner, loser = (m1, m2) if g1 == "model_1" else (m2, m1)
            res = {winner: 0, loser: 1}
        for m, k in res.items():
            tally.setdefault(m, [0, 0, 0])[k] += 1
    rows = []
    for m in sorted(tally):
        if m == baseline:
            continue
        win, loss, tie = tally[m]
        n = win + loss + tie
        rows.append({"model": m, "estimate": (win + 0.5 * tie) / n, "win": win,
                     "loss": loss, "tie": tie, "win_rate": win / n, "loss_rate": loss / n,
                     "win_rate_adjusted": (win + 0.5 * tie) / n})
    return _rows(pd.DataFrame(rows))


# --------------------------------------------------------------------------- arena-hard
def arena_hard_scores(games: pd.DataFrame) -> pd.DataFrame:
    """arena-hard's rows (``load_judgments``): per game of a record whose two games
    both have a verdict, ``upstream_rows`` copies of the model's score (1 win, 0.5 tie,
    0 loss) in upstream's order (game 2, then game 1)."""
    g = games.copy()
    g["score"] = g["outcome"].map({"b": 1.0, "a": 0.0, "tie": 0.5})
    if "arena_hard_score" in g.columns:  # judgment files: both games or none
        rec = ["file", "record"]
        complete = g.groupby(rec, sort=False)["arena_hard_score"].transform(
            lambda s: bool(s.notna().all() and len(s) == 2))
        g = g.loc[complete.astype(bool)].sort_values(
            ["file", "record", "game"], ascending=[True, True, False], kind="stable")
    g = g.loc[g["upstream_rows"] > 0]
    rows = g.loc[g.index.repeat(g["upstream_rows"])]
    cat = rows["category"] if "category" in rows.columns else pd.Series("", index=rows.index)
    return pd.DataFrame({"model": rows["model_b"].to_numpy(), "category": cat.to_numpy(),
                         "scores": rows["score"].to_numpy()})


def arena_hard_leaderboard(games: pd.DataFrame, *, rounds: int = 100, seed: int | None = 0
                           ) -> pd.DataFrame:
    """arena-hard-auto's ``print_leaderboard`` per category: ``rounds`` bootstrap
    resamples of each model's rows (numpy's global-state draws in pandas' group order,
    seeded with ``seed``), score = mean of the bootstrap means, 90% interval = their 5%
    and 95% quantiles."""
    battles = arena_hard_scores(games)
    rng = np.random.RandomState(seed)
    out = []
    for category, part in battles.groupby("category", sort=True):
        models = sorted(part["model"].unique())
        values = [part.loc[part["model"] == m, "scores"].to_numpy(dtype=float) for m in models]
        boot = np.empty((rounds, len(models)))
        for r in range(rounds):
            for j, v in enumerate(values):
                boot[r, j] = v[rng.choice(v.size, size=v.size, replace=True)].mean()
        for j, m in enumerate(models):
            out.append({"model": m, "estimate": boot[:, j].mean(),
                        "lower": float(np.quantile(boot[:, j], 0.05)),
                        "upper": float(np.quantile(boot[:, j], 0.95)), "level": 0.90,
                        "category": category, "sample_mean": values[j].mean(),
                        "n_rows": values[j].size})
    return _rows(pd.DataFrame(out))


def arena_hard_v01(games: pd.DataFrame, *, rounds: int = 100, seed: int | None = 42
                   ) -> pd.DataFrame:
    """arena-hard v0.1's ``show_result.py`` on its battles (the code that wrote
    ``arena_hard_battles.jsonl``): Bradley-Terry ratings by ``compute_mle_elo``, the
    score the win rate against the baseline; ``rounds`` bootstrap resamples of all rows
    together (``np.random.seed(42)`` at import), 95% percentile interval of each
    model's rating turned into a win rate against the baseline's same percentile.

    With one baseline the design is a star and the ratings have a closed form: the
    baseline's rating minus a model's is ``log10(q / (1 - q))`` with ``q`` the
    baseline's share of that model's rows (ties half); the point fit is anchored at the
    baseline, the bootstrap fits are not (upstream passes the baseline under a wrong
    keyword), so they sit at the minimum-norm solution (ratings summing to zero) that
    sklearn's solver reaches from zero.
    """
    rows = games.loc[games.index.repeat(games["upstream_rows"])]
    base = rows["model_a"].unique()
    if base.size != 1:
        raise EvalmixError(
            f"arena-hard v0.1 scores need one baseline; the battles have {base.size} "
            f"({', '.join(map(str, base[:5]))})"
        )
    q_rows = rows["outcome"].map({"a": 1.0, "b": 0.0, "tie": 0.5}).to_numpy(dtype=float)
    models = sorted(rows["model_b"].unique())
    code = pd.Categorical(rows["model_b"], categories=models).codes

    def ratings(idx: np.ndarray) -> np.ndarray:
        n = np.bincount(code[idx], minlength=len(models))
        q = np.bincount(code[idx], weights=q_rows[idx], minlength=len(models)) / n
        d = np.log10(q / (1 - q))        # baseline minus model, in log10 odds
        theta_b = d.sum() / (len(models) + 1)
        return 400 * np.append(theta_b - d, theta_b) + 1000   # models..., baseline

    rng = np.random.RandomState(seed)
    n = len(rows)
    boot = np.array([ratings(rng.choice(n, size=n, replace=True)) for _ in range(rounds)])
    point = ratings(np.arange(n))
    point = point - point[-1] + 1000

    def win_rate(elo: np.ndarray) -> np.ndarray:
        return 1 / (1 + 10 ** ((elo[-1] - elo[:-1]) / 400))

    lower = win_rate(np.percentile(boot, 2.5, axis=0))
    upper = win_rate(np.percentile(boot, 97.5, axis=0))
    est = win_rate(point)
    return _rows(pd.DataFrame({
        "model": models, "estimate": est, "lower": lower, "upper": upper, "level": 0.95,
        "score": np.round(100 * est, 2), "rating_q025": np.round(100 * lower, 2),
        "rating_q975": np.round(100 * upper, 2)}))


# --------------------------------------------------------------------------- dispatch
_ALPACA = Upstream(
    "AlpacaEval describe_head2head", pd.DataFrame(),
    "judge failures dropped, SE = sem x 100",
    "AlpacaEval's SE is the plain standard error over instructions; evalmix's "
    "recommended interval clusters by instruction (the same SE with one judgment per "
    "instruction and model), holds the 5 subsets fixed as strata, uses a t critical "
    "value and also gives intervals for the differences between models")
_FASTCHAT = Upstream(
    "FastChat show_result.py --mode pairwise", pd.DataFrame(),
    "win_rate_adjusted; games that disagree count as a tie; no standard error",
    "FastChat gives no interval; its tie rule hides position bias in the ties; evalmix "
    "keeps both games as a matched AB/BA pair, clusters by question and estimates the "
    "order effect")
_ARENA_V01 = Upstream(
    "arena-hard-auto v0.1 show_result.py", pd.DataFrame(),
    "strong verdicts x3, Bradley-Terry win rate against the baseline, 100 bootstrap "
    "resamples of rows, 95% interval",
    "arena-hard counts a strong verdict 3 times, which pulls the score toward the strong "
    "verdicts, and its bootstrap resamples rows, so those 3 copies and a question's two "
    "games count as independent judgments; evalmix counts each game once and clusters by "
    "question, the unit that was sampled, so its interval is wider")
_ARENA = Upstream(
    "arena-hard-auto show_result.py", pd.DataFrame(),
    "strong verdicts x3, 100 bootstrap resamples of rows, 90% interval",
    "arena-hard counts a strong verdict 3 times, which pulls the score toward the strong "
    "verdicts, and its bootstrap resamples rows, so those 3 copies and a question's two "
    "games count as independent judgments; evalmix counts each game once and clusters by "
    "question, the unit that was sampled, so its interval is wider")


def upstream(source: str | os.PathLike[str], format: str = "auto", **options: Any
             ) -> Upstream | None:
    """The tool's own numbers for ``source`` (``None`` for formats without an
    upstream headline here: tables, Inspect, lm-eval, Chatbot Arena battles).

    ``options``: ``baseline=`` (FastChat ``pairwise-baseline``; arena-hard v0.1
    judgments), ``rounds=`` and ``seed=`` (arena-hard's bootstrap), ``version=``
    (an arena-hard battles file: ``"v0.1"``, the code that wrote it, by default, or
    ``"v2"``, today's computation on its rows).
    """
    from dataclasses import replace

    from evalmix.data.readers import detect_format
    from evalmix.data.readers._common import as_paths, load_records

    kind = detect_format(source) if format == "auto" else format
    if kind == "alpaca_eval":
        from evalmix.data.readers.alpaca_eval import alpaca_eval_frame

        frame, _ = alpaca_eval_frame(source)
        return replace(_ALPACA, rows=alpaca_eval_leaderboard(frame))
    boot = {k: options[k] for k in ("rounds", "seed") if k in options}
    if kind == "arena_hard":
        from evalmix.data.readers.arena_hard import judgment_frame

        games = judgment_frame(source, options.get("baseline"))
        return replace(_ARENA, rows=arena_hard_leaderboard(games, **boot))
    if kind != "battles":
        return None
    from evalmix.data.readers.arena_hard import arena_hard_battles, is_arena_hard_battles
    from evalmix.data.readers.battles import battles_frame

    paths = as_paths(source, ("*.jsonl", "*.json"), "battle logs")
    if len(paths) == 1:
        records = load_records(paths[0])
        if records and is_arena_hard_battles(records):
            games, _ = arena_hard_battles(paths[0], records)
            if options.get("version", "v0.1") == "v2":
                return replace(_ARENA, rows=arena_hard_leaderboard(games, **boot))
            return replace(_ARENA_V01, rows=arena_hard_v01(
                games, **{"seed": 42, **boot}))
    frame, roles = battles_frame(paths)
    if "first_shown" not in roles:   # Chatbot Arena battles: no upstream headline here
        return None
    return replace(_FASTCHAT, rows=fastchat_pairwise(frame, options.get("baseline")))


def upstream_line(source: str | os.PathLike[str] | EvalTable, format: str = "auto",
                  **options: Any) -> str | None:
    """:func:`upstream` as one line of text for the report: the tool's numbers, then how
    and why evalmix's interval differs (``None`` when there is no upstream headline for
    the format, or the files cannot be read the tool's way).

    ``source`` may be the table a reader returned, or its ``source`` label (a report's
    ``design["source"]``): the file, or the folder holding the files read, is read
    again.
    """
    text = source.source if isinstance(source, EvalTable) else os.fspath(source)
    if not os.path.exists(text):   # a table's source: "folder (N files)"
        text = re.sub(r" \(\d+ files\)$", "", text)
        if not os.path.exists(text):
            return None
    source = text
    try:
        up = upstream(source, format, **options)
    except EvalmixError:
        return None
    if up is None or up.rows.empty:
        return None
    return f"{up.line()} How evalmix differs: {up.differs}."
