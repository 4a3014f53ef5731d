"""Spark's schema of a Parquet file from its footer, read with pyarrow: no Spark schema inference.

``spark.read.parquet(files)`` without a schema lists the files and reads a footer through the
JVM before any job runs (about 0.1-0.3 s on the benchmark machine, per read); a reader that
already knows the schema skips it. The footer's Arrow schema maps to Spark's types with
PySpark's own Arrow conversion; only columns whose Spark type is certain that way are accepted
(a timestamp without time zone, a dictionary or nested type may be read differently by Spark's
Parquet reader, so such a file is left to Spark's inference). The same test tells a source
holding Arrow records whether it may hand Spark a Parquet file of them to scan instead of
converting them (``createDataFrame`` gives the records the same types Spark reads back).
"""

from __future__ import annotations

from typing import Any

__all__ = ["arrow_spark_schema", "parquet_spark_schema"]


def parquet_spark_schema(path: str) -> Any:
    """The ``pyspark.sql.types.StructType`` Spark would infer for the Parquet file ``path``
    (a local path or fsspec URL), or None when it cannot be told from the footer alone or the
    footer cannot be read (the caller then lets Spark infer it).

    Threading:
        Any thread; reads the footer only.
    """
    import fsspec
    import pyarrow.parquet as pq

    try:
        with fsspec.open(path, "rb") as f:
            schema = pq.read_schema(f)
    except Exception:  # any doubt: Spark infers it, as without this shortcut
        return None
    return arrow_spark_schema(schema)


def arrow_spark_schema(schema: Any) -> Any:
    """The ``StructType`` of records of ``schema`` (``pyarrow.Schema``), both as
    ``createDataFrame`` gives them and as Spark's Parquet reader reads a file of them written
    by pyarrow (the same types; a file scan makes every column nullable); None when that is
    not certain (see the module docstring). No session: it holds on Spark Connect too, which
    cannot infer a schema from an empty table.

    Threading:
        Any thread.
    """
    from pyspark.sql.pandas.types import from_arrow_schema

    if not all(_certain(field.type) for field in schema):
        return None
    try:
        return from_arrow_schema(schema)
    except Exception:  # a type PySpark does not map (unsigned integers)
        return None


def _certain(arrow_type: Any) -> bool:
    import pyarrow as pa

    t = pa.types
    if t.is_timestamp(arrow_type):
        return arrow_type.tz is not None and arrow_type.unit == "us"
    return bool(
        t.is_integer(arrow_type)
        or t.is_floating(arrow_type)
        or t.is_string(arrow_type)
        or t.is_boolean(arrow_type)
        or t.is_date32(arrow_type)
        or t.is_decimal(arrow_type)
        or t.is_binary(arrow_type)
    )
