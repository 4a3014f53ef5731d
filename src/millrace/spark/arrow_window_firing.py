"""A window firing without a Spark job: partial aggregates merged with Arrow's hash aggregation.

Where nothing but sinks follows the window (no pandas window function, no chained transform),
the windows do not merge (tumbling, sliding), the allowed lateness is 0 and every aggregate
decomposes (``count``, ``sum``, ``min``, ``max``, ``avg``; Flink's local-global aggregation),
a firing is one group-by over the partial aggregates of the pending files: Arrow's C++ hash
aggregation does it in the task's process, vectorized (no Python loop over records), where a
Spark job costs a scheduling round of 0.16-0.3 s on this machine (docs/benchmarks.md,
"where the time goes"; issue 13). Everything else fires through the Spark plan of
``window_firing``.

The result has the schema the Spark plan would give (``output_schema``: Spark's types of the
plan, mapped to Arrow as ``DataFrame.toArrow`` maps them), so the sinks see one schema
whichever path fired. Semantics are Spark's:
``count`` merges to a non-null long; ``sum``, ``min``, ``max`` skip nulls and are null when
every partial is; ``avg`` is the sum over the count as a double, null when the count is 0.
Where Arrow's merge could differ from Spark's (a decimal's sum, a NaN in a min/max, a floating
or nested key, a long sum that could overflow) ``fire_in_arrow`` answers None and the Spark
plan fires.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from millrace.api.operators import WindowAggregateOperator
from millrace.runtime.io import exchange_store
from millrace.spark.windowing import WINDOW_START

__all__ = ["arrow_firing_applies", "fire_in_arrow", "output_schema"]

_SUMMABLE = ("int64", "double")  # partial sum and count types merged as Spark does


def arrow_firing_applies(op: WindowAggregateOperator, transforms: Sequence[Any]) -> bool:
    """Whether ``op``'s firings may run in Arrow (see the module docstring); the partials'
    types are checked at each firing (``fire_in_arrow`` answers None when they do not fit)."""
    return (
        op.function is None
        and not transforms
        and not op.window.is_merging
        and op.lateness_ms == 0
        and op.plan.decomposable
    )


_SUM_LIMIT = 2.0**62  # below it, no sum of int64 partials can overflow


def _fits(table: Any, op: WindowAggregateOperator) -> bool:
    """Whether Arrow merges ``table``'s partials exactly as Spark would: sums and counts of
    long or double (a decimal's sum widens in Spark); keys and min/max of flat types; no
    floating key (Spark groups -0.0 with 0.0); no NaN in a min/max (Spark orders NaN above
    every number, Arrow skips it); long sums that cannot overflow (Spark raises, Arrow would
    wrap)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    schema = table.schema
    for key in op.keys:
        kind = schema.field(key).type
        if pa.types.is_nested(kind) or pa.types.is_floating(kind) or pa.types.is_dictionary(kind):
            return False
    for name in schema.names:
        if not name.startswith("__p"):
            continue
        kind, column = schema.field(name).type, table.column(name)
        if name.endswith(("_s", "_c")):
            if str(kind) not in _SUMMABLE:
                return False
            if pa.types.is_integer(kind):
                floats = pc.cast(column, pa.float64(), safe=False)
                bound = pc.sum(pc.abs(floats)).as_py() or 0.0
                if bound >= _SUM_LIMIT:
                    return False
        elif name.endswith("_m"):
            if pa.types.is_nested(kind) or pa.types.is_dictionary(kind):
                return False
            if pa.types.is_floating(kind) and pc.any(pc.is_nan(column)).as_py():
                return False
    return True


def output_schema(partials: Any, op: WindowAggregateOperator, large_var_types: bool) -> Any:
    """The ``pyarrow.Schema`` that ``fired_windows(...).toArrow()`` has for partials of the
    ``pyarrow.Schema`` ``partials``: Spark's analysed types (keys and min/max as read, counts
    a non-null long, sums as their partials, averages double, window bounds timestamps),
    mapped by pyspark's ``to_arrow_schema`` with the session's time zone (UTC) and
    ``spark.sql.execution.arrow.useLargeVarTypes`` (``large_var_types``)."""
    from pyspark.sql.pandas.types import from_arrow_type, to_arrow_schema
    from pyspark.sql.types import DoubleType, LongType, StructField, StructType, TimestampType

    calls = op.plan.calls
    assert calls is not None  # arrow_firing_applies

    def read(name: str) -> Any:
        return from_arrow_type(partials.field(name).type)

    fields = [StructField(k, read(k)) for k in op.keys]
    fields += [StructField(bound, TimestampType()) for bound in ("window_start", "window_end")]
    for i, call in enumerate(calls):
        if call.function == "count":
            fields.append(StructField(call.name, LongType(), nullable=False))
        elif call.function == "sum":
            fields.append(StructField(call.name, read(f"__p{i}_s")))
        elif call.function in ("min", "max"):
            fields.append(StructField(call.name, read(f"__p{i}_m")))
        else:
            fields.append(StructField(call.name, DoubleType()))
    return to_arrow_schema(
        StructType(fields),
        error_on_duplicated_field_names_in_struct=True,
        timezone="UTC",
        prefers_large_types=large_var_types,
    )


def fire_in_arrow(
    paths: Sequence[str],
    op: WindowAggregateOperator,
    watermark_ms: int,
    fired_ms: int,
    large_var_types: bool,
) -> Any | None:
    """The output of the windows that fire at ``watermark_ms`` after a firing at ``fired_ms``
    (as ``window_firing.fired_windows``), computed from the partials in ``paths``.

    Args:
        paths: Local Parquet files of partial aggregates (exchange or state files), each row
            with its key columns, ``__ws`` (window start, epoch µs) and ``__p{i}_*``.
        op: The window operator (``arrow_firing_applies`` holds).
        watermark_ms: The watermark fired at (epoch ms).
        fired_ms: The previous firing's watermark (epoch ms; the minimum before any).
        large_var_types: The session's ``spark.sql.execution.arrow.useLargeVarTypes``.

    Returns:
        ``pyarrow.Table`` of ``(keys..., window_start, window_end, aggregates...)``, one row per
        key and fired window; None if a partial's type is not one this path merges.

    Threading:
        The task thread.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    calls = op.plan.calls
    assert calls is not None  # arrow_firing_applies
    table = pa.concat_tables(
        [exchange_store.read_parquet(p) for p in paths], promote_options="permissive"
    )
    if not _fits(table, op):
        return None
    size_us = op.window.size_ms * 1000
    # window starts are whole milliseconds: the integer division is exact
    last_ms = pc.add(pc.divide(table.column(WINDOW_START), 1000), op.window.size_ms - 1)
    due = pc.and_(
        pc.less_equal(last_ms, pa.scalar(watermark_ms, pa.int64())),
        pc.greater(last_ms, pa.scalar(fired_ms, pa.int64())),
    )
    rows = table.filter(due)
    aggregations: list[tuple[str, str]] = []
    for i, call in enumerate(calls):
        if call.function == "count":
            aggregations.append((f"__p{i}_c", "sum"))
        elif call.function == "sum":
            aggregations.append((f"__p{i}_s", "sum"))
        elif call.function in ("min", "max"):
            aggregations.append((f"__p{i}_m", call.function))
        else:
            aggregations += [(f"__p{i}_s", "sum"), (f"__p{i}_c", "sum")]
    group = [*op.keys, WINDOW_START]
    try:
        merged = rows.group_by(group, use_threads=False).aggregate(aggregations)
    except pa.ArrowNotImplementedError:  # a type Arrow cannot group or compare: Spark can
        return None

    def merged_column(name: str, how: str) -> Any:
        return merged.column(f"{name}_{how}")

    start = merged.column(WINDOW_START)
    columns: list[Any] = [merged.column(k) for k in op.keys]
    columns += [
        pc.cast(start, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
        pc.add(start, size_us).cast(pa.timestamp("us", tz="UTC")),
    ]
    for i, call in enumerate(calls):
        if call.function == "count":
            columns.append(pc.fill_null(merged_column(f"__p{i}_c", "sum"), 0))
        elif call.function == "sum":
            columns.append(merged_column(f"__p{i}_s", "sum"))
        elif call.function in ("min", "max"):
            columns.append(merged_column(f"__p{i}_m", call.function))
        else:
            total = pc.cast(merged_column(f"__p{i}_s", "sum"), pa.float64())
            count = merged_column(f"__p{i}_c", "sum")
            none = pa.scalar(None, pa.float64())
            divided = pc.divide(total, pc.cast(count, pa.float64()))
            columns.append(pc.if_else(pc.equal(count, 0), none, divided))
    schema = output_schema(table.schema, op, large_var_types)
    return pa.Table.from_arrays(columns, names=schema.names).cast(schema)
