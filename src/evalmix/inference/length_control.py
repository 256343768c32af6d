"""AlpacaEval 2's length-controlled win rate, with intervals clustered by instruction.

Upstream (``alpaca_eval/metrics/glm_winrate.py``, ``length_controlled_v1``) fits, for
each model ``m`` separately, a logistic GLM of the preference for ``m`` over the baseline
on each instruction ``i``::

    logit P(m preferred on i) = s_m * tanh(std_delta_len_mi) + g_m * d_i + b_m

where ``std_delta_len = (len(baseline output) - len(m's output)) / sd`` (the SD over
``m``'s rows, ``ddof=1``; lengths in characters), ``d_i`` is the instruction's
difficulty, and ``b_m`` multiplies the indicator ``not_gamed_baseline``. The GLM is
regularised towards the baseline: the rows of two "gamed" versions of the baseline
(``<baseline>_verbose`` and ``<baseline>_concise``, prompted to answer long or short)
are added with weight ``0.2 / 2`` and ``not_gamed_baseline = 0``, so they pull the
length slope ``s_m`` and difficulty slope ``g_m`` towards the baseline's own. The
length-controlled win rate is the mean over the instructions of the prediction at no
length difference, ``mean_i expit(b_m + g_m d_i)``; the baseline scores 50%.

What evalmix does the same: the formula, the per-model standardisation of the length
difference, the gamed-baseline regularisation (when the table holds the gamed models;
``gamed=``), probability targets (a weighted annotator's ``P(output_2 preferred)``) and
the prediction averaged over the model's instructions.

What differs, and why:

- **Instruction difficulty.** Upstream downloads ``instruction_difficulty.csv`` from
  Hugging Face at run time (a joint fit on the models of early 2024). evalmix estimates
  it from the annotations at hand, by the joint fit of upstream's
  ``notebooks/instruction_difficulty.ipynb`` (per-model intercept, per-model slope on
  ``tanh(delta_len / sd)``, one effect per instruction), centred to mean zero; or takes
  it as ``difficulty=`` (upstream's follows from the ``glm_preference`` that two
  annotation files of the AlpacaEval repository keep; docs/controlled.md). Without
  regularisation the win rate does not depend on the location and scale of ``d`` (the
  intercept and slope absorb them); with it, only the gamed rows (no intercept) see the
  location.
- **Fit.** Upstream fits by ``LogisticRegressionCV`` (L1 penalty, liblinear, C chosen
  by 5-fold cross-validation); evalmix by weighted maximum likelihood (Newton), with no
  penalty: three coefficients on hundreds of rows need none, and a cross-validated
  penalty makes the estimate depend on a random fold split (on upstream's rows the two
  agree within 0.15 points; docs/controlled.md).
- **Instruction.** Upstream looks the difficulty up by the row's position in the
  annotations, which shifts it in files that lack an annotation; the item here is the
  instruction itself (the reader keys it by its text).
- **Interval.** Upstream's ``lc_standard_error`` is the standard error of the mean of
  the *predicted* preferences over the instructions (``sem``), which treats the
  fitted coefficients as known: it measures how the predictions vary across
  instructions, not how the estimate varies across samples of instructions. evalmix
  resamples instructions (cluster bootstrap: every model's annotations of an
  instruction stay together) and refits everything, difficulty included; the
  percentile interval covers the sampling of instructions and the fitting. Upstream's
  number is kept as ``se_upstream``.

References
----------
Dubois, Y., Galambosi, B., Liang, P. & Hashimoto, T. B. (2024). Length-controlled
AlpacaEval: a simple way to debias automatic evaluators. arXiv:2404.04475.
Davison, A. C. & Hinkley, D. V. (1997). Bootstrap Methods and their Application,
section 3.8 (resampling clusters). Cambridge University Press.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from scipy.special import expit

from evalmix._blas import one_blas_thread
from evalmix._escape import visible
from evalmix.data.answers import answer_columns
from evalmix.data.table import check_table
from evalmix.errors import (
    EvalmixError,
    InvalidOptionError,
    check_count,
    check_level,
    check_number,
)
from evalmix.inference.bootstrap import MIN_REPS
from evalmix.inference.glm_fits import estimate_difficulty, weighted_logit
from evalmix.seeding import SeedLike, seeded_rng
from evalmix.tidy import tidy_rows

if TYPE_CHECKING:
    from evalmix.data.table import EvalTable

__all__ = ["length_controlled_win_rate", "LengthControlResult", "lc_glm"]

#: Upstream's ``regularize_to_baseline_lambda`` (``length_controlled_v1``).
UPSTREAM_LAMBDA = 0.2
@dataclass(frozen=True)
class _Data:
    """One row per (non-baseline model, instruction) annotation, baseline oriented."""

    y: np.ndarray          # P(model preferred over the baseline)
    model: np.ndarray      # model code
    item: np.ndarray       # instruction code
    delta: np.ndarray      # len(baseline answer) - len(model answer)
    models: np.ndarray     # labels
    n_items: int
    items: np.ndarray | None = None  # instruction labels (None in a bootstrap sample)


def _std_tanh(delta: np.ndarray, model: np.ndarray, k: int) -> np.ndarray:
    """``tanh(delta / sd_model)`` with the SD of each model's rows (``ddof=1``, pandas')."""
    n = np.bincount(model, minlength=k).astype(float)
    mean = np.bincount(model, delta, k) / n
    var = np.bincount(model, (delta - mean[model]) ** 2, k) / np.maximum(n - 1, 1)
    sd = np.sqrt(var)
    if np.any(sd[n > 0] == 0):
        bad = int(np.flatnonzero((sd == 0) & (n > 0))[0])
        raise EvalmixError(f"model code {bad}: every answer has the baseline's length, so "
                           "the length difference cannot be standardised")
    return np.tanh(delta / sd[model])


def lc_glm(data: _Data, difficulty: np.ndarray, gamed: Sequence[int], lam: float
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Upstream's per-model GLM: (LC win rates, coefficients (K, 3), sem of predictions).

    Coefficients are ``(length, difficulty, not_gamed_baseline)`` in upstream's order.
    """
    k = data.models.size
    t = _std_tanh(data.delta, data.model, k)
    d_row = difficulty[data.item]
    by_model = [np.flatnonzero(data.model == m) for m in range(k)]
    g_rows = (np.concatenate([by_model[g] for g in gamed]) if gamed and lam > 0
              else np.zeros(0, dtype=int))
    g_w = lam / len(gamed) if gamed else 0.0
    lc = np.full(k, np.nan)
    sem = np.full(k, np.nan)
    coef = np.full((k, 3), np.nan)
    for m in range(k):
        own = by_model[m]
        rows = np.concatenate([own, g_rows])
        X = np.column_stack([t[rows], d_row[rows],
                             np.r_[np.ones(own.size), np.zeros(g_rows.size)]])
        w = np.r_[np.ones(own.size), np.full(g_rows.size, g_w)]
        beta = weighted_logit(X, data.y[rows], w)
        pred = expit(beta[2] + beta[1] * d_row[own])
        coef[m], lc[m] = beta, pred.mean()
        sem[m] = pred.std(ddof=1) / np.sqrt(own.size) if own.size > 1 else np.nan
    return lc, coef, sem


