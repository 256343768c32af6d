"""Issue 12, reading: no silent wrong number from a badly coded or badly saved table.

One test per class: mostly unreadable outcomes are refused (``on_unparsed``), winner
names match case- and space-insensitively, verdict-word model names are refused unless
``outcome_kind`` says what the column holds, duplicated column names in CSV and JSONL are
refused, huge outcomes are refused, duplicate score rows are kept and counted, 'NA'-like
ids read the same from CSV, Parquet and JSONL, NFC/NFD labels are one label, and file
problems (encoding, separator, JSONL line, BOM) get a message that names the fix.
"""

from __future__ import annotations

import unicodedata
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import evalmix
from evalmix.data.parse import MAX_ABS_OUTCOME, UNPARSED_SHARE
from evalmix.errors import (
    DroppedRowsWarning,
    EvalmixError,
    InvalidOptionError,
    InvalidTableError,
)

PAIR = dict(outcome="outcome", model_a="model_a", model_b="model_b", clusters={"item": "item"})


def winner_frame(n: int = 48) -> pd.DataFrame:
    """base vs new, the outcome naming the winner: 1/3 base, 2/3 new."""
    return pd.DataFrame({"item": [f"i{i}" for i in range(n)], "model_a": "base",
                         "model_b": "new",
                         "outcome": ["base" if i % 3 == 0 else "new" for i in range(n)]})


# ------------------------------------------------------------ unreadable outcomes
def test_mostly_unreadable_outcomes_are_refused_not_cut_down():
    # "100%"/"0%" strings among numbers: 56 of 60 would be dropped
    df = pd.DataFrame({"item": [f"i{i % 10}" for i in range(60)],
                       "score": ["100%" if i % 3 else "0%" for i in range(56)] + [1, 0, 1, 0],
                       "run": range(60)})
    with pytest.raises(InvalidTableError) as ei:
        evalmix.read(df, outcome="score", clusters={"item": "item"})
    msg = str(ei.value)
    assert "56 of 60 non-missing outcomes in column 'score' cannot be read" in msg
    assert "'100%'" in msg and "on_unparsed='drop'" in msg
    with pytest.warns(DroppedRowsWarning, match=r"56 unparsed outcome \(e.g. '0%', '100%'\)"):
        t = evalmix.read(df, outcome="score", clusters={"item": "item"}, on_unparsed="drop")
    assert t.n_obs == 4 and dict(t.dropped) == {"unparsed_outcome": 56}


def test_a_small_share_of_unreadable_outcomes_is_dropped_and_shown():
    n = 100
    score = [i % 2 for i in range(n)]
    score[7] = "n.a."
    score[40] = "?"  # 2 of 100: within the 5% share
    df = pd.DataFrame({"item": [f"i{i % 10}" for i in range(n)], "score": score,
                       "run": range(n)})
    assert 2 <= UNPARSED_SHARE * n
    with pytest.warns(DroppedRowsWarning, match=r"2 unparsed outcome \(e.g. 'n.a.', '\?'\)"):
        t = evalmix.read(df, outcome="score", clusters={"item": "item"})
    assert t.n_obs == 98
    with pytest.raises(InvalidTableError, match="With on_unparsed='error', any unreadable"):
        evalmix.read(df, outcome="score", clusters={"item": "item"}, on_unparsed="error")
    with pytest.raises(InvalidOptionError, match="on_unparsed='sometimes'"):
        evalmix.read(df, outcome="score", on_unparsed="sometimes")


def test_winner_names_match_ignoring_case_and_surrounding_spaces():
    df = winner_frame()
    truth = float(np.mean(df["outcome"] == "new"))  # win rate of model_b
    shouty = df.assign(outcome=df["outcome"].map({"base": "BASE", "new": " New "}))
    with warnings.catch_warnings():
        warnings.simplefilter("error", DroppedRowsWarning)  # nothing may be dropped
        t = evalmix.read(shouty, **PAIR)
    assert t.n_obs == 48 and not t.dropped
    assert 1 - t.y.mean() == pytest.approx(truth)  # y = 1 when model_a (base) wins
    assert t.y.tolist() == evalmix.read(df, **PAIR).y.tolist()


