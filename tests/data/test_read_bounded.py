"""Bounded readers: inputs that used to crash or be read wrongly give one clear
EvalmixError naming the file, the line or byte offset and the fix, before any analysis.

The byte offset of an invalid UTF-8 byte is checked against the offset where the test put
it (and Python's own decoder on the whole file).
"""

from __future__ import annotations

import gzip
import json

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import evalmix
from evalmix.data import load
from evalmix.data.readers import detect_format
from evalmix.errors import EvalmixError, InvalidTableError

DEEP = 100_000


def _deep(n: int = DEEP) -> str:
    return '{"y": ' + "[" * n + "]" * n + ', "item": "a"}'


def test_jsonl_nested_deeply_names_the_line(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"y": 1, "item": "a"}\n' + _deep() + "\n")
    with pytest.raises(EvalmixError, match=r"line 2 of .*t\.jsonl.* nested too deeply"):
        evalmix.read(path, outcome="y", clusters={"item": "item"})


@pytest.mark.parametrize("name", ["t.json", "t.jsonl"])
def test_deep_json_through_the_cli_is_one_line(tmp_path, capsys, monkeypatch, name):
    from evalmix.cli import main

    path = tmp_path / name
    path.write_text(("[" + _deep() + "]") if name == "t.json" else _deep())

    def no_analysis(*args, **kwargs):
        raise AssertionError("the analysis ran")

    monkeypatch.setattr("evalmix.report.analyze.analyze", no_analysis)
    assert main(["report", str(path), "--outcome", "y", "--cluster", "item=item",
                 "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "nested too deeply" in err and "internal error" not in err
    assert err.count("\n") == 1


def test_a_huge_line_is_refused_with_its_number(tmp_path, monkeypatch):
    monkeypatch.setattr(load, "MAX_LINE", 100)
    path = tmp_path / "t.jsonl"
    path.write_text('{"y": 1, "item": "a"}\n{"y": 0, "item": "' + "b" * 500 + '"}\n')
    with pytest.raises(EvalmixError, match=r"line 2 of .* longer than 100 characters"):
        evalmix.read(path, outcome="y", clusters={"item": "item"})


@pytest.mark.parametrize("name", ["t.csv.gz", "t.jsonl.gz"])
def test_a_truncated_gzip_is_named(tmp_path, name):
    rows = pd.DataFrame({"y": [1, 0] * 2000, "item": [f"i{i}" for i in range(4000)]})
    text = (rows.to_csv(index=False) if name.startswith("t.csv")
            else rows.to_json(orient="records", lines=True))
    data = gzip.compress(text.encode())
    path = tmp_path / name
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(EvalmixError, match=r"t\.(csv|jsonl)\.gz' is a truncated or damaged "
                                           "compressed file"):
        evalmix.read(path, outcome="y", clusters={"item": "item"})


def test_non_scalar_parquet_cells_are_refused(tmp_path):
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({
        "y": [[1, 0], [0, 1], [1, 1], [0, 0]], "z": [1, 0, 1, 0],
        "item": ["a", "b", "a", "b"], "g": [{"x": 1}, {"x": 2}, {"x": 1}, {"x": 2}]}), path)
    with pytest.raises(InvalidTableError, match=r"column 'y' .* holds lists.*\.str\[0\]"):
        evalmix.read(path, outcome="y", clusters={"item": "item"})
    with pytest.raises(InvalidTableError, match=r"column 'g' .* holds records .*\.str\['x'\]"):
        evalmix.read(path, outcome="z", clusters={"g": "g"})


def test_a_byte_order_mark_does_not_change_the_format(tmp_path):
    battles = [{"model_a": "m1", "model_b": "m2", "winner": "model_a", "question_id": i}
               for i in range(3)]
    text = "\n".join(json.dumps(b) for b in battles) + "\n"
    plain, bom = tmp_path / "plain.jsonl", tmp_path / "bom.jsonl"
    plain.write_text(text, encoding="utf-8")
    bom.write_text(text, encoding="utf-8-sig")
    assert bom.read_bytes().startswith(b"\xef\xbb\xbf")
    assert detect_format(plain) == detect_format(bom) == "battles"


def test_the_invalid_utf8_offset_is_the_true_one(tmp_path):
    lines = [f"{i % 2},item{i}" for i in range(20_000)]
    head = ("y,item\n" + "\n".join(lines[:9000]) + "\n").encode()
    path = tmp_path / "t.csv"
    path.write_bytes(head + b"1,caf\xe9\n" + ("\n".join(lines[9000:]) + "\n").encode())
    offset = len(head) + len(b"1,caf")
    with pytest.raises(UnicodeDecodeError) as ref:
        path.read_bytes().decode("utf-8")
    assert ref.value.start == offset > 65536   # beyond the first chunk a reader decodes
    with pytest.raises(EvalmixError, match=rf"byte 0xe9 at byte offset {offset:,} "
                                           r"\(line 9,002\)"):
        evalmix.read(path, outcome="y", clusters={"item": "item"})
