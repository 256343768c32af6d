"""Reference numbers from the upstream tools' own code, run on tests/fixtures/upstream/.

The tools are not installable here (AlpacaEval and arena-hard pull in API clients and
torch), so the functions that compute the headline numbers are copied below verbatim
(only the printing and file globbing around them trimmed) from:

- tatsu-lab/alpaca_eval @ cd543a149df89434d8a54582c0151c0b945c3d20,
  src/alpaca_eval/metrics/helpers.py (BaseScoringRule.describe_head2head,
  AbsoluteScoringRule) and metrics/winrate.py (get_winrate); utils.py
  (validate_alpacaeval_preference). Apache-2.0.
- lm-sys/FastChat @ 0e6d3e4beaab66f4d3f93db72541a4abab8af28d,
  fastchat/llm_judge/show_result.py (display_result_pairwise). Apache-2.0.
- lmarena/arena-hard-auto @ 196f6b826783b3da7310e361a805fa36f0be83f3,
  show_result.py (load_judgments, print_leaderboard). Apache-2.0.
- lmarena/arena-hard-auto @ 57a9881c845ff88a6eae4c0bdc9a12d44bd4e4a7 (v0.1, the code
  that wrote data/arena_hard_battles.jsonl): utils_math.py (compute_mle_elo,
  get_bootstrap_result, predict_win_rate, get_win_rate_column) and the score/interval
  part of show_result.py's main. Needs scikit-learn (a throwaway environment with the
  same pandas and numpy as the test environment: the versions are recorded below).

Run from the repository root: ``python tests/reference/upstream/upstream_reference.py``;
it writes upstream_reference.json beside itself (committed; tests read it).
"""

from __future__ import annotations

import json
import os
from glob import glob
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
FIX = HERE.parents[1] / "fixtures" / "upstream"


# ----------------------------------------------------------------- alpaca_eval (copied)
def validate_alpacaeval_preference(x: float, is_allow_nan: bool = True) -> bool:
    """Validate the preference annotation."""
    return (1 <= x <= 2) or (is_allow_nan and np.isnan(x))


def preprocess_predictions(predictions):
    return pd.Series(predictions).replace({0: 1.5}).astype(float)


def _idcs_draws(predictions):
    return (predictions == 1.5) | (predictions == 0)


def describe_head2head(predictions):
    """Compute the generalized win rate of the prediction."""
    predictions = preprocess_predictions(predictions)
    n_draws = _idcs_draws(predictions).sum()

    # makes it easier to work with
    predictions = predictions.astype(float).replace({0.0: 1.5})

    is_preference = predictions.apply(validate_alpacaeval_preference, is_allow_nan=False)

    predictions = predictions[is_preference] - 1

    n_wins = (predictions > 0.5).sum()
    n_wins_base = (predictions < 0.5).sum()
    n_total = len(predictions)

    return dict(
        win_rate=predictions.mean() * 100,
        standard_error=predictions.sem() * 100,
        n_wins=n_wins,
        n_wins_base=n_wins_base,
        n_draws=n_draws,
        n_total=n_total,
    )


def alpaca_eval() -> list[dict]:
    out = []
    for f in sorted((FIX / "alpaca_eval" / "results").rglob("annotations.json")):
        annotations = pd.DataFrame(json.loads(f.read_text()))
        res = describe_head2head(annotations["preference"])   # get_winrate
        out.append({"file": str(f.relative_to(FIX)),
                    **{k: float(v) for k, v in res.items()}})
    return out


# ----------------------------------------------------------------- FastChat (copied)
def display_result_pairwise(input_file, baseline_model=None, model_list=None):
    df_all = pd.read_json(input_file, lines=True)
    df_all = df_all[(df_all["g1_winner"] != "error") & (df_all["g2_winner"] != "error")]

    list_res = []
    # traverse df row by row
    for index, row in df_all.iterrows():  # noqa: B007 (verbatim)
        if model_list is not None and row["model_1"] not in model_list:
            continue
        if baseline_model is not None:
            if baseline_model not in [row["model_1"], row["model_2"]]:
                continue
        if row["g1_winner"] == "tie" or row["g1_winner"] != row["g2_winner"]:
            list_res.append({"model": row["model_1"], "win": 0, "loss": 0, "tie": 1})
            list_res.append({"model": row["model_2"], "win": 0, "loss": 0, "tie": 1})
        else:
            if row["g1_winner"] == "model_1":
                winner = row["model_1"]
                loser = row["model_2"]
            else:
                winner = row["model_2"]
                loser = row["model_1"]
            list_res.append({"model": winner, "win": 1, "loss": 0, "tie": 0})
            list_res.append({"model": loser, "win": 0, "loss": 1, "tie": 0})

    df = pd.DataFrame(list_res)
    df = df.groupby(["model"]).sum()

    # remove baseline model
    if baseline_model is not None:
        df = df[df.index != baseline_model]
    # add win rate
    df["win_rate"] = df["win"] / (df["win"] + df["loss"] + df["tie"])
    df["loss_rate"] = df["loss"] / (df["win"] + df["loss"] + df["tie"])
    # each tie counts as 0.5 win + 0.5 loss
    df["win_rate_adjusted"] = (df["win"] + 0.5 * df["tie"]) / (
        df["win"] + df["loss"] + df["tie"]
    )
    return df.sort_values(by="win_rate_adjusted", ascending=False)


