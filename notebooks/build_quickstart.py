"""Build and execute notebooks/quickstart.ipynb without Jupyter.

Each code cell runs in one shared namespace (cwd = this folder); stdout, warnings and
the value of the last expression become the cell's outputs (text/plain, plus text/html
for objects with ``_repr_html_``), in nbformat 4 JSON. Re-run after changing the cells:

    .venv/bin/python notebooks/build_quickstart.py
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import os
import traceback
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent

CELLS: list[tuple[str, str]] = [
    ("markdown", """# evalmix quickstart: read a pairwise judge table and describe its design

`evalmix.read` validates a long-format eval table once and returns an immutable
`EvalTable`; `describe()` says what the design looks like: rows used and dropped,
levels per cluster factor, which factors are crossed or nested, and the AB/BA balance.

The data: *Judging the Judges* (Shi et al. 2024, arXiv:2406.07791), MT-Bench part: 80
questions, 30 models each compared with vicuna-13b-v1.3 by 3 LLM judges, every
comparison in both presentation orders (`../../shared/data`, MIT licence)."""),
    ("code", """from pathlib import Path

import evalmix

DATA = Path("../../shared/data/judging_the_judges/jtj_MTBench_position_bias.csv")
print(DATA.read_text().splitlines()[:3])"""),
    ("markdown", """Map columns to roles: the verdict (`a`/`b`/`tie`/NA), the two models, which answer
was shown first, and the cluster factors (free role names). Rows with an NA verdict are
dropped, counted, and a `DroppedRowsWarning` says so."""),
    ("code", """table = evalmix.read(
    DATA,
    outcome="outcome",
    model_a="model_a",
    model_b="model_b",
    first_shown="first_shown",
    clusters={"item": "item_id", "category": "item_group", "judge": "judge"},
    ties="half",
)
table"""),
    ("code", """summary = table.describe()
print(summary.to_markdown()[:1500])"""),
    ("code", "summary.factors"),
    ("code", "summary.relations"),
    ("code", "summary.pairs"),
    ("markdown", """The canonical frame: `y` is 1 when model_a (here vicuna-13b-v1.3) wins, 0 when
model_b wins, 0.5 for a tie under `ties="half"`; `pair_id` links the AB and BA records
of one comparison; `a_first` says whether model_a's answer was shown first."""),
    ("code", "table.data.head()"),
    ("markdown", """Other tie policies: `"exclude"` drops ties (counted), `"separate"` keeps them as a
third verdict with `y` the strict win of model_a. The same roles can live in a TOML file
(`docs/examples/roles.toml`); keyword arguments override it."""),
    ("code", """import warnings

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    excluded = evalmix.read(DATA, roles="../docs/examples/roles.toml", ties="exclude")
dict(excluded.dropped), excluded.n_obs"""),
]


def _display(value: object) -> dict:
    data = {"text/plain": repr(value)}
    html = getattr(value, "_repr_html_", None)
    if callable(html):
        with contextlib.suppress(Exception):
            out = html()
            if out:
                data["text/html"] = out
    return data


def run_cell(source: str, ns: dict, count: int) -> list[dict]:
    outputs: list[dict] = []
    buf = io.StringIO()
    tree = ast.parse(source)
    last = tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    body = tree.body[:-1] if last is not None else tree.body
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(buf):
        warnings.simplefilter("always")
        try:
            exec(compile(ast.Module(body=body, type_ignores=[]), "<cell>", "exec"), ns)
            value = (eval(compile(ast.Expression(last.value), "<cell>", "eval"), ns)
                     if last is not None else None)
        except Exception as exc:  # keep the traceback in the notebook, like Jupyter
            outputs.append({"output_type": "error", "ename": type(exc).__name__,
                            "evalue": str(exc),
                            "traceback": traceback.format_exc().splitlines()})
            value = None
    if buf.getvalue():
        outputs.insert(0, {"output_type": "stream", "name": "stdout", "text": buf.getvalue()})
    if caught:
        text = "".join(f"{w.category.__name__}: {w.message}\n" for w in caught)
        outputs.insert(0, {"output_type": "stream", "name": "stderr", "text": text})
    if value is not None:
        outputs.append({"output_type": "execute_result", "execution_count": count,
                        "data": _display(value), "metadata": {}})
    return outputs


def main() -> None:
    os.chdir(HERE)
    ns: dict = {"__name__": "__main__"}
    cells = []
    count = 0
    for kind, source in CELLS:
        lines = source.splitlines(keepends=True)
        if kind == "markdown":
            cells.append({"cell_type": "markdown", "metadata": {}, "source": lines})
            continue
        count += 1
        outputs = run_cell(source, ns, count)
        for o in outputs:
            if o["output_type"] == "error":
                raise SystemExit("cell failed:\n" + "\n".join(o["traceback"]))
        cells.append({"cell_type": "code", "execution_count": count, "metadata": {},
                      "outputs": outputs, "source": lines})
    nb = {
        "cells": cells,
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    for i, cell in enumerate(nb["cells"]):
        cell["id"] = f"cell-{i:02d}"
    (HERE / "quickstart.ipynb").write_text(json.dumps(nb, indent=1) + "\n")
    print(f"wrote {HERE / 'quickstart.ipynb'} ({count} code cells executed)")


if __name__ == "__main__":
    main()