def _raw(data: _Data) -> np.ndarray:
    k = data.models.size
    return np.bincount(data.model, data.y, k) / np.bincount(data.model, minlength=k)


# --------------------------------------------------------------------------- result
@dataclass(frozen=True, eq=False)
class LengthControlResult:
    """AlpacaEval's length-controlled win rate beside the raw one, per model.

    Attributes
    ----------
    models : pandas.DataFrame
        One row per model and estimand (``lc_win_rate``, ``win_rate``) in the result
        contract (:func:`evalmix.tidy.tidy_rows`), with the model's ``model``, the
        ``baseline``, ``n_obs``, the GLM's coefficients (``coef_length``, ``coef_difficulty``,
        ``coef_model``) on the ``lc_win_rate`` rows, and ``se_upstream`` (AlpacaEval's
        ``lc_standard_error`` / ``standard_error`` convention, as a proportion).
    baseline : str
    gamed : tuple of str
        The gamed baselines the GLM was regularised towards (empty: none).
    regularize : float
    difficulty : pandas.Series
        The instruction difficulty used (estimated unless given), by instruction.
    level, reps, seed
    """

    models: pd.DataFrame
    baseline: str
    gamed: tuple[str, ...]
    regularize: float
    difficulty: pd.Series
    level: float
    reps: int
    seed: int | None

    def tidy(self) -> pd.DataFrame:
        """One row per model x estimand (``lc_win_rate`` then ``win_rate``)."""
        return self.models.copy()

    def __str__(self) -> str:
        lc = self.models[self.models["estimand"] == "lc_win_rate"].set_index("model")
        raw = self.models[self.models["estimand"] == "win_rate"].set_index("model")
        reg = (f"regularised towards {visible(', '.join(self.gamed))} (lambda "
               f"{self.regularize:g})"
               if self.gamed else "no gamed baselines in the table: not regularised")
        lines = [
            f"Length-controlled win rate vs {visible(self.baseline)!r} (AlpacaEval 2 GLM; {reg}; "
            f"instruction difficulty {'estimated from these models' if self.difficulty.attrs.get('estimated') else 'given'})",
            f"{self.level:.0%} intervals: cluster bootstrap over instructions ({self.reps} "
            "reps, all fits redone)",
            f"{'model':<36} {'LC win rate':>11}  {'interval':<15} {'raw win rate':>12}  interval",
        ]
        for m in lc.sort_values("estimate", ascending=False).index:
            a, r = lc.loc[m], raw.loc[m]
            lines.append(f"{visible(m)[:36]:<36} {100 * a['estimate']:>10.2f}%  "
                         f"[{100 * a['lo']:5.1f}, {100 * a['hi']:5.1f}]  "
                         f"{100 * r['estimate']:>11.2f}%  [{100 * r['lo']:5.1f}, "
                         f"{100 * r['hi']:5.1f}]")
        return "\n".join(lines)


