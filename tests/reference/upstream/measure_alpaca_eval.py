"""Agreement of evalmix's AlpacaEval reading with the published leaderboards, over every
annotations file in a clone of tatsu-lab/alpaca_eval (commit in make_fixtures.py):

    python tests/reference/upstream/measure_alpaca_eval.py PATH/TO/alpaca_eval

For each annotator with a leaderboard CSV, each model's win rate read with the default
(failures dropped) and with failures scored as draws, against the CSV. The numbers are
quoted in docs/formats.md.
"""

from __future__ import annotations

import io
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import pandas as pd

from evalmix.data.readers.alpaca_eval import alpaca_eval_frame
from evalmix.data.readers.upstream import alpaca_eval_leaderboard

COMMIT = "cd543a149df89434d8a54582c0151c0b945c3d20"
BOARDS = {"alpaca_eval_gpt4": "data_AlpacaEval/alpaca_eval_gpt4_leaderboard.csv",
          "weighted_alpaca_eval_gpt4_turbo":
              "data_AlpacaEval_2/weighted_alpaca_eval_gpt4_turbo_leaderboard.csv"}


def main(repo: str) -> None:
    git = ["git", "--git-dir", str(Path(repo) / ".git") if (Path(repo) / ".git").exists()
           else repo]  # a clone or a bare repository
    names = subprocess.run([*git, "ls-tree", "-r", "--name-only", COMMIT], check=True,
                           capture_output=True, text=True).stdout.split()
    for annotator, board_path in BOARDS.items():
        csv = subprocess.run(
            [*git, "show", f"{COMMIT}:src/alpaca_eval/leaderboards/{board_path}"],
            check=True, capture_output=True, text=True).stdout
        board = pd.read_csv(io.StringIO(csv), index_col=0)
        drop_err, se_err, tie_err, n, skipped = [], [], [], 0, 0
        for name in names:
            parts = name.split("/")
            if len(parts) != 4 or parts[2] != annotator or parts[3] != "annotations.json":
                continue
            blob = subprocess.run([*git, "show", f"{COMMIT}:{name}"], capture_output=True)
            if blob.returncode or not blob.stdout.lstrip().startswith(b"["):
                continue   # large files absent from the snapshot
            model = parts[1]
            if model not in board.index:
                continue
            with tempfile.TemporaryDirectory() as tmp:
                f = Path(tmp) / "annotations.json"
                f.write_bytes(blob.stdout)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    try:
                        frame, _ = alpaca_eval_frame(f)
                    except Exception:  # noqa: BLE001 - a self-comparison file
                        skipped += 1
                        continue
            rows = alpaca_eval_leaderboard(frame)
            if len(rows) != 1:
                continue
            n += 1
            ours = rows.iloc[0]
            drop_err.append(abs(ours["win_rate"] - board.loc[model, "win_rate"]))
            se_err.append(abs(ours["standard_error"] - board.loc[model, "standard_error"]))
            pv = frame["preference_value"].fillna(1.5) - 1
            tie_err.append(abs(100 * pv.mean() - board.loc[model, "win_rate"]))
        s = pd.Series(drop_err)
        t = pd.Series(tie_err)
        print(f"{annotator}: {n} models (skipped {skipped}); failures dropped: max |diff| "
              f"{s.max():.2e} points (SE {max(se_err):.2e}); failures as draws: {(t > 1e-9).sum()} differ, max "
              f"{t.max():.3f} points")


if __name__ == "__main__":
    main(sys.argv[1])
