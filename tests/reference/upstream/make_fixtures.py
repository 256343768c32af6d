"""Build tests/fixtures/upstream/ from the upstream repositories (run once; the output
is committed). Needs local clones at the commits below, given as arguments:

    python tests/reference/upstream/make_fixtures.py ALPACA_EVAL FASTCHAT_FORK ARENA_HARD

- tatsu-lab/alpaca_eval @ cd543a149df89434d8a54582c0151c0b945c3d20 (Apache-2.0)
- Stefanstud/FastChat @ 1f5a7b81d3b219f12c18b37511de898556dfa90f (a fork of
  lm-sys/FastChat that commits a real gen_judgment.py output; Apache-2.0)
- lmarena/arena-hard-auto @ 57a9881c845ff88a6eae4c0bdc9a12d44bd4e4a7 (the last commit
  holding data/arena_hard_battles.jsonl; Apache-2.0)

Annotations keep the fields the readers use; AlpacaEval's instruction text is replaced
by its SHA-1 prefix and FastChat's prompts and judgments are left out, to keep the
files small (the statistics do not depend on them).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[2] / "fixtures" / "upstream"
AE_COMMIT = "cd543a149df89434d8a54582c0151c0b945c3d20"
FC_COMMIT = "1f5a7b81d3b219f12c18b37511de898556dfa90f"
AH_COMMIT = "57a9881c845ff88a6eae4c0bdc9a12d44bd4e4a7"
AE_MODELS = ["phi-2", "ghost-7b-alpha", "falcon-40b-instruct", "falcon-7b-instruct"]
AE_KEEP = ("instruction", "dataset", "generator_1", "generator_2", "annotator", "preference")


def show(repo: str, commit: str, path: str) -> str:
    return subprocess.run(["git", "--git-dir", repo, "show", f"{commit}:{path}"],
                          check=True, capture_output=True, text=True).stdout


def trim_alpaca(text: str, first: int | None = None) -> str:
    recs = json.loads(text)[:first]
    out = [{k: (hashlib.sha1(r[k].encode()).hexdigest()[:12] if k == "instruction" else r[k])
            for k in AE_KEEP if k in r} for r in recs]
    return json.dumps(out, separators=(",", ":")) + "\n"


def alpaca(repo: str) -> None:
    root = OUT / "alpaca_eval"
    if root.exists():
        shutil.rmtree(root)
    for m in AE_MODELS:
        f = root / "results" / m / "alpaca_eval_gpt4" / "annotations.json"
        f.parent.mkdir(parents=True)
        f.write_text(trim_alpaca(show(repo, AE_COMMIT,
                                      f"results/{m}/alpaca_eval_gpt4/annotations.json")))
    # a nested copy, as upstream's vicuna-*-v1.5/<annotator>/<annotator>/ folders
    nested = root / "results" / "phi-2" / "alpaca_eval_gpt4" / "alpaca_eval_gpt4"
    nested.mkdir()
    shutil.copy(root / "results/phi-2/alpaca_eval_gpt4/annotations.json", nested)
    # upstream's baseline-vs-itself file (gpt4_1106_preview is AlpacaEval 2's baseline;
    # its first 50 records: the reader skips it whole)
    self_file = root / "results/gpt4_1106_preview/weighted_alpaca_eval_gpt4_turbo"
    self_file.mkdir(parents=True)
    (self_file / "annotations.json").write_text(trim_alpaca(show(
        repo, AE_COMMIT,
        "results/gpt4_1106_preview/weighted_alpaca_eval_gpt4_turbo/annotations.json"), 50))
    (root / "alpaca_eval_gpt4_leaderboard.csv").write_text(show(
        repo, AE_COMMIT,
        "src/alpaca_eval/leaderboards/data_AlpacaEval/alpaca_eval_gpt4_leaderboard.csv"))


def fastchat(repo: str) -> None:
    root = OUT / "fastchat"
    root.mkdir(parents=True, exist_ok=True)
    text = show(repo, FC_COMMIT, "fastchat/llm_judge/data/mt_bench/model_judgment/gpt-4_pair.jsonl")
    drop = {"g1_judgment", "g2_judgment", "g1_user_prompt", "g2_user_prompt"}
    lines = [json.dumps({k: v for k, v in json.loads(line).items() if k not in drop})
             for line in text.splitlines() if line.strip()]
    (root / "gpt-4_pair.jsonl").write_text("\n".join(lines) + "\n")


def arena_hard(repo: str) -> None:
    root = OUT / "arena_hard"
    (root / "data").mkdir(parents=True, exist_ok=True)
    text = show(repo, AH_COMMIT, "data/arena_hard_battles.jsonl")
    (root / "data" / "arena_hard_battles.jsonl").write_text(text)
    # judgment files in v2's shape rebuilt from the battles (the judgment files at that
    # commit are not in the public snapshot): game 1 shows the baseline as A
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "src"))
    from evalmix.data.readers.arena_hard import arena_hard_battles

    records = [json.loads(line) for line in text.splitlines() if line.strip()]
    games, _ = arena_hard_battles(Path("arena_hard_battles.jsonl"), records)
    judge = "gpt-4-1106-preview"   # config/judge_config.yaml at that commit
    by_model: dict[str, list[dict[str, object]]] = {}
    for (qid, a, b), part in games.groupby(["question_id", "model_a", "model_b"], sort=False):
        labels = []
        for g, w, n in part[["game", "winner", "upstream_rows"]].itertuples(index=False):
            first_wins = (w == "model_a") == (g == 1)
            mark = ">>" if n == 3 else ">"
            labels.append({"score": "A=B" if w == "tie" else
                           (f"A{mark}B" if first_wins else f"B{mark}A")})
        by_model.setdefault(b, []).append({"uid": qid, "category": "arena-hard-v0.1",
                                           "judge": judge, "model": b, "baseline": a,
                                           "games": labels})
    folder = root / "model_judgment" / judge
    folder.mkdir(parents=True, exist_ok=True)
    for model, recs in by_model.items():
        (folder / f"{model}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))


if __name__ == "__main__":
    alpaca(sys.argv[1])
    fastchat(sys.argv[2])
    arena_hard(sys.argv[3])