def fastchat() -> dict:
    f = FIX / "fastchat" / "gpt-4_pair.jsonl"
    return {mode: display_result_pairwise(f, base).reset_index().to_dict("records")
            for mode, base in (("pairwise-all", None), ("pairwise-baseline", "phi-3"))}


# ----------------------------------------------------------------- arena-hard (copied)
def load_judgments(judge_dir, weight=3):
    dfs = [pd.read_json(f, lines=True) for f in sorted(glob(os.path.join(judge_dir, "*.jsonl")))]
    data = pd.concat(dfs).reset_index(drop=True)

    null_indices = data.games.map(lambda x: x[0] is None or x[1] is None or x[0]['score'] is None or x[1]['score'] is None)
    _data = data[~null_indices].reset_index(drop=True)

    # map label to score
    label_to_score = {
        "A>B": [1],
        "A>>B": [1] * weight,
        "A=B": [0.5],
        "A<<B": [0] * weight,
        "A<B": [0],
        "B>A": [0],
        "B>>A": [0] * weight,
        "B=A": [0.5],
        "B<<A": [1] * weight,
        "B<A": [1],
    }

    _data['scores'] = _data.games.map(
        lambda x: label_to_score[x[1]['score']] + [1 - s for s in label_to_score[x[0]['score']]]
    )

    battles = _data[['uid', 'model', 'category', 'scores']].explode('scores').reset_index(drop=True)

    return battles


def print_leaderboard(battles):
    _battles = battles.drop(columns=['category'])[['model', 'scores']]

    # remove model path
    _battles['model'] = _battles['model'].map(lambda x: x.split('/')[-1])

    bootstraps = pd.concat([
        _battles.groupby("model").sample(frac=1.0, replace=True).groupby("model").mean()
        for _ in range(100)
    ])

    bootstraps["scores"] = bootstraps["scores"].astype(float)

    mean_scores = bootstraps.groupby("model").mean().reset_index()
    lower_scores = bootstraps.groupby("model").quantile(0.05).reset_index().rename(columns={"scores": "lower"})
    upper_scores = bootstraps.groupby("model").quantile(0.95).reset_index().rename(columns={"scores": "upper"})
    return mean_scores.merge(lower_scores, on="model").merge(upper_scores, on="model")


def arena_hard(seed: int = 0) -> dict:
    np.random.seed(seed)  # noqa: NPY002 (upstream draws from the global state)
    judged = print_leaderboard(load_judgments(
        str(FIX / "arena_hard" / "model_judgment" / "gpt-4-1106-preview")))
    # the battles file's rows (model_b's score per row, x3 copies as written), in file
    # order, through the same leaderboard code
    rows = pd.read_json(FIX / "arena_hard" / "data" / "arena_hard_battles.jsonl", lines=True)
    battles = pd.DataFrame({"model": rows["model_b"], "category": "arena-hard-v0.1",
                            "scores": rows["winner"].map({"model_b": 1, "model_a": 0,
                                                          "tie": 0.5}).astype(object)})
    np.random.seed(seed)  # noqa: NPY002 (upstream draws from the global state)
    from_battles = print_leaderboard(battles)
    return {"seed": seed, "judgments": judged.to_dict("records"),
            "battles": from_battles.to_dict("records")}


