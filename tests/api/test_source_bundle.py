"""``SourceBundle.rows_from_statistics``: when a bundle's records are counted from file
statistics instead of as they are read (the read then needs no Spark observation). No Spark."""

from __future__ import annotations

import pytest

from millrace.api.connector.source import SourceBundle
from millrace.runtime.io.input_split import InputSplit, SplitState


def bundle(*splits: InputSplit, **fields: object) -> SourceBundle:
    return SourceBundle(None, [SplitState(s, 0, finished=True) for s in splits], **fields)


def split(n: int, rows: int | None = 100, low: int | None = 0) -> InputSplit:
    return InputSplit(n, f"/in/f{n}.parquet", rows=rows, min_event_time_ms=low)


def test_parquet_splits_with_statistics_and_no_null_event_time_are_counted() -> None:
    assert bundle(split(0), split(1, rows=50)).rows_from_statistics("ts") == 150
    assert bundle(split(0, low=None)).rows_from_statistics(None) == 100  # no event time


@pytest.mark.parametrize(
    ("made", "why"),
    [
        (bundle(split(0), split(1, rows=None)), "a split without a row count"),
        (bundle(split(0), split(1, low=None)), "a split whose event time may be null"),
        (bundle(split(0), malformed_reason="reason"), "records may be malformed (CSV)"),
        (bundle(split(0), full_parse="parse"), "every field must be parsed"),
        (bundle(split(0), split_column="__split"), "per-split watermarks to find"),
        (
            SourceBundle(None, [SplitState(split(0), 10, finished=False)]),
            "a split read in part",
        ),
    ],
)
def test_anything_else_is_counted_as_read(made: SourceBundle, why: str) -> None:
    assert made.rows_from_statistics("ts") is None, why
