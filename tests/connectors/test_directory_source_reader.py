"""DirectorySourceReader: a Parquet file read whole is a Spark scan of the file; a file read in
parts, or one whose types Spark would read otherwise, goes through Arrow; the rows and Spark
types are the same either way."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from millrace.api.connector.source import SourceReaderContext
from millrace.config import Configuration
from millrace.connectors.directory_source import DirectorySource, DirectorySourceReader

pytestmark = [pytest.mark.slow, pytest.mark.spark]

ROWS = 5000


def flights_like(tz: str | None) -> pa.Table:
    start = 1_700_000_000_000_000
    return pa.table(
        {
            "carrier": pa.array([f"c{i % 7}" for i in range(ROWS)]),
            "dep_delay": pa.array([float(i % 90) if i % 11 else None for i in range(ROWS)]),
            "time_hour": pa.array(
                [start + i * 60_000_000 for i in range(ROWS)], pa.timestamp("us", tz=tz)
            ),
        }
    )


def read_bundles(spark: Any, directory: Path, max_records: int) -> list[Any]:
    source = DirectorySource.parquet(str(directory))
    enumerator = source.create_enumerator(None)
    splits = enumerator.discover()
    reader = source.create_reader(
        SourceReaderContext(0, 1, max_records, 0.01, Configuration(), spark)
    )
    assert isinstance(reader, DirectorySourceReader)
    for split in splits:
        reader.add_split(split, 0)
    bundles = []
    while not reader.is_finished():
        bundle = reader.poll(0.01)
        assert bundle is not None
        bundles.append(bundle)
    return bundles


def rows(frame: Any) -> list[tuple[Any, ...]]:
    return sorted(
        (r["carrier"], r["dep_delay"] is None, r["dep_delay"] or 0.0, r["time_hour"], r["__split"])
        for r in frame.collect()
    )


def test_a_file_read_whole_is_scanned_by_spark_with_the_types_arrow_gives(spark, tmp_path) -> None:
    table = flights_like("UTC")
    (tmp_path / "in").mkdir()
    pq.write_table(table, tmp_path / "in" / "part-0.parquet", row_group_size=1000)
    [whole] = read_bundles(spark, tmp_path / "in", ROWS)
    [state] = whole.progress
    assert state.finished and state.position == ROWS
    plan = whole.frame._jdf.queryExecution().executedPlan().toString()
    assert "FileScan parquet" in plan, plan  # the file itself, no rows converted from Arrow
    parts = read_bundles(spark, tmp_path / "in", 2000)  # in parts: row groups through Arrow
    assert [b.progress[0].position for b in parts] == [2000, 4000, 5000]
    assert all(
        "FileScan" not in b.frame._jdf.queryExecution().executedPlan().toString() for b in parts
    )
    assert whole.frame.drop("__split").schema == parts[0].frame.drop("__split").schema
    assert rows(whole.frame) == sorted(r for b in parts for r in rows(b.frame))
    assert len(rows(whole.frame)) == ROWS


def test_naive_timestamps_go_through_arrow_as_a_local_timestamp(spark, tmp_path) -> None:
    (tmp_path / "in").mkdir()
    pq.write_table(flights_like(None), tmp_path / "in" / "part-0.parquet")
    [bundle] = read_bundles(spark, tmp_path / "in", ROWS)
    assert "FileScan" not in bundle.frame._jdf.queryExecution().executedPlan().toString()
    assert bundle.frame.schema["time_hour"].dataType.simpleString() == "timestamp"
    assert bundle.frame.count() == ROWS