def test_model_names_differing_only_in_case_use_the_exact_spelling():
    df = pd.DataFrame({"item": ["i1", "i2", "i3", "i4"], "model_a": "GPT", "model_b": "gpt",
                       "outcome": ["GPT", "gpt", "gpt", "Gpt"]})
    with pytest.raises(InvalidTableError, match=r"1 of 4 non-missing outcomes.*'Gpt'"):
        evalmix.read(df, **PAIR)
    t = evalmix.read(df.iloc[:3], **PAIR)
    assert t.y.tolist() == [1.0, 0.0, 0.0]


@pytest.mark.parametrize("names, outcome", [
    (("b", "a"), "a"),        # models called a and b, listed swapped
    (("tie", "gpt"), "tie"),  # a model called tie
    (("0", "1"), 1),          # models called 0 and 1, numeric outcome
])
def test_model_names_that_are_verdict_words_are_refused(names, outcome):
    a, b = names
    other = {"a": "b", "tie": b, 1: 0}[outcome]
    df = pd.DataFrame({"item": [f"i{i}" for i in range(6)], "model_a": a, "model_b": b,
                       "outcome": [outcome] * 3 + [other] * 3})
    with pytest.raises(InvalidTableError) as ei:
        evalmix.read(df, **PAIR)
    msg = str(ei.value)
    assert "is ambiguous" in msg and "outcome_kind='winner'" in msg
    assert "outcome_kind='verdict'" in msg
    winner = evalmix.read(df, **PAIR, outcome_kind="winner")
    if a == "tie":  # 'tie' is model_a's win, not a tie; as a verdict it is a tie
        assert winner.y.tolist() == [1, 1, 1, 0, 0, 0] and winner.n_ties == 0
        with pytest.warns(DroppedRowsWarning, match="3 unparsed"):  # 'gpt' is no verdict
            verdict = evalmix.read(df, **PAIR, outcome_kind="verdict", on_unparsed="drop")
        assert verdict.n_ties == 3
    else:  # ('a' | 1) as a name is model_b's win, as a verdict model_a's
        assert winner.y.tolist() == [0, 0, 0, 1, 1, 1]
        verdict = evalmix.read(df, **PAIR, outcome_kind="verdict")
        assert verdict.y.tolist() == [1, 1, 1, 0, 0, 0]


def test_verdict_word_model_names_that_agree_are_read():
    # model_a is called 'a' and always listed first: both readings agree, nothing to ask
    df = pd.DataFrame({"item": [f"i{i}" for i in range(4)], "model_a": "a", "model_b": "b",
                       "outcome": ["a", "b", "a", "tie"]})
    assert evalmix.read(df, **PAIR).y.tolist() == [1.0, 0.0, 1.0, 0.5]


def test_outcome_kind_from_roles_file_and_checked(tmp_path: Path):
    df = pd.DataFrame({"item": ["i1", "i2"], "model_a": "tie", "model_b": "x",
                       "outcome": ["tie", "x"]})
    roles = tmp_path / "roles.toml"
    roles.write_text('outcome = "outcome"\nmodel_a = "model_a"\nmodel_b = "model_b"\n'
                     'outcome_kind = "winner"\n')
    assert evalmix.read(df, roles=roles).y.tolist() == [1.0, 0.0]
    with pytest.raises(InvalidOptionError, match="outcome_kind='name'"):
        evalmix.read(df, **PAIR, outcome_kind="name")


# ------------------------------------------------------------ duplicated columns
def test_duplicated_column_names_are_refused_in_csv_and_jsonl(tmp_path: Path):
    csv = tmp_path / "t.csv"
    csv.write_text("item,score,score\nq1,1,0\nq2,0,1\nq3,1,1\n")
    with pytest.raises(InvalidTableError, match=r"column name 'score' occurs 2 times in "
                                                r"the header"):
        evalmix.read(csv, outcome="score", clusters={"item": "item"})
    jsonl = tmp_path / "t.jsonl"
    jsonl.write_text('{"item": "q1", "score": 1}\n{"item": "q2", "score": 0, "score": 1}\n')
    with pytest.raises(InvalidTableError, match=r"line 2 of .* gives the key 'score' twice"):
        evalmix.read(jsonl, outcome="score", clusters={"item": "item"})


