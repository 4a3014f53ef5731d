"""Spark plans of the running keyed aggregate (no window): partials, emission, compaction.

Before the exchange, each bundle's records are pre-aggregated per key and key group into
partial aggregates (``AggregatePlan.partial_columns``), or, for aggregates that do not
decompose, kept as records with their key group. The keyed side holds those rows as state and
computes the user's aggregates from them when it emits (Flink's local-global aggregation; the
changelog of SQL's streaming GROUP BY as upserts).
"""

from __future__ import annotations

from typing import Any

from millrace.api.operators import (
    KeyedAggregateOperator,
    KeyedRecordsOperator,
    LocalKeyedAggregateOperator,
)
from millrace.spark.windowing import KEY_GROUP, TARGET, key_group, target_subtask

__all__ = ["aggregated_once", "compacted_state", "emitted_rows", "keyed_exchange_frame"]

_FRESH = "__fresh"


def keyed_exchange_frame(
    frame: Any,
    op: LocalKeyedAggregateOperator | KeyedRecordsOperator,
    max_parallelism: int,
    consumers: int,
) -> Any:
    """``frame`` prepared for the HASH exchange of a running aggregate (lazy DataFrame).

    Schema:
        Partials: ``(keys..., __kg, __target, __p{i}_*...)``, one row per key in the bundle;
        records: ``(columns..., __kg, __target)``.
    """
    groups = key_group(op.keys, max_parallelism)
    keyed = frame.select(
        "*",
        groups.alias(KEY_GROUP),
        target_subtask(groups, max_parallelism, consumers).alias(TARGET),
    )
    if isinstance(op, KeyedRecordsOperator):
        return keyed
    # The key group and target are functions of the keys: grouping by them adds no group.
    return keyed.groupBy(*op.keys, KEY_GROUP, TARGET).agg(*op.plan.partial_columns())


def emitted_rows(
    spark: Any,
    op: KeyedAggregateOperator,
    settled: list[str],
    fresh: list[str],
    schema: Any,
    *,
    one_partition: bool = False,
) -> Any:
    """The rows to emit: every key of ``fresh`` files with its aggregates over all state.

    Args:
        spark: The task's SparkSession.
        op: The operator.
        settled: State files whose keys were emitted already.
        fresh: State files received since the last emission (emit every key of them).
        schema: The state files' Spark schema (``StructType``), or None to infer it.
        one_partition: Read the files as one partition, so that the aggregation is one Spark
            stage with no shuffle (BATCH: the files are small partials of this subtask's key
            groups, already partitioned by the exchange).

    Returns:
        A lazy DataFrame ``(keys..., aggregates...)``, one row per key with fresh rows.
    """
    from pyspark.sql import functions as F

    def read(paths: list[str]) -> Any:
        reader = spark.read if schema is None else spark.read.schema(schema)
        frame = reader.parquet(*paths)
        return frame.coalesce(1) if one_partition else frame

    aggregates = _final_aggregates(op)
    if not settled:
        result = read(fresh).groupBy(*op.keys).agg(*aggregates)
    else:
        state = read(settled).withColumn(_FRESH, F.lit(False))
        state = state.unionByName(read(fresh).withColumn(_FRESH, F.lit(True)))
        result = (
            state.groupBy(*op.keys)
            .agg(*aggregates, F.max(_FRESH).alias(_FRESH))
            .where(F.col(_FRESH))
            .drop(_FRESH)
        )
    return result


def aggregated_once(frame: Any, op: KeyedAggregateOperator) -> Any:
    """The final row of every key of ``frame``: the user's aggregates over the partials (or
    the records) of a bounded input, aggregated once (BATCH).

    Args:
        frame: The partials or records as the HASH exchange carries them (lazy DataFrame;
            key group and target columns optional).
        op: The operator.

    Returns:
        A lazy DataFrame ``(keys..., aggregates...)``, one row per key.
    """
    return frame.groupBy(*op.keys).agg(*_final_aggregates(op))


def _final_aggregates(op: KeyedAggregateOperator) -> list[Any]:
    return op.plan.final_columns() if op.plan.decomposable else list(op.plan.columns)


def compacted_state(spark: Any, op: KeyedAggregateOperator, paths: list[str], schema: Any) -> Any:
    """The state files ``paths`` as one frame: partials merged per key and key group (their
    types kept), records copied as they are.

    Returns:
        A lazy DataFrame of the state files' schema.
    """
    from pyspark.sql import functions as F

    reader = spark.read if schema is None else spark.read.schema(schema)
    frame = reader.parquet(*paths)
    if not op.plan.decomposable:
        return frame
    merged = frame.groupBy(*op.keys, KEY_GROUP).agg(*op.plan.merge_columns())
    types = dict(frame.dtypes)
    return merged.select(*[F.col(c).cast(types[c]) for c in frame.columns])
