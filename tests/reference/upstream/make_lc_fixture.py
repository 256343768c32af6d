"""Build tests/fixtures/upstream/alpaca_eval/lc/ from tatsu-lab/alpaca_eval (run once;
the output is committed). Needs a local clone (git directory) at the commit below:

    python tests/reference/upstream/make_lc_fixture.py ALPACA_EVAL_GIT_DIR

- tatsu-lab/alpaca_eval @ cd543a149df89434d8a54582c0151c0b945c3d20 (Apache-2.0)

Writes, for the length-controlled win-rate tests:

- ``annotations.csv.gz``: every ``results/<model>/weighted_alpaca_eval_gpt4_turbo/
  annotations.json`` of the snapshot (56 models against gpt4_1106_preview; files of 4 MiB
  and more, among them gpt4_1106_preview_verbose and _concise, are not in the public
  snapshot this was built from), one row per annotation: ``model``, ``index`` (position
  in the file: the instruction index upstream's GLM looks the difficulty up by, since it
  calls ``reset_index()`` on the annotations), ``instruction`` (the instruction's position
  in AlpacaEval's evaluation set, from the baseline's ``model_outputs.json``; it differs
  from ``index`` in six files that lack one to three annotations: phi-2,
  text_davinci_001, minotaur-13b, gpt35_turbo_instruct, alpaca-7b_verbose and
  alpaca-7b_concise), ``preference`` (rounded to 6 decimals), ``length_a`` /
  ``length_b`` (characters of output_1 and output_2, as upstream's ``str.len()``).
  Instructions and outputs are left out.
- ``gamed_lengths.csv.gz``: the answer lengths of the two gamed baselines
  (``results/gpt4_1106_preview_verbose`` / ``_concise/model_outputs.json``, which the
  snapshot holds although their annotations are absent): ``model``, ``instruction``,
  ``length``.
- ``glm_preference.csv.gz``: the ``glm_preference`` that upstream's GLM wrote into the two
  annotation files that keep it (``results/vicuna-13b-v1.5`` and ``vicuna-7b-v1.5/
  weighted_alpaca_eval_gpt4_turbo/weighted_alpaca_eval_gpt4_turbo/annotations.json``, added
  in 5aa1038, 2024-05-17): ``expit(b + g d_i)`` per instruction, from which the instruction
  difficulty ``d`` of Hugging Face's ``instruction_difficulty.csv`` follows exactly
  (``model``, ``instruction``, ``glm_preference``).
- ``weighted_alpaca_eval_gpt4_turbo_leaderboard.csv``: the AlpacaEval 2 leaderboard
  (``src/alpaca_eval/leaderboards/data_AlpacaEval_2/``), columns win_rate,
  standard_error, length_controlled_winrate, lc_standard_error.
- ``baseline_gpt4_1106_preview.csv``: upstream's fitted GLM weights
  (``src/alpaca_eval/metrics/weights/weighted_alpaca_eval_gpt4_turbo/
  length_controlled_v1/``).
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import subprocess
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[2] / "fixtures" / "upstream" / "alpaca_eval" / "lc"
COMMIT = "cd543a149df89434d8a54582c0151c0b945c3d20"
BASELINE = "gpt4_1106_preview"


def git(repo: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "--git-dir", repo, *args], capture_output=True, text=True)


def _outputs(repo: str, model: str) -> list[dict]:
    return json.loads(git(repo, "show", f"{COMMIT}:results/{model}/model_outputs.json").stdout)


def _gzip(path: Path, text: str) -> None:
    # mtime=0: the same bytes on every run
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9,
                                                mtime=0) as f:
        f.write(text.encode())


def main(repo: str) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    listing = git(repo, "ls-tree", "-r", COMMIT, "results").stdout.splitlines()
    position = {r["instruction"]: i for i, r in enumerate(_outputs(repo, BASELINE))}
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["model", "index", "instruction", "preference", "length_a", "length_b"])
    for line in listing:
        meta, path = line.split("\t")
        parts = path.split("/")
        if len(parts) != 4 or parts[2:] != ["weighted_alpaca_eval_gpt4_turbo",
                                            "annotations.json"] or parts[1] == BASELINE:
            continue
        blob = git(repo, "cat-file", "blob", meta.split()[2])
        if blob.returncode:  # not in the snapshot
            continue
        for i, r in enumerate(json.loads(blob.stdout)):
            assert r["generator_1"] == BASELINE, path  # model: the folder, as upstream's notebook
            pref = r["preference"]
            w.writerow([parts[1], i, position[r["instruction"]],
                        pref if pref is None else round(float(pref), 6),
                        len(r["output_1"] or ""), len(r["output_2"] or "")])
    _gzip(OUT / "annotations.csv.gz", buf.getvalue())
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["model", "instruction", "length"])
    for gamed in (f"{BASELINE}_verbose", f"{BASELINE}_concise"):
        for r in _outputs(repo, gamed):
            w.writerow([gamed, position[r["instruction"]], len(r["output"] or "")])
    _gzip(OUT / "gamed_lengths.csv.gz", buf.getvalue())
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["model", "instruction", "glm_preference"])
    for model in ("vicuna-13b-v1.5", "vicuna-7b-v1.5"):
        nested = (f"{COMMIT}:results/{model}/weighted_alpaca_eval_gpt4_turbo/"
                  "weighted_alpaca_eval_gpt4_turbo/annotations.json")
        for r in json.loads(git(repo, "show", nested).stdout):
            w.writerow([model, position[r["instruction"]], repr(float(r["glm_preference"]))])
    _gzip(OUT / "glm_preference.csv.gz", buf.getvalue())
    lb = git(repo, "show", f"{COMMIT}:src/alpaca_eval/leaderboards/data_AlpacaEval_2/"
             "weighted_alpaca_eval_gpt4_turbo_leaderboard.csv").stdout
    rows = list(csv.reader(io.StringIO(lb)))
    keep = [0] + [rows[0].index(c) for c in ("win_rate", "standard_error",
                                             "length_controlled_winrate", "lc_standard_error")]
    with open(OUT / "weighted_alpaca_eval_gpt4_turbo_leaderboard.csv", "w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows([[r[k] for k in keep] for r in rows])
    (OUT / "baseline_gpt4_1106_preview.csv").write_text(git(
        repo, "show", f"{COMMIT}:src/alpaca_eval/metrics/weights/weighted_alpaca_eval_gpt4_turbo/"
        "length_controlled_v1/baseline_gpt4_1106_preview.csv").stdout)


if __name__ == "__main__":
    main(sys.argv[1])
