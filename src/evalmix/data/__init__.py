"""Reading and validating eval tables: files or DataFrames in, an ``EvalTable`` out."""

from evalmix.data.read import load_frame, read
from evalmix.data.summary import DesignSummary
from evalmix.data.table import EvalTable, Roles

__all__ = ["read", "load_frame", "EvalTable", "Roles", "DesignSummary"]