# ------------------------------------------------------------ huge values
def test_huge_outcomes_are_refused_not_turned_into_infinite_intervals():
    df = pd.DataFrame({"item": [f"i{i % 5}" for i in range(20)],
                       "score": [1e200 * (i % 3) for i in range(20)], "run": range(20)})
    with pytest.raises(InvalidTableError) as ei:
        evalmix.read(df, outcome="score", clusters={"item": "item"})
    msg = str(ei.value)
    assert "larger than 1e+100" in msg and "1e+200" in msg and "rescale" in msg
    # just below the bound the interval is finite: the bound is not too tight
    ok = df.assign(score=df["score"] / 2e200 * MAX_ABS_OUTCOME)
    res = evalmix.interval(evalmix.read(ok, outcome="score", clusters={"item": "item"}),
                           "mean", method="CR2", cluster="item")
    assert np.isfinite([res.se, res.lo, res.hi]).all() and res.se > 0


# ------------------------------------------------------------ duplicate rows
def test_duplicate_score_rows_give_the_same_interval_as_the_numbered_table():
    # kept as data: numbering the repeats (a column that tells them apart) changes nothing
    df = pd.DataFrame({"judge": np.repeat(["j1", "j2", "j3"], 6),
                       "correct": [1, 1, 1, 0, 1, 1, 0, 0, 1, 0, 0, 0, 1, 1, 0, 1, 1, 1]})
    t = evalmix.read(df, outcome="correct", clusters={"judge": "judge"})
    numbered = evalmix.read(df.assign(rep=range(len(df))), outcome="correct",
                            clusters={"judge": "judge"})
    assert t.n_duplicates == 15 and numbered.n_duplicates == 0  # 5 repeats per judge
    a = evalmix.interval(t, "mean", method="CR2", cluster="judge")
    b = evalmix.interval(numbered, "mean", method="CR2", cluster="judge")
    assert (a.estimate, a.se, a.lo, a.hi) == (b.estimate, b.se, b.lo, b.hi)
    assert a.estimate == pytest.approx(11 / 18)


# ------------------------------------------------------------ ids that read as NA
@pytest.mark.parametrize("fmt", ["csv", "parquet", "jsonl"])
def test_na_like_ids_are_ids_in_every_format(tmp_path: Path, fmt: str):
    df = pd.DataFrame({"lang": ["NA", "nan", "null", "en"] * 3,
                       "model": ["None", "m2"] * 6,
                       "score": [1, 0, 1, 1, 0, 0, 1, 0, 1, 1, 1, 0]})
    path = tmp_path / f"t.{fmt}"
    {"csv": lambda: df.to_csv(path, index=False), "parquet": lambda: df.to_parquet(path),
     "jsonl": lambda: df.to_json(path, orient="records", lines=True)}[fmt]()
    t = evalmix.read(path, outcome="score", condition="model", clusters={"lang": "lang"})
    assert t.levels("lang").tolist() == ["NA", "en", "nan", "null"]
    assert sorted(set(t.data["condition"])) == ["None", "m2"]
    ref = evalmix.read(df, outcome="score", condition="model", clusters={"lang": "lang"})
    pd.testing.assert_frame_equal(t.data, ref.data)


def test_na_outcomes_in_csv_are_still_missing(tmp_path: Path):
    path = tmp_path / "t.csv"
    path.write_text("item,score\nNA,1\nq2,NA\nq3,\nq4,0\nq5,1\n")
    with pytest.warns(DroppedRowsWarning, match="2 na outcome"):
        t = evalmix.read(path, outcome="score", clusters={"item": "item"})
    assert t.data["item"].tolist() == ["NA", "q4", "q5"]


def test_missing_ids_message_gives_the_right_fix():
    df = pd.DataFrame({"lang": ["en", np.nan, "fr", "en"], "score": [1, 0, 1, 0]})
    with pytest.raises(InvalidTableError) as ei:
        evalmix.read(df, outcome="score", clusters={"lang": "lang"})
    msg = str(ei.value)
    assert "keep_default_na=False" in msg and "fillna" not in msg


