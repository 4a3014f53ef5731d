"""``parquet_spark_schema``: the schema read from a Parquet footer is exactly what Spark infers,
and files whose Spark types are uncertain from the footer are left to Spark's inference.
``arrow_spark_schema``: where it gives a schema, ``createDataFrame`` gives the records the same
one, so a source may hand Spark a Parquet file of its Arrow records instead."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from millrace.spark.parquet_schema import arrow_spark_schema, parquet_spark_schema

pytestmark = [pytest.mark.slow, pytest.mark.spark]


def test_the_footer_schema_is_what_spark_infers(spark, flights_dir, tmp_path) -> None:
    first = sorted(flights_dir.glob("*.parquet"))[0]
    assert parquet_spark_schema(str(first)) == spark.read.parquet(str(first)).schema
    table = pa.table(
        {
            "k": pa.array(["a"], pa.string()),
            "n": pa.array([1], pa.int32()),
            "x": pa.array([1.5], pa.float32()),
            "d": pa.array([dt.date(2013, 1, 1)], pa.date32()),
            "m": pa.array([None], pa.int64()),
            "t": pa.array([dt.datetime(2013, 1, 1)], pa.timestamp("us", tz="UTC")),
            "b": pa.array([True]),
        }
    )
    path = tmp_path / "types.parquet"
    pq.write_table(table, path)
    assert parquet_spark_schema(str(path)) == spark.read.parquet(str(path)).schema
    assert arrow_spark_schema(table.schema) == spark.createDataFrame(table).schema
    assert arrow_spark_schema(table.schema) == spark.read.parquet(str(path)).schema


@pytest.mark.parametrize(
    "column",
    [
        pa.array([dt.datetime(2013, 1, 1)], pa.timestamp("us")),  # no time zone: NTZ or not
        pa.array([dt.datetime(2013, 1, 1)], pa.timestamp("ns", tz="UTC")),
        pa.array(["a"]).dictionary_encode(),
        pa.array([[1, 2]]),
    ],
)
def test_uncertain_types_are_left_to_spark(tmp_path, column) -> None:
    path = tmp_path / "f.parquet"
    pq.write_table(pa.table({"c": column}), path)
    assert parquet_spark_schema(str(path)) is None
    assert arrow_spark_schema(pa.table({"c": column}).schema) is None


def test_a_type_pyspark_does_not_map_has_no_schema() -> None:
    assert arrow_spark_schema(pa.schema([("u", pa.uint32())])) is None


def test_an_unreadable_footer_is_left_to_spark(tmp_path) -> None:
    (tmp_path / "bad.parquet").write_bytes(b"not parquet")
    assert parquet_spark_schema(str(tmp_path / "bad.parquet")) is None
    assert parquet_spark_schema(str(tmp_path / "missing.parquet")) is None