# ----------------------------------------------------------------- arena-hard v0.1 (copied)
def compute_mle_elo(df, SCALE=400, BASE=10, INIT_RATING=1000, baseline_model="gpt-4-0314"):
    import math

    from sklearn.linear_model import LogisticRegression

    models = pd.concat([df["model_a"], df["model_b"]]).unique()
    models = pd.Series(np.arange(len(models)), index=models)

    # duplicate battles
    df = pd.concat([df, df], ignore_index=True)
    p = len(models.index)
    n = df.shape[0]

    X = np.zeros([n, p])
    X[np.arange(n), models[df["model_a"]]] = +math.log(BASE)
    X[np.arange(n), models[df["model_b"]]] = -math.log(BASE)

    # one A win => two A win
    Y = np.zeros(n)
    Y[df["winner"] == "model_a"] = 1.0

    # one tie => one A win + one B win
    # find tie + tie (both bad) index
    tie_idx = (df["winner"] == "tie") | (df["winner"] == "tie (bothbad)")
    tie_idx[len(tie_idx)//2:] = False
    Y[tie_idx] = 1.0

    lr = LogisticRegression(fit_intercept=False, penalty=None, tol=1e-8)
    lr.fit(X,Y)

    elo_scores = SCALE * lr.coef_[0] + INIT_RATING

    # set anchor as gpt-4-0314 = 1000
    if baseline_model in models.index:
        elo_scores += 1000 - elo_scores[models[baseline_model]]
    return pd.Series(elo_scores, index=models.index).sort_values(ascending=False)


def get_bootstrap_result(battles, func_compute_elo, num_round, baseline_model="gpt-4-0314"):
    import inspect

    rows = []
    kwargs = {}
    if baseline_model in inspect.signature(func_compute_elo).parameters:
        kwargs[baseline_model] = baseline_model
    for _ in range(num_round):
        rows.append(func_compute_elo(battles.sample(frac=1.0, replace=True), **kwargs))
    df = pd.DataFrame(rows)
    return df[df.median().sort_values(ascending=False).index]


def predict_win_rate(elo_ratings, SCALE=400, BASE=10, INIT_RATING=1000):
    from collections import defaultdict

    names = sorted(list(elo_ratings.keys()))
    wins = defaultdict(lambda: defaultdict(lambda: 0))
    for a in names:
        for b in names:
            ea = 1 / (1 + BASE ** ((elo_ratings[b] - elo_ratings[a]) / SCALE))
            wins[a][b] = ea
            wins[b][a] = 1 - ea

    data = {
        a: [wins[a][b] if a != b else np.nan for b in names]
        for a in names
    }

    df = pd.DataFrame(data, index=names)
    df.index.name = "model_a"
    df.columns.name = "model_b"
    return df.T


def get_win_rate_column(df, column, baseline="gpt-4-0314"):
    to_dict = df[["model", column]].set_index("model").to_dict()[column]
    win_rate_table = predict_win_rate(to_dict)
    return win_rate_table[baseline].fillna(0.5).apply(lambda x: round(x * 100, 2))


def arena_hard_v01() -> list[dict]:
    battles = pd.read_json(FIX / "arena_hard" / "data" / "arena_hard_battles.jsonl", lines=True)
    baseline = "claude-3-haiku-20240307"
    np.random.seed(42)  # noqa: NPY002 (utils_math.py does this at import)
    bt_model_coef = compute_mle_elo(battles, baseline_model=baseline)
    bootstrap_model_coef = get_bootstrap_result(battles, compute_mle_elo, 100, baseline)
    stats = pd.DataFrame()
    for i, model in enumerate(bt_model_coef.index):
        stats.at[i, "model"] = model
        stats.at[i, "score"] = bt_model_coef[model]
        stats.at[i, "lower"] = np.percentile(bootstrap_model_coef[model], 2.5)
        stats.at[i, "upper"] = np.percentile(bootstrap_model_coef[model], 97.5)
    stats.sort_values(by="model", inplace=True)
    stats["score"] = get_win_rate_column(stats, "score", baseline).tolist()
    stats["lower"] = get_win_rate_column(stats, "lower", baseline).tolist()
    stats["upper"] = get_win_rate_column(stats, "upper", baseline).tolist()
    return stats.to_dict("records")


if __name__ == "__main__":
    out = {"pandas": pd.__version__, "numpy": np.__version__, "alpaca_eval": alpaca_eval(),
           "fastchat": fastchat(), "arena_hard": arena_hard(),
           "arena_hard_v01": arena_hard_v01()}
    (HERE / "upstream_reference.json").write_text(json.dumps(out, indent=1, default=float) + "\n")
    print(json.dumps(out, indent=1, default=float)[:3000])
