"""InputSplit identity: a file, or one row group of it."""

from __future__ import annotations

from millrace.runtime.io.input_split import InputSplit


def test_each_row_group_of_a_file_is_a_split_of_its_own() -> None:
    whole = InputSplit(0, "data/flights-01.parquet")
    groups = [InputSplit(i + 1, "data/flights-01.parquet", row_group=i) for i in range(2)]
    assert whole.split_id == "data/flights-01.parquet"
    assert [g.split_id for g in groups] == [
        "data/flights-01.parquet#rg0",
        "data/flights-01.parquet#rg1",
    ]