# --------------------------------------------------------------------------- API
def _oriented(table: EvalTable, baseline: str | None, columns: pd.DataFrame | None
              ) -> tuple[_Data, str]:
    d = table.data
    a = d["model_a"].astype(str).to_numpy()
    b = d["model_b"].astype(str).to_numpy()
    in_every = [m for m in dict.fromkeys((a[0], b[0])) if np.all((a == m) | (b == m))]
    if baseline is None:
        if not in_every:
            raise EvalmixError("the length-controlled win rate compares every model with one "
                               "baseline, but no model appears in every row")
        baseline = str(in_every[0])
    elif baseline not in in_every:
        raise InvalidOptionError(f"baseline={baseline!r} is not in every row of the table "
                                 f"(models in every row: {in_every})")
    len_a, len_b = answer_columns(table, ["length"], columns)
    base_a = a == baseline
    y_a = d["y"].to_numpy(dtype=float)
    y = np.where(base_a, 1.0 - y_a, y_a)
    scored = np.where(base_a, b, a)
    delta = np.where(base_a, len_a[:, 0] - len_b[:, 0], len_b[:, 0] - len_a[:, 0])
    keep = scored != baseline
    models, model = np.unique(scored[keep], return_inverse=True)
    if models.size == 0:
        raise EvalmixError(f"the table only compares {baseline!r} with itself")
    if "item" not in table.clusters:
        raise EvalmixError("the length-controlled win rate needs the instruction as the "
                           "table's 'item' cluster role (the readers set it)")
    items, item = np.unique(d["item"].astype(str).to_numpy()[keep], return_inverse=True)
    out = _Data(y[keep], model, item, delta[keep].astype(float), models, items.size, items)
    return out, baseline


