"""The Spark plans of a window task's state: which windows fire, what stays, compaction.

State rows carry their window (``__ws``, and ``__we`` for sessions), their key group
(``__kg``) and, with allowed lateness, ``__fresh``: whether the row arrived since the last
firing. A window fires when the watermark reaches its end - 1 for the first time (its end - 1
lies after the previous firing's watermark), and again while it stays in state (its end - 1 +
lateness is after the watermark) whenever fresh rows joined it: Flink's late firing, which
emits the window's full result once more. Session windows are merged per key before each of
these steps (``merge_sessions``), so a session that grew by a late record fires as the merged
session. Every function here builds one lazy plan; the task runs it as one Spark job.
"""

from __future__ import annotations

from typing import Any

from millrace.api.operators import WindowAggregateOperator
from millrace.runtime.io.partition_events import MAX_WATERMARK, MIN_WATERMARK
from millrace.spark.windowing import (
    KEY_GROUP,
    WINDOW_END,
    WINDOW_START,
    merge_sessions,
    window_end_ms,
    window_output_columns,
)

__all__ = [
    "FRESH",
    "compacted_state",
    "fired_once",
    "fired_windows",
    "live_rows",
    "retained_state",
]

FRESH = "__fresh"
_REFIRE = "__refire"


def _bounds(op: WindowAggregateOperator) -> list[str]:
    return [WINDOW_START, WINDOW_END] if op.window.is_merging else [WINDOW_START]


def _merged(frame: Any, op: WindowAggregateOperator) -> Any:
    return merge_sessions(frame, list(op.keys)) if op.window.is_merging else frame


def live_rows(frame: Any, op: WindowAggregateOperator, fired_ms: int) -> Any:
    """Rows of windows still in state after the firing at ``fired_ms``: those whose end - 1 +
    lateness lies after it (non-merging windows; a session's rows are judged together, when
    the state is rewritten after each firing)."""
    from pyspark.sql import functions as F

    if op.window.is_merging:
        return frame
    return frame.where(window_end_ms(op.window) - 1 + op.lateness_ms > F.lit(fired_ms))


def fired_windows(frame: Any, op: WindowAggregateOperator, watermark_ms: int, fired_ms: int) -> Any:
    """The output of the windows that fire at ``watermark_ms`` after a firing at ``fired_ms``.

    Schema:
        ``(keys..., window_start: timestamp, window_end: timestamp, aggregates...)``, one row
        per key and fired window; with a pandas function, the rows it returns (its schema).
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    end = window_end_ms(op.window)
    rows = _merged(frame, op).where(end - 1 <= F.lit(watermark_ms))
    first = end - 1 > F.lit(fired_ms)
    group = [*op.keys, *_bounds(op)]
    if op.function is None:
        aggregated = rows.groupBy(*group).agg(
            *(op.plan.final_columns() if op.plan.decomposable else op.plan.columns),
            F.max(FRESH).alias(_REFIRE),
        )
        due = aggregated.where(first | F.col(_REFIRE))
        names = tuple(c for c in aggregated.columns[len(group) :] if c != _REFIRE)
        return due.select(*window_output_columns(op.keys, op.window, names))
    refire = F.max(FRESH).over(Window.partitionBy(*group))
    due = rows.withColumn(_REFIRE, refire).where(first | F.col(_REFIRE))
    [start, stop] = window_output_columns((), op.window, ())
    internal = {WINDOW_START, WINDOW_END, KEY_GROUP, FRESH, _REFIRE}
    records = due.select(*[F.col(f"`{c}`") for c in due.columns if c not in internal], start, stop)
    return records.groupBy(*op.keys, "window_start", "window_end").applyInPandas(
        op.function.fn, op.function.schema
    )


def fired_once(frame: Any, op: WindowAggregateOperator) -> Any:
    """The output of every window of ``frame`` fired once, at the end of a bounded input
    (BATCH: as ``fired_windows`` at a MAX watermark with nothing fired before, in fewer plan
    steps: nothing to filter, no late firing to tell apart).

    Args:
        frame: State rows without ``__fresh`` (lazy DataFrame).
        op: The window operator.

    Schema:
        As ``fired_windows``.
    """
    from pyspark.sql import functions as F

    if op.function is not None:  # the pandas function's path, nothing fired before
        return fired_windows(
            frame.withColumn(FRESH, F.lit(False)), op, MAX_WATERMARK, MIN_WATERMARK
        )
    group = [*op.keys, *_bounds(op)]
    aggregated = (
        _merged(frame, op)
        .groupBy(*group)
        .agg(*(op.plan.final_columns() if op.plan.decomposable else op.plan.columns))
    )
    names = tuple(aggregated.columns[len(group) :])
    return aggregated.select(*window_output_columns(op.keys, op.window, names))


def retained_state(frame: Any, op: WindowAggregateOperator, watermark_ms: int) -> Any:
    """Session state after the firing at ``watermark_ms``: the rows of the sessions whose end
    - 1 + lateness lies after it, with their merged bounds (partials merged per session).

    Schema:
        ``frame``'s columns without ``__fresh``.
    """
    from pyspark.sql import functions as F

    merged = _merged(frame.drop(FRESH), op)
    kept = merged.where(window_end_ms(op.window) - 1 + op.lateness_ms > F.lit(watermark_ms))
    return _merge_partials(kept, frame.drop(FRESH), op)


def compacted_state(frame: Any, op: WindowAggregateOperator) -> Any:
    """``frame``'s rows in fewer rows: partial aggregates merged per key, window and key
    group (sessions merged first); buffered records copied, with their session's bounds.

    Schema:
        ``frame``'s columns without ``__fresh``.
    """
    return _merge_partials(_merged(frame.drop(FRESH), op), frame.drop(FRESH), op)


def _merge_partials(frame: Any, original: Any, op: WindowAggregateOperator) -> Any:
    from pyspark.sql import functions as F

    if op.function is not None or not op.plan.decomposable:
        return frame.select(*[F.col(f"`{c}`") for c in original.columns])
    merged = frame.groupBy(*op.keys, *_bounds(op), KEY_GROUP).agg(*op.plan.merge_columns())
    # Keep the partials' types (a sum of decimal sums would widen each compaction).
    types = dict(original.dtypes)
    return merged.select(*[F.col(f"`{c}`").cast(types[c]) for c in original.columns])
