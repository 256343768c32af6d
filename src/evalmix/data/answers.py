"""Per-answer features of pairwise logs: answer length and markdown style.

Length- and style-controlled estimands (:mod:`evalmix.inference.length_control`,
:mod:`evalmix.inference.style_control`) need one number per answer: the answer of
``model_a`` and the answer of ``model_b`` in each row. A pairwise table carries them as
two columns ``<name>_a`` and ``<name>_b`` of its canonical frame; the readers add them
where the logs hold the answer texts:

- AlpacaEval annotations: ``length_a`` / ``length_b``, the characters of ``output_1``
  (the baseline) and ``output_2``, as AlpacaEval's own length-controlled GLM counts them
  (``len(output)``);
- Chatbot Arena battles with ``conversation_a`` / ``conversation_b``: ``length``,
  ``headers``, ``lists`` and ``bold`` of the assistant turns (:func:`answer_features`);
- Chatbot Arena battles with FastChat's ``conv_metadata`` (the ``clean_battle`` exports
  and ``lmarena-ai/arena-human-preference-*`` hold it): ``tokens`` (``sum_assistant_a_tokens``
  / ``_b_``), ``headers``, ``lists`` and ``bold`` as FastChat's style control reads them
  (:func:`metadata_features`; they replace the counts from the texts when both exist).

Any other per-answer column of a table read with :func:`evalmix.read` is used the same
way: pass the source DataFrame as ``columns=`` and name the feature (``"tokens"`` takes the
columns ``tokens_a`` and ``tokens_b``).

The markdown counts follow FastChat's ``count_markdown_elements``
(``fastchat/serve/monitor/add_markdown_info.py``): fenced code blocks are removed first,
then headers are lines starting with 1-6 ``#`` and a space, list items lines starting
with ``1.``-style numbers or ``-``, ``*``, ``+`` and a space, bold spans ``**...**`` or
``__...__`` within a line. FastChat counts length in tokens (tiktoken); evalmix counts
characters, which needs no tokenizer (the controlled estimands standardise the
feature, so the unit changes little; AlpacaEval's GLM counts characters too).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from evalmix.errors import InvalidOptionError, InvalidTableError

if TYPE_CHECKING:
    from evalmix.data.table import EvalTable

__all__ = ["ANSWER_FEATURES", "answer_features", "conversation_text", "answer_columns",
           "with_answer_columns", "attach", "METADATA_FEATURES", "metadata_features"]

#: The features :func:`answer_features` counts.
ANSWER_FEATURES: tuple[str, ...] = ("length", "headers", "lists", "bold")

_CODE = re.compile(r"```[^`]*```")
_HEADER = re.compile(r"^#{1,6}\s", re.MULTILINE)
_LIST = re.compile(r"^\s*(?:\d+\.|[-*+])\s", re.MULTILINE)
_BOLD = re.compile(r"\*\*[^*\n]+\*\*|__[^_\n]+__")


def answer_features(texts: Iterable[Any]) -> pd.DataFrame:
    r"""Length (characters) and markdown counts of each answer text.

    Parameters
    ----------
    texts : iterable of str or None
        The answers (None or NaN: a missing answer, all features NaN).

    Returns
    -------
    pandas.DataFrame
        Columns :data:`ANSWER_FEATURES`: ``length`` (characters, code included),
        ``headers``, ``lists`` and ``bold`` (counted outside fenced code blocks).

    Examples
    --------
    >>> answer_features(["# Title\n- a\n- **b**\n```\n# not a header\n```"]).iloc[0].tolist()
    [42.0, 1.0, 2.0, 1.0]
    """
    rows = []
    for text in texts:
        if not isinstance(text, str):
            rows.append((np.nan,) * len(ANSWER_FEATURES))
            continue
        prose = _CODE.sub("", text)
        rows.append((float(len(text)), float(len(_HEADER.findall(prose))),
                     float(len(_LIST.findall(prose))), float(len(_BOLD.findall(prose)))))
    return pd.DataFrame(rows, columns=list(ANSWER_FEATURES), dtype=float)


#: FastChat's ``conv_metadata`` key of each feature (``{side}``: a or b), as
#: ``construct_style_matrices`` (``fastchat/serve/monitor/elo_analysis.py``) reads them: an
#: int, or a dict of counts (h1-h6 headers, ordered / unordered lists, ``**`` / ``__`` bold)
#: that it sums.
METADATA_FEATURES: dict[str, str] = {"tokens": "sum_assistant_{side}_tokens",
                                     "headers": "header_count_{side}",
                                     "lists": "list_count_{side}",
                                     "bold": "bold_count_{side}"}


def _count(value: Any) -> float:
    if isinstance(value, dict):
        return float(sum(float(v) for v in value.values()))
    if isinstance(value, bool) or not isinstance(value, int | float):
        return np.nan
    return float(value)


def metadata_features(metadata: Iterable[Any]) -> pd.DataFrame:
    """Token length and markdown counts of both answers from Arena's ``conv_metadata``.

    Parameters
    ----------
    metadata : iterable of dict or None
        One ``conv_metadata`` per battle (None or a missing key: NaN).

    Returns
    -------
    pandas.DataFrame
        Columns ``<feature>_a`` and ``<feature>_b`` for each of :data:`METADATA_FEATURES`,
        a dict of counts summed as FastChat sums it.

    Examples
    --------
    >>> meta = {"sum_assistant_a_tokens": 120, "sum_assistant_b_tokens": 80,
    ...         "header_count_a": {"h1": 1, "h2": 2}, "header_count_b": {"h1": 0},
    ...         "list_count_a": {"ordered": 3, "unordered": 1}, "list_count_b": 0,
    ...         "bold_count_a": {"**": 2, "__": 0}, "bold_count_b": {"**": 1}}
    >>> metadata_features([meta]).iloc[0].tolist()
    [120.0, 80.0, 3.0, 0.0, 4.0, 0.0, 2.0, 1.0]
    """
    rows = []
    for meta in metadata:
        meta = meta if isinstance(meta, dict) else {}
        rows.append([_count(meta.get(key.format(side=side), np.nan))
                     for key in METADATA_FEATURES.values() for side in ("a", "b")])
    return pd.DataFrame(rows, columns=[f"{name}_{side}" for name in METADATA_FEATURES
                                       for side in ("a", "b")], dtype=float)


def conversation_text(conversation: Any) -> str | None:
    """The assistant turns of an OpenAI-style conversation (list of ``{"role",
    "content"}``), joined by newlines, as FastChat's ``get_element_counts`` joins them;
    None when it is not such a list."""
    if not isinstance(conversation, list | tuple):
        return None
    parts = [str(t.get("content", "")) for t in conversation
             if isinstance(t, dict) and t.get("role") == "assistant"]
    return "\n".join(parts) if parts else None


def with_answer_columns(frame: pd.DataFrame, texts_a: Iterable[Any],
                        texts_b: Iterable[Any]) -> pd.DataFrame:
    """``frame`` with ``<feature>_a`` / ``<feature>_b`` columns of the two answers."""
    out = frame.copy()
    for side, texts in (("a", texts_a), ("b", texts_b)):
        feats = answer_features(texts)
        for name in ANSWER_FEATURES:
            out[f"{name}_{side}"] = feats[name].to_numpy()
    return out


def answer_columns(table: EvalTable, features: Sequence[str], columns: pd.DataFrame | None = None
                   ) -> tuple[np.ndarray, np.ndarray]:
    """The ``(n_obs, p)`` arrays of each feature for model_a's and model_b's answers.

    A feature ``f`` is the pair of columns ``f_a`` and ``f_b``: taken from the table's
    canonical frame when there, else from ``columns`` (the DataFrame the table was read
    from, aligned by the table's ``row``; the ``columns=`` of
    :func:`evalmix.inference.custom.statistic`).

    Raises
    ------
    InvalidOptionError
        A feature with neither column pair, or not numeric.
    InvalidTableError
        A feature with missing values in the table's rows.
    """
    if isinstance(features, str) or not features:
        raise InvalidOptionError(
            f"features={features!r}: pass a non-empty list of feature names, e.g. "
            "['length'] or ['length', 'headers', 'lists', 'bold']")
    d = table.data
    rows = d["row"].to_numpy()
    out: dict[str, list[np.ndarray]] = {"a": [], "b": []}
    for name in features:
        for side in ("a", "b"):
            col = f"{name}_{side}"
            if col in d.columns:
                values = d[col]
            elif columns is not None and col in columns.columns:
                if int(rows.max(initial=-1)) >= len(columns):
                    raise InvalidOptionError(
                        f"columns= has {len(columns)} rows but the table was read from at "
                        f"least {int(rows.max()) + 1}: pass the DataFrame it was read from")
                values = columns[col].iloc[rows].reset_index(drop=True)
            else:
                where = (f"the table (source {table.source!r})" if columns is None
                         else "the table or columns=")
                raise InvalidOptionError(
                    f"feature {name!r} needs the columns {name}_a and {name}_b (model_a's "
                    f"and model_b's answers), which {where} lacks. The readers add length_a/"
                    "length_b where the logs hold the answers; for other tables pass the "
                    "source DataFrame as columns= with both columns")
            num = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float)
            bad = np.isnan(num)
            if bad.any():
                raise InvalidTableError([
                    f"{table.source}: column {col!r} has {int(bad.sum())} missing or "
                    f"non-numeric values in the rows used (e.g. {values.iloc[int(np.flatnonzero(bad)[0])]!r}, "
                    f"source row {int(rows[bad][0])}); fill them or drop those rows"])
            out[side].append(num)
    return np.column_stack(out["a"]), np.column_stack(out["b"])


def attach(table: EvalTable, frame: pd.DataFrame, columns: Sequence[str]) -> EvalTable:
    """``table`` with ``columns`` of its source ``frame`` (aligned by ``row``) added to the
    canonical frame; columns absent from ``frame`` or all missing are skipped."""
    keep = [c for c in columns if c in frame.columns and frame[c].notna().any()]
    if not keep:
        return table
    data = table.frame()
    rows = data["row"].to_numpy()
    for c in keep:
        data[c] = frame[c].to_numpy(dtype=float)[rows]
    return replace(table, data=data)
