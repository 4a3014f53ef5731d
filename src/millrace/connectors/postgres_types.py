"""Arrow to PostgreSQL: column types for ``CREATE TABLE`` and tables as CSV for ``COPY``.

``PostgresSink`` loads Arrow data with ``COPY ... FROM STDIN (FORMAT csv)``, the CSV written by
Arrow's C++ writer (``pyarrow.csv``), never row by row in Python. Arrow's CSV matches
PostgreSQL's reading of it: strings are always quoted and nulls are empty and unquoted, so an
empty string and a null stay apart; timestamps with a time zone carry ``Z`` (UTC); floats are
written in their shortest round-trip form, ``nan``/``inf`` included.

Type mapping (Arrow -> PostgreSQL):

=====================================  ============================
bool                                   boolean
int8, int16, uint8                     smallint
int32, uint16                          integer
int64, uint32                          bigint
uint64                                 numeric(20, 0)
float16, float32                       real
float64                                double precision
decimal128/256(p, s)                   numeric(p, s)
string, large_string, string_view      text
null                                   text
date32, date64                         date
time32, time64                         time
timestamp (no time zone)               timestamp
timestamp (with a time zone)           timestamptz
dictionary<_, value>                   as ``value``
=====================================  ============================

Binary, duration, interval, list, struct, map and union columns are refused: cast them in a
``transform`` (e.g. ``F.to_json`` or ``F.base64``) before the sink.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

__all__ = ["csv_chunks", "postgres_type", "prepare_for_copy", "unsupported_columns"]

_BATCH_ROWS = 65_536


def postgres_type(arrow_type: Any) -> str:
    """The PostgreSQL column type of ``arrow_type`` (a ``pyarrow.DataType``).

    Args:
        arrow_type: An Arrow type (see the module's table).

    Returns:
        SQL type text, e.g. ``"double precision"``.

    Raises:
        TypeError: For a type without a mapping (binary, nested, duration, ...).
    """
    import pyarrow as pa

    t = pa.types
    if t.is_dictionary(arrow_type):
        return postgres_type(arrow_type.value_type)
    if t.is_boolean(arrow_type):
        return "boolean"
    if t.is_int8(arrow_type) or t.is_int16(arrow_type) or t.is_uint8(arrow_type):
        return "smallint"
    if t.is_int32(arrow_type) or t.is_uint16(arrow_type):
        return "integer"
    if t.is_int64(arrow_type) or t.is_uint32(arrow_type):
        return "bigint"
    if t.is_uint64(arrow_type):
        return "numeric(20, 0)"
    if t.is_float16(arrow_type) or t.is_float32(arrow_type):
        return "real"
    if t.is_float64(arrow_type):
        return "double precision"
    if t.is_decimal(arrow_type):
        return f"numeric({arrow_type.precision}, {arrow_type.scale})"
    if t.is_string(arrow_type) or t.is_large_string(arrow_type) or _is_string_view(arrow_type):
        return "text"
    if t.is_null(arrow_type):
        return "text"
    if t.is_date(arrow_type):
        return "date"
    if t.is_time(arrow_type):
        return "time"
    if t.is_timestamp(arrow_type):
        return "timestamptz" if arrow_type.tz is not None else "timestamp"
    raise TypeError(f"no PostgreSQL type for Arrow type {arrow_type}")


def unsupported_columns(schema: Any) -> list[str]:
    """Descriptions (``name: type``) of the columns of ``schema`` (``pyarrow.Schema``) that
    cannot be loaded; empty if every column can."""
    refused = []
    for field in schema:
        try:
            postgres_type(field.type)
        except TypeError:
            refused.append(f"{field.name}: {field.type}")
    return refused


def prepare_for_copy(batch: Any) -> Any:
    """``batch`` (``pyarrow.RecordBatch``) with its columns cast to types whose CSV PostgreSQL
    reads as the mapped type: dictionaries decoded, float16 widened, date64 as date32, string
    views as strings. Columns that need nothing are returned as they are."""
    import pyarrow as pa

    columns = []
    changed = False
    for column in batch.columns:
        target = _csv_type(column.type)
        if target is None:
            columns.append(column)
        else:
            columns.append(column.cast(target))
            changed = True
    if not changed:
        return batch
    return pa.RecordBatch.from_arrays(columns, names=batch.schema.names)


def csv_chunks(parquet_file: Any) -> Iterator[bytes]:
    """The rows of ``parquet_file`` (``pyarrow.parquet.ParquetFile``) as CSV without header,
    in chunks of up to 65,536 rows, ready for ``COPY ... FROM STDIN (FORMAT csv)``."""
    import pyarrow.csv as pacsv

    options = pacsv.WriteOptions(include_header=False)
    for batch in parquet_file.iter_batches(batch_size=_BATCH_ROWS):
        if batch.num_rows == 0:
            continue
        buffer = io.BytesIO()
        pacsv.write_csv(prepare_for_copy(batch), buffer, options)
        yield buffer.getvalue()


def _csv_type(arrow_type: Any) -> Any:
    """The type to cast to before writing CSV, or None to keep ``arrow_type``."""
    import pyarrow as pa

    t = pa.types
    if t.is_dictionary(arrow_type):
        return _csv_type(arrow_type.value_type) or arrow_type.value_type
    if t.is_float16(arrow_type):
        return pa.float32()
    if t.is_date64(arrow_type):
        return pa.date32()
    if _is_string_view(arrow_type):
        return pa.string()
    return None


def _is_string_view(arrow_type: Any) -> bool:
    import pyarrow as pa

    check = getattr(pa.types, "is_string_view", None)
    return bool(check and check(arrow_type))