def _gamed_codes(models: np.ndarray, baseline: str, gamed: str | Sequence[str] | None
                 ) -> list[int]:
    if gamed is None:
        return []
    if isinstance(gamed, str):
        if gamed != "auto":
            raise InvalidOptionError(f"gamed={gamed!r}: pass 'auto', None or a list of models")
        names = [f"{baseline}_verbose", f"{baseline}_concise"]
        names = [n for n in names if n in set(models)]
    else:
        names = [str(g) for g in gamed]
        unknown = [n for n in names if n not in set(models)]
        if unknown:
            raise InvalidOptionError(f"gamed={unknown} are not models of the table "
                                     f"(models: {list(models)[:8]}...)")
    return [int(np.searchsorted(models, n)) for n in names]


def _difficulty_from(given: pd.Series, labels: np.ndarray) -> np.ndarray:
    series = pd.Series(given)
    series.index = series.index.astype(str)
    missing = [lab for lab in labels if lab not in series.index]
    if missing:
        raise InvalidOptionError(
            f"difficulty= has no value for {len(missing)} of the {labels.size} instructions "
            f"(e.g. {missing[0]!r}); index it by the table's item labels")
    vals = pd.to_numeric(series.loc[list(labels)], errors="coerce").to_numpy(dtype=float)
    if not np.isfinite(vals).all():
        raise InvalidOptionError("difficulty= holds missing or non-numeric values")
    return vals