# ------------------------------------------------------------ Unicode
def test_nfc_and_nfd_labels_are_one_label():
    nfc, nfd = unicodedata.normalize("NFC", "café"), unicodedata.normalize("NFD", "café")
    assert nfc != nfd
    df = pd.DataFrame({"item": [nfc, nfd, "tea", "tea"], "model_a": [nfc, nfd, nfd, nfc],
                       "model_b": "b2", "outcome": [nfd, nfc, "b2", nfd]})
    t = evalmix.read(df, **PAIR)
    assert t.n_levels("item") == 2 and set(t.data["model_a"]) == {nfc}
    assert t.y.tolist() == [1.0, 1.0, 0.0, 1.0]


# ------------------------------------------------------------ file problems
def test_semicolon_and_tab_separated_csv_name_the_separator(tmp_path: Path):
    semi = tmp_path / "semi.csv"
    semi.write_text("item;score\nq1;1\nq2;0\n")
    with pytest.raises(EvalmixError, match=r"looks semicolon-separated.*sep=';'"):
        evalmix.read(semi, outcome="score", clusters={"item": "item"})
    tab = tmp_path / "tab.csv"
    tab.write_text("item\tscore\nq1\t1\nq2\t0\n")
    with pytest.raises(EvalmixError, match=r"looks tab-separated.*rename it to .tsv"):
        evalmix.read(tab, outcome="score", clusters={"item": "item"})


def test_latin1_file_names_the_encoding_option(tmp_path: Path):
    path = tmp_path / "t.csv"
    path.write_bytes("item,model,score\nq1,café,1\nq2,café,0\nq1,thé,1\nq2,thé,1\n"
                     .encode("latin-1"))
    with pytest.raises(EvalmixError, match=r"not valid.*encoding='latin-1'.*--encoding"):
        evalmix.read(path, outcome="score", condition="model", clusters={"item": "item"})
    t = evalmix.read(path, outcome="score", condition="model", clusters={"item": "item"},
                     encoding="latin-1")
    assert sorted(set(t.data["condition"])) == ["café", "thé"]
    with pytest.raises(InvalidOptionError, match="encoding='latin-9000'"):
        evalmix.read(path, outcome="score", encoding="latin-9000")


def test_malformed_jsonl_line_is_named_by_its_number(tmp_path: Path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"item": "q1", "score": 1}\n\n{"item": "q2", "score": 0}\n'
                    '{"item": "q3", score: 1}\n')
    with pytest.raises(EvalmixError, match=r"line 4 of .* is not valid JSON"):
        evalmix.read(path, outcome="score", clusters={"item": "item"})


def test_roles_toml_with_a_byte_order_mark(tmp_path: Path):
    roles = tmp_path / "roles.toml"
    roles.write_bytes(b'\xef\xbb\xbfoutcome = "score"\n[clusters]\nitem = "item"\n')
    df = pd.DataFrame({"item": ["q1", "q1", "q2", "q2"], "score": [1, 0, 1, 1]})
    t = evalmix.read(df, roles=roles)
    assert t.n_obs == 4 and t.clusters == ("item",)


def test_role_columns_match_up_to_surrounding_spaces_but_exact_first():
    df = pd.DataFrame({" item id ": ["a", "a", "b", "b"], "item id": ["x", "y", "x", "y"],
                       "judge": ["j1", "j2", "j1", "j2"], "score": [1, 0, 1, 1]})
    t = evalmix.read(df, outcome="score", clusters={"item": " item id ", "judge": " judge "})
    assert t.roles.clusters == {"item": " item id ", "judge": "judge"}
    assert t.levels("item").tolist() == ["a", "b"]


@pytest.mark.parametrize("name, text", [
    ("t.csv", 'item,score\nq1,1\nq2,0\n'),
    ("t.jsonl", '{"item": "q1", "score": 1}\n{"item": "q2", "score": 0}\n'),
    ("t.json", '[{"item": "q1", "score": 1}, {"item": "q2", "score": 0}]'),
])
def test_files_with_a_byte_order_mark(tmp_path: Path, name: str, text: str):
    path = tmp_path / name
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    t = evalmix.read(path, outcome="score", clusters={"item": "item"})
    assert t.y.tolist() == [1.0, 0.0] and t.levels("item").tolist() == ["q1", "q2"]
