"""Small real judge data sets shipped with evalmix (compressed Parquet package data).

Each set is the public data of a published study, reshaped by the evalmix authors to one
row per judgment (the columns of ``../shared/data`` in the source tree, described in
``docs/data.md``). :func:`load` gives the raw long table, :func:`load_table` reads it
as an :class:`~evalmix.data.table.EvalTable` with the roles that fit its design. The
licences and notices are in the ``NOTICE`` file next to the data.

Pairwise sets share these columns: ``item_id``, ``item_group`` (a cluster above the
item), ``model_a``, ``model_b`` (``model_a`` is the baseline in one-baseline designs),
``judge``, ``first_shown`` (``a`` if model_a's answer was shown first) and ``outcome``
(``a``, ``b``, ``tie``, or missing when the judge's output could not be parsed).

Examples
--------
>>> import evalmix.datasets
>>> evalmix.datasets.names()  # doctest: +NORMALIZE_WHITESPACE
['mtbench_position_bias', 'mtbench_repetition', 'devbench_repetition', 'pandalm',
 'wildbench', 'mtbench_human']
>>> evalmix.datasets.load("mtbench_position_bias").shape
(14400, 9)
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.resources import as_file, files
from typing import TYPE_CHECKING, Any

import pandas as pd

from evalmix.errors import InvalidOptionError

if TYPE_CHECKING:
    from evalmix.data.table import EvalTable

__all__ = ["names", "load", "load_table", "mtbench_position_bias", "mtbench_repetition",
           "devbench_repetition", "pandalm", "wildbench", "mtbench_human"]

_PAIRWISE = {"outcome": "outcome", "model_a": "model_a", "model_b": "model_b"}


def _read(name: str) -> pd.DataFrame:
    with as_file(files(__name__).joinpath(f"{name}.parquet")) as path:
        return pd.read_parquet(path)


def mtbench_position_bias() -> pd.DataFrame:
    """MT-Bench pairwise judgments in both presentation orders (Judging the Judges).

    14,400 rows: 80 MT-Bench questions (``item_group``: 8 categories) x 30 models
    against ``vicuna-13b-v1.3`` (``model_a``) x 3 LLM judges (gemini-pro,
    gpt-3.5-turbo-1106, gpt-4-0613; the other 6 of the study's 9 are not public) x
    both orders. ``choice`` is the judge's raw letter in presentation order (``C`` a
    tie, ``N`` unparsed: 32 missing outcomes); 1,010 ties.

    Source: Slimshilin/Position-Bias-Analyzer @ 9f8b7e8e83862cf1ffd9dd2c33f589262efc66ee,
    ``judgment_data/data_MTBench_position_bias/``. Licence: MIT (Copyright (c) 2024
    Slimshilin). Reference: Shi, L. et al. (2024), Judging the Judges: A Systematic
    Study of Position Bias in LLM-as-a-Judge, https://doi.org/10.48550/arXiv.2406.07791.
    The judged answers are other companies' model outputs; their terms may also apply.

    Default roles (:func:`load_table`): pairwise ``outcome``/``model_a``/``model_b``,
    ``first_shown``, ties ``"half"``, clusters ``item=item_id``,
    ``item_group=item_group``, ``judge=judge``; ``item_group`` (the 8 categories, chosen,
    not sampled) is a stratum: held fixed, the interval clusters within it.
    """
    return _read("mtbench_position_bias")


def mtbench_repetition() -> pd.DataFrame:
    """MT-Bench judgments repeated three times by 9 judges (Judging the Judges).

    5,184 rows: 24 questions x 4 models against ``vicuna-13b-v1.3`` x 9 judges x both
    orders x 3 repeated runs (``rep``); 28 missing outcomes.

    Source: Slimshilin/Position-Bias-Analyzer @ 9f8b7e8e83862cf1ffd9dd2c33f589262efc66ee,
    ``judgment_data/data_MTBench_repetition/``. Licence: MIT (Copyright (c) 2024
    Slimshilin). Reference: Shi et al. (2024), https://doi.org/10.48550/arXiv.2406.07791.

    Default roles: as :func:`mtbench_position_bias`, with ``rep`` as the replicate.
    """
    return _read("mtbench_repetition")


def devbench_repetition() -> pd.DataFrame:
    """DevBench software-design judgments repeated three times (Judging the Judges).

    3,888 rows: 18 DevBench items (``item_group``: 3 tasks; ``project``, ``dimension``)
    x 4 models against the human reference (``model_a = "human"``) x 9 judges x both
    orders x 3 runs (``rep``); no ties, 2 missing outcomes.

    Source, licence and reference: as :func:`mtbench_repetition` (same repository and
    commit, ``judgment_data/data_DevBench_repetition/``). Default roles: as
    :func:`mtbench_position_bias`, with ``rep`` as the replicate.
    """
    return _read("devbench_repetition")


def pandalm() -> pd.DataFrame:
    """PandaLM test set: 999 comparisons judged by 3 humans, GPT-3.5 and PandaLM-7B.

    4,995 rows: all 10 pairs of 5 7B models on 170 instructions from 50 apps
    (``item_group``); ``judge_type`` human or llm; ``raw_label`` the source label
    (25 unparsed); 471 ties. Response 1 was always shown first (``first_shown`` is
    always ``a``), so position bias cannot be estimated. The source left out
    comparisons where the human annotators disagreed strongly.

    Source: WeOpenML/PandaLM @ 3871806e, ``data/testset-v1.json`` (human labels),
    ``data/gpt-3.5-turbo-testset-v1.json`` and ``data/pandalm-7b-testset-v1.json``
    (model names from the comparison key, alphabetical). Licence: Apache-2.0 (see ``NOTICE``; modified:
    reshaped to one row per judgment). Reference: Wang, Y. et al. (2024), PandaLM: An
    Automatic Evaluation Benchmark for LLM Instruction Tuning Optimization, ICLR,
    https://doi.org/10.48550/arXiv.2306.05087.

    Default roles: pairwise, no order column, ties ``"half"``, clusters
    ``item=item_id``, ``item_group=item_group``, ``judge=judge``.
    """
    return _read("pandalm")


def wildbench() -> pd.DataFrame:
    """WildBench single-answer scores (1-10) of 15 models on 1,024 real-user tasks.

    29,653 rows: ``judge`` gpt-4-turbo-2024-04-09 or gpt-4o-2024-05-13, ``judge_run``
    the judge and template version (gpt-4o's v2.0625 re-scored the same answers and
    agrees with v2.0522 on 98% of them: not an independent replicate);
    ``output_sha1`` tells identical answers apart.

    Source: allenai/WildBench @ d6b8dcaf377d173d031980f97c16e1a82618c03d,
    ``eval_results/v2.0522/`` and ``eval_results/v2.0625/`` (``score.v2``). Licence:
    Apache-2.0 (see ``NOTICE``; modified: reshaped to one row per score). Reference:
    Lin, B. Y. et al. (2024), WildBench: Benchmarking LLMs with Challenging Tasks from
    Real Users in the Wild, https://doi.org/10.48550/arXiv.2406.04770.

    Default roles: scores ``outcome=score``, ``condition=model``, clusters
    ``item=item_id``, ``judge=judge``.
    """
    return _read("wildbench")


def mtbench_human() -> pd.DataFrame:
    """MT-Bench pairwise verdicts of 65 named human judges and GPT-4 on the same items.

    2,983 rows: 1,232 comparisons (80 MT-Bench questions, ``item_group`` their 8
    categories, x pairs of 6 models x 2 ``turn``s) with 1,751 votes of experts and
    authors (``rater`` ``expert_*`` / ``author_*``, ``rater_kind`` ``human``) and GPT-4's
    pairwise verdict on each (``rater_kind`` ``llm``; ``tie`` also where its two orders
    disagreed); ``raw_label`` the source label. The 1,751 of the release's 3,355 human
    votes whose model order exists in the GPT-4 split. GPT-4 agrees with the human votes
    on 66.8% of (comparison, vote) pairs of turn 1 with ties and 85.8% without (Zheng et
    al. report 66% and 85%; :func:`evalmix.agreement` reproduces the 66.8% / 85.8%).

    Source: Vibhanshu-555/Human-Aligned-LLM-Evaluation-Audit @
    d85394d71800d4d5081b5a18096f581aeeac4d66,
    ``data/processed/human_gpt_comparison.zip``; licence MIT (Copyright (c) 2025
    Vibhanshu Dubey). Underlying data: ``lmsys/mt_bench_human_judgments``, CC BY 4.0
    (see ``NOTICE``). Reference: Zheng, L. et al. (2023), Judging LLM-as-a-Judge with
    MT-Bench and Chatbot Arena, NeurIPS, https://doi.org/10.48550/arXiv.2306.05685.
    The judged answers are other companies' model outputs; their terms may also apply.

    Default roles (:func:`load_table`): pairwise ``outcome``/``model_a``/``model_b``, ties
    ``"half"``, clusters ``item=item_id``, ``item_group=item_group`` (a stratum),
    ``judge=rater``.
    For agreement and human-anchored estimates pass the frame to
    :func:`evalmix.agreement` (it reads ``rater_kind``).
    """
    return _read("mtbench_human")


_LOADERS: dict[str, Callable[[], pd.DataFrame]] = {
    "mtbench_position_bias": mtbench_position_bias,
    "mtbench_repetition": mtbench_repetition,
    "devbench_repetition": devbench_repetition,
    "pandalm": pandalm,
    "wildbench": wildbench,
    "mtbench_human": mtbench_human,
}

_CLUSTERS = {"item": "item_id", "item_group": "item_group", "judge": "judge"}
# MT-Bench's 8 categories and DevBench's 3 tasks were chosen, not sampled: strata (held
# fixed; the interval clusters within them), as the readers declare for their formats.
_STRATA = {"strata": ["item_group"]}
_ROLES: dict[str, dict[str, Any]] = {
    "mtbench_position_bias": {**_PAIRWISE, "first_shown": "first_shown", "ties": "half",
                              "clusters": _CLUSTERS, **_STRATA},
    "mtbench_repetition": {**_PAIRWISE, "first_shown": "first_shown", "ties": "half",
                           "clusters": _CLUSTERS, "replicate": "rep", **_STRATA},
    "devbench_repetition": {**_PAIRWISE, "first_shown": "first_shown", "ties": "half",
                            "clusters": _CLUSTERS, "replicate": "rep", **_STRATA},
    "pandalm": {**_PAIRWISE, "ties": "half", "clusters": _CLUSTERS},
    "wildbench": {"outcome": "score", "condition": "model",
                  "clusters": {"item": "item_id", "judge": "judge"}},
    "mtbench_human": {**_PAIRWISE, "ties": "half",
                      "clusters": {"item": "item_id", "item_group": "item_group",
                                   "judge": "rater"}, **_STRATA},
}


def names() -> list[str]:
    """Names of the bundled data sets, for :func:`load` and :func:`load_table`."""
    return list(_LOADERS)


def _check(name: str) -> str:
    if name not in _LOADERS:
        raise InvalidOptionError(
            f"no bundled data set named {name!r}; choose one of "
            f"{', '.join(repr(n) for n in _LOADERS)}"
        )
    return name


def load(name: str) -> pd.DataFrame:
    """The raw long table of data set ``name`` (one row per judgment or score).

    The columns and values are those of the CSV in ``../shared/data`` read with
    :func:`pandas.read_csv` defaults (missing outcomes are NaN). Each call returns a
    new frame. The source, commit and licence are in the docstring of the loader of
    the same name (e.g. :func:`mtbench_position_bias`).
    """
    return _LOADERS[_check(name)]()


def load_table(name: str, **read_kwargs: Any) -> EvalTable:
    """Data set ``name`` read as an :class:`~evalmix.data.table.EvalTable`.

    Parameters
    ----------
    name : str
        One of :func:`names`.
    **read_kwargs
        Passed to :func:`evalmix.read`, replacing the data set's default roles key by
        key (``clusters=`` replaces the default clusters as a whole). Rows dropped
        (missing outcomes) are counted in ``table.dropped`` and announced by
        :class:`~evalmix.errors.DroppedRowsWarning`, as by :func:`evalmix.read`.

    Examples
    --------
    >>> import evalmix.datasets
    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")  # dropped 32 of 14400 rows (32 na outcome)
    ...     t = evalmix.datasets.load_table("mtbench_position_bias")
    >>> t.n_obs, dict(t.dropped)
    (14368, {'na_outcome': 32})
    """
    from evalmix.data.read import read

    spec = {**_ROLES[_check(name)], **read_kwargs}
    if "clusters" in read_kwargs and "strata" not in read_kwargs and "strata" in spec:
        # the user's clusters replace the defaults: keep only the strata still among them
        kept = [s for s in spec["strata"] if s in (read_kwargs["clusters"] or {})]
        spec["strata"] = kept or None
    with as_file(files(__name__).joinpath(f"{name}.parquet")) as path:
        return read(path, **spec)