def _fit(data: _Data, given: np.ndarray | None, gamed: list[int], lam: float
         ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    k = data.models.size
    if given is None:
        t = _std_tanh(data.delta, data.model, k)
        diff = estimate_difficulty(data.y, data.model, data.item, t, data.n_items)
    else:
        diff = given
    lc, coef, sem = lc_glm(data, diff, gamed, lam)
    return lc, coef, sem, diff


def _resample(data: _Data, rng: np.random.Generator, by_item: list[np.ndarray]
              ) -> tuple[_Data, np.ndarray]:
    pick = rng.integers(0, data.n_items, data.n_items)
    rows = np.concatenate([by_item[i] for i in pick])
    copy = np.repeat(np.arange(pick.size), [by_item[i].size for i in pick])
    return (_Data(data.y[rows], data.model[rows], copy, data.delta[rows], data.models,
                  pick.size), pick)


def length_controlled_win_rate(
    table: EvalTable, *, baseline: str | None = None,
    difficulty: pd.Series | None = None, gamed: str | Sequence[str] | None = "auto",
    regularize: float = UPSTREAM_LAMBDA, columns: pd.DataFrame | None = None,
    reps: int = 200, level: float = 0.95, seed: SeedLike = None,
) -> LengthControlResult:
    """AlpacaEval 2's length-controlled win rate of every model against the baseline.

    Parameters
    ----------
    table : EvalTable
        A pairwise table where one baseline appears in every row, with the instruction
        as the ``item`` cluster and the answer lengths ``length_a`` / ``length_b``
        (:func:`evalmix.data.readers.read_alpaca_eval` gives all three).
    baseline : str, optional
        The common opponent (default: the model in every row).
    difficulty : pandas.Series, optional
        Instruction difficulty indexed by the item labels (e.g. upstream's
        ``instruction_difficulty.csv`` re-indexed by instruction). Default: estimated
        from the table's models (see the module docstring).
    gamed : "auto", list of str or None
        Gamed baselines to regularise towards: ``"auto"`` takes ``<baseline>_verbose``
        and ``<baseline>_concise`` when the table holds them (as upstream); None: none.
    regularize : float
        Total weight of the gamed rows (upstream's 0.2, split evenly between them).
    columns : pandas.DataFrame, optional
        The DataFrame the table was read from, when the lengths are its columns
        ``length_a`` / ``length_b`` rather than the table's.
    reps : int
        Cluster-bootstrap replicates (instructions resampled, everything refitted;
        about 0.5 s each for 56 models x 805 instructions).
    level : float
        Interval level.
    seed : int, Generator or None
        Seed of the resampling (recorded in the result).

    Returns
    -------
    LengthControlResult

    Examples
    --------
    >>> from evalmix.data.readers import read_alpaca_eval
    >>> table = read_alpaca_eval("results/")  # an AlpacaEval results folder  # doctest: +SKIP
    >>> print(length_controlled_win_rate(table, seed=1))  # doctest: +SKIP
    """
    table = check_table(table, "length_controlled_win_rate")
    if table.kind != "pairwise":
        raise EvalmixError("the length-controlled win rate needs a pairwise table")
    if table.ties == "separate":
        raise InvalidOptionError("ties='separate' scores a tie 0 for both models; the "
                                 "length-controlled GLM needs ties='half' (or 'exclude')")
    level = check_level(level)
    reps = check_count("reps", reps, minimum=MIN_REPS)
    lam = check_number("regularize", regularize, low=0.0)
    dat, baseline = _oriented(table, baseline, columns)
    gamed_codes = _gamed_codes(dat.models, baseline, gamed)
    item_labels = np.asarray(dat.items)
    given = None if difficulty is None else _difficulty_from(difficulty, item_labels)
    rng, recorded = seeded_rng(seed)
    by_item = [np.flatnonzero(dat.item == i) for i in range(dat.n_items)]
    k = dat.models.size
    boot_lc, boot_raw = np.full((reps, k), np.nan), np.full((reps, k), np.nan)
    failed = 0
    with one_blas_thread():
        lc, coef, sem, diff = _fit(dat, given, gamed_codes, lam)
        raw = _raw(dat)
        for r in range(reps):
            sample, pick = _resample(dat, rng, by_item)
            try:
                boot_lc[r] = _fit(sample, None if given is None else given[pick],
                                  gamed_codes, lam)[0]
            except EvalmixError:
                failed += 1
                continue
            boot_raw[r] = _raw(sample)
    rows = _rows(dat, lc, raw, coef, sem, boot_lc, boot_raw, level, failed, baseline)
    frame = tidy_rows(rows, method="cluster_bootstrap", cluster="item", scale="probability",
                      level=level, df=np.inf, n_clusters=dat.n_items, reps=reps,
                      seed=recorded)
    series = pd.Series(diff, index=item_labels, name="difficulty")
    series.attrs["estimated"] = given is None
    return LengthControlResult(frame, baseline, tuple(str(dat.models[g]) for g in gamed_codes),
                               lam, series, level, reps, recorded)


def _rows(dat: _Data, lc: np.ndarray, raw: np.ndarray, coef: np.ndarray, sem: np.ndarray,
          boot_lc: np.ndarray, boot_raw: np.ndarray, level: float, failed: int,
          baseline: str) -> list[dict[str, Any]]:
    alpha = (1 - level) / 2
    n = np.bincount(dat.model, minlength=dat.models.size)
    raw_sem = np.sqrt(np.bincount(dat.model, (dat.y - raw[dat.model]) ** 2, dat.models.size)
                      / np.maximum(n - 1, 1) / n)
    note = (f"{failed} bootstrap replicates had no finite fit and were left out" if failed
            else "")
    out = []
    for m, name in enumerate(dat.models):
        for est, point, boot, extra in (
            ("lc_win_rate", lc[m], boot_lc[:, m],
             {"coef_length": coef[m, 0], "coef_difficulty": coef[m, 1],
              "coef_model": coef[m, 2], "se_upstream": sem[m]}),
            ("win_rate", raw[m], boot_raw[:, m], {"se_upstream": raw_sem[m]}),
        ):
            ok = boot[np.isfinite(boot)]
            lo, hi = (np.quantile(ok, [alpha, 1 - alpha]) if ok.size >= MIN_REPS
                      else (np.nan, np.nan))
            out.append({"estimand": est, "contrast": str(name), "estimate": point,
                        "se": ok.std(ddof=1) if ok.size >= MIN_REPS else np.nan,
                        "lo": lo, "hi": hi, "note": note, "model": str(name),
                        "baseline": baseline, "n_obs": int(n[m]), **extra})
    return out
