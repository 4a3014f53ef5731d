"""Kafka messages as one lazy Spark DataFrame: JSON values parsed by Spark, malformed ones
flagged.

A bundle's messages become one Arrow table (partition, offset, timestamp, key, value) — the
only Python that touches every message, one C-level ``map`` per column — which Spark takes
whole (``createDataFrame``) and parses with ``from_json`` (PERMISSIVE, with a corrupt-record
column). A value that is null, empty, not JSON, or JSON that does not fit the schema is a
malformed record: a reason column says why, the value text is kept for the dead letter, and its
fields are null (none of it, e.g. its event time, reaches the watermarks).
The Kafka columns are internal: the pipeline sees only the schema's fields.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

__all__ = [
    "INTERNAL_COLUMNS",
    "OFFSET",
    "PARTITION",
    "SPLIT",
    "TIMESTAMP",
    "ParsedRecords",
    "json_schema",
    "message_table",
    "parse_json_records",
]

PARTITION = "__kafka_partition"
OFFSET = "__kafka_offset"
TIMESTAMP = "__kafka_timestamp"
KEY = "__kafka_key"
VALUE = "__kafka_value"
RAW = "__kafka_raw"
SPLIT = "__kafka_split"
CORRUPT = "__kafka_corrupt"
_PARSED = "__kafka_parsed"
INTERNAL_COLUMNS = (PARTITION, OFFSET, TIMESTAMP, KEY, VALUE, RAW, SPLIT, CORRUPT)


@dataclass(frozen=True)
class ParsedRecords:
    """A bundle's records, as Spark will parse them (nothing has run yet).

    Attributes:
        frame: ``pyspark.sql.DataFrame`` of the schema's fields plus ``INTERNAL_COLUMNS``.
        malformed_reason: Column (string): why a record is malformed; null for good ones.
        raw_record: Column (string): the message value as text.
    """

    frame: Any
    malformed_reason: Any
    raw_record: Any


def message_table(messages: Sequence[Any]) -> Any:
    """The messages as one ``pyarrow.Table``.

    Args:
        messages: ``confluent_kafka.Message`` objects without error.

    Returns:
        Schema: ``(__kafka_partition: int32, __kafka_offset: int64, __kafka_timestamp:
        timestamp[ms, UTC], __kafka_key: binary, __kafka_value: binary)``, one row per message,
        in the given order; timestamp null where the message has none.
    """
    from operator import itemgetter

    import pyarrow as pa
    import pyarrow.compute as pc
    from confluent_kafka import Message

    timestamps = pa.array(list(map(itemgetter(1), map(Message.timestamp, messages))), pa.int64())
    if len(timestamps) and pc.min(timestamps).as_py() < 0:  # -1: no timestamp
        timestamps = pc.if_else(pc.less(timestamps, 0), pa.scalar(None, pa.int64()), timestamps)
    return pa.table(
        {
            PARTITION: pa.array(list(map(Message.partition, messages)), pa.int32()),
            OFFSET: pa.array(list(map(Message.offset, messages)), pa.int64()),
            TIMESTAMP: timestamps.cast(pa.timestamp("ms", "UTC")),
            KEY: pa.array(list(map(Message.key, messages)), pa.binary()),
            VALUE: pa.array(list(map(Message.value, messages)), pa.binary()),
        }
    )


def json_schema(schema: Any) -> Any:
    """``schema`` (DDL string or StructType) as a StructType. Needs a running SparkSession to
    parse DDL.

    Raises:
        PipelineError: If a field name starts with ``__kafka_`` (reserved for the source).
        Exception: Spark's parse error for invalid DDL.
    """
    from pyspark.sql.types import StructType

    from millrace.errors import PipelineError

    # fromDDL is typed to return a DataType; a list of fields parses to a StructType
    struct = cast(StructType, StructType.fromDDL(schema)) if isinstance(schema, str) else schema
    reserved = [f.name for f in struct.fields if f.name.startswith("__kafka_")]
    if reserved:
        raise PipelineError(f"field names starting with __kafka_ are reserved: {reserved}")
    return struct


def parse_json_records(spark: Any, table: Any, schema: Any, topic: str) -> ParsedRecords:
    """The messages of ``table`` (``message_table``) with their JSON values parsed by Spark.

    Args:
        spark: The SparkSession.
        table: A ``message_table``.
        schema: StructType of the values (``json_schema``).
        topic: The topic, for the split column (``topic/partition``).

    Returns:
        The lazy frame, with the reason and raw-record columns.

    Schema:
        ``(<schema's fields>, __kafka_partition: int, __kafka_offset: bigint,
        __kafka_timestamp: timestamp, __kafka_key: binary, __kafka_value: binary,
        __kafka_raw: string, __kafka_split: string, __kafka_corrupt: string)``; one row per
        message. Every field of a malformed value is null.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    with_corrupt = StructType([*schema.fields, StructField(CORRUPT, StringType(), True)])
    options = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}
    kafka = [F.col(c) for c in table.column_names]
    frame = (
        spark.createDataFrame(table)
        .select(
            *kafka,
            F.col(VALUE).cast("string").alias(RAW),
            F.concat(F.lit(f"{topic}/"), F.col(PARTITION).cast("string")).alias(SPLIT),
        )
        .select("*", F.from_json(F.col(RAW), with_corrupt, options).alias(_PARSED))
    )
    corrupt = F.col(f"{_PARSED}.{CORRUPT}")
    # a malformed value's fields stay null: Spark keeps what it parsed before the error, and
    # e.g. a parsed event time would move its partition's watermark
    fields = [
        F.when(corrupt.isNull(), F.col(f"{_PARSED}.`{f.name}`")).alias(f.name)
        for f in schema.fields
    ]
    frame = frame.select(*fields, corrupt.alias(CORRUPT), *table.column_names, RAW, SPLIT)
    return ParsedRecords(frame, _reason(), F.col(RAW))


def _reason() -> Any:
    """Spark expression: why a message's value is malformed (null for good ones)."""
    from pyspark.sql import functions as F

    raw = F.col(RAW)
    return (
        F.when(F.col(VALUE).isNull(), F.lit("message has no value (null)"))
        .when(F.trim(raw) == F.lit(""), F.lit("message value is empty"))
        .when(
            F.col(CORRUPT).isNotNull(),
            F.when(F.try_parse_json(raw).isNull(), F.lit("value is not valid JSON")).otherwise(
                F.lit(
                    "JSON value does not fit the schema (not an object, or a field's type differs)"
                )
            ),
        )
    )
