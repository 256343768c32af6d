"""The top-level CLI: usage errors are one line with exit code 2."""

from __future__ import annotations

import pytest

from evalmix.cli import main, parse_cluster
from evalmix.errors import EvalmixError


@pytest.mark.parametrize("argv", [["bogus"], ["report", "x.csv", "--outcome", "y"],
                                  ["report", "x.csv", "--out", "o", "--ties", "bogus"]])
def test_usage_errors_are_one_line(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and err[0].startswith("evalmix: error:")


def test_parse_cluster():
    # the role is stripped; the column is kept as typed (read() matches it exactly first,
    # then up to surrounding spaces), so a real column " item id " can be named
    assert parse_cluster(["item=item_id", " judge = judge "]) == {"item": "item_id",
                                                                  "judge": " judge "}
    with pytest.raises(EvalmixError, match="gives the role 'item' twice"):
        parse_cluster(["item=a", "item=b"])
    with pytest.raises(EvalmixError, match="ROLE=COLUMN"):
        parse_cluster(["item"])


def test_every_subcommand_is_described_once():
    """The subcommands registered are exactly those of the help table, and each shows its
    description in ``evalmix COMMAND --help``."""
    from evalmix.cli import build_parser
    from evalmix.cli._common import COMMANDS

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert list(sub.choices) == list(COMMANDS)
    for name, (_, description) in COMMANDS.items():
        assert sub.choices[name].description == description
