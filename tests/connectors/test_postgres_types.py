"""Arrow to PostgreSQL types, and the CSV that COPY reads (no server needed)."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from millrace.connectors.postgres_types import (
    csv_chunks,
    postgres_type,
    prepare_for_copy,
    unsupported_columns,
)


@pytest.mark.parametrize(
    ("arrow_type", "expected"),
    [
        (pa.bool_(), "boolean"),
        (pa.int8(), "smallint"),
        (pa.uint16(), "integer"),
        (pa.int64(), "bigint"),
        (pa.uint64(), "numeric(20, 0)"),
        (pa.float16(), "real"),
        (pa.float64(), "double precision"),
        (pa.decimal128(12, 3), "numeric(12, 3)"),
        (pa.large_string(), "text"),
        (pa.date64(), "date"),
        (pa.time64("us"), "time"),
        (pa.timestamp("us"), "timestamp"),
        (pa.timestamp("ms", tz="UTC"), "timestamptz"),
        (pa.dictionary(pa.int32(), pa.string()), "text"),
    ],
)
def test_postgres_type_of_arrow_types(arrow_type, expected) -> None:
    assert postgres_type(arrow_type) == expected


def test_binary_nested_and_duration_columns_are_refused() -> None:
    schema = pa.schema(
        [
            ("ok", pa.string()),
            ("raw", pa.binary()),
            ("tags", pa.list_(pa.string())),
            ("wait", pa.duration("s")),
        ]
    )
    assert unsupported_columns(schema) == [
        "raw: binary",
        "tags: list<item: string>",
        "wait: duration[s]",
    ]
    with pytest.raises(TypeError, match="binary"):
        postgres_type(pa.binary())


def test_csv_keeps_nulls_apart_from_empty_strings_and_decodes_dictionaries() -> None:
    table = pa.table(
        {
            "s": ["a", "", None],
            "code": pa.array(["x", None, "x"]).dictionary_encode(),
            "half": pa.array([1.5, None, 2.0], pa.float16()),
            "day": pa.array([0, None, 86_400_000], pa.date64()),
        }
    )
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    buffer.seek(0)

    text = b"".join(csv_chunks(pq.ParquetFile(buffer))).decode()

    assert text.splitlines() == ['"a","x",1.5,1970-01-01', '"",,,', ',"x",2,1970-01-02']


def test_prepare_for_copy_keeps_plain_batches_as_they_are() -> None:
    batch = pa.record_batch({"n": [1, 2], "s": ["a", "b"]})
    assert prepare_for_copy(batch) is batch
