"""Output comparisons as multisets of rows: the oracle check of every exactly-once test.

A duplicated row is a failure, and so is a missing one, whatever the other rows are
(docs/testing.md, "Oracles").
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["assert_same_rows"]


def assert_same_rows(actual: pd.DataFrame, wanted: pd.DataFrame, tolerance: float = 1e-9) -> None:
    """``actual`` holds exactly ``wanted``'s rows as a multiset of whole rows: every column of
    ``wanted``, each row as often as wanted (a row twice, or missing, fails whatever the other
    rows are; a join on a key plus a length check would pass one duplicate and one missing row),
    floating columns within ``tolerance`` (absolute). Columns of ``actual`` that ``wanted``
    lacks are not compared.

    The rows are matched on every non-floating column (e.g. ``carrier``, ``window_start``,
    ``window_end``, ``flights``): their multisets must be equal. Then both sides, sorted on
    every column, are compared row by row on the floating columns.

    Raises:
        AssertionError: Naming the columns that differ, or a few surplus and missing rows.
    """
    columns = list(wanted.columns)
    if len(actual):  # an empty output (``committed`` of no file) has no columns to compare
        absent = [c for c in columns if c not in actual.columns]
        assert not absent, f"columns {absent} missing from {list(actual.columns)}"
    else:
        actual = pd.DataFrame({c: pd.Series(dtype=wanted[c].dtype) for c in columns})
    floating = [c for c in columns if wanted[c].dtype.kind == "f"]
    exact = [c for c in columns if c not in floating]
    got, want = Counter(_rows(actual, exact)), Counter(_rows(wanted, exact))
    if got != want:
        surplus, missing = got - want, want - got
        raise AssertionError(
            f"{len(actual)} rows, {len(wanted)} wanted; by {tuple(exact)}:\n"
            f"  surplus ({surplus.total()} rows, row: times too many): {_few(surplus)}\n"
            f"  missing ({missing.total()} rows, row: times missing): {_few(missing)}"
        )
    if not floating:
        return
    order = [*exact, *floating]
    a = actual[order].sort_values(order, ignore_index=True)
    w = wanted[order].sort_values(order, ignore_index=True)
    for column in floating:
        x, y = a[column].to_numpy(dtype=float), w[column].to_numpy(dtype=float)
        off = ~((np.isnan(x) & np.isnan(y)) | (np.abs(x - y) <= tolerance))
        assert not off.any(), (
            f"{int(off.sum())} rows with {column} off by more than {tolerance}, e.g.\n"
            f"{a[off].head(5).to_string()}\nwanted\n{w[off].head(5).to_string()}"
        )


def _rows(frame: pd.DataFrame, columns: list[str]) -> list[tuple[Any, ...]]:
    """``frame``'s rows as tuples of ``columns``, nulls as None (a NaN equals no NaN)."""
    return [
        tuple(None if pd.isna(v) else v for v in row)
        for row in frame[columns].itertuples(index=False, name=None)
    ]


def _few(rows: Counter[tuple[Any, ...]], limit: int = 5) -> str:
    listed = [f"{row}: {n}" for row, n in sorted(rows.items(), key=str)[:limit]]
    more = f" and {len(rows) - limit} more" if len(rows) > limit else ""
    return ("; ".join(listed) or "none") + more
