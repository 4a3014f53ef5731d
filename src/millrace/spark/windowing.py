"""Spark column expressions of event-time windowing and key-group partitioning.

Internal columns: ``__ws`` window start (epoch microseconds, long), ``__we`` window end (epoch
microseconds, long; only for merging windows, whose length varies: sessions), ``__kg`` a row's
key group (int; kept with keyed state so that it can be redistributed), ``__target`` the
consumer subtask of that key group. Key groups follow Flink: ``key_group = murmur3(keys) mod
max_parallelism`` and ``subtask = key_group * parallelism // max_parallelism``, so rescaling
moves whole key groups.

Each assigner of ``millrace.api.windows`` maps to columns here: ``assign_windows`` adds a
record's window start(s) in the bundle's own plan (sliding windows: one row per window, by
``explode``), ``window_end_ms`` reads a row's window end, and ``merge_sessions`` merges a key's
overlapping session windows with window functions (gaps and islands).
"""

from __future__ import annotations

from typing import Any

from millrace.api.windows import (
    EventTimeSessionWindows,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
    WindowAssigner,
)

__all__ = [
    "KEY_GROUP",
    "LATEST",
    "TARGET",
    "WINDOW_END",
    "WINDOW_START",
    "assign_windows",
    "key_group",
    "late_condition",
    "marks_latest",
    "merge_sessions",
    "target_subtask",
    "window_end_ms",
    "window_output_columns",
    "window_start_us",
    "window_starts_us",
]

WINDOW_START = "__ws"
WINDOW_END = "__we"
LATEST = "__latest"
KEY_GROUP = "__kg"
TARGET = "__target"


def window_start_us(event_time: str, window: TumblingEventTimeWindows) -> Any:
    """Tumbling window start of each row's event time, epoch microseconds (long column).

    Raises:
        TypeError: If ``window`` is not tumbling (a record has one window start only there;
            see ``window_starts_us``).
    """
    from pyspark.sql import functions as F

    if not isinstance(window, TumblingEventTimeWindows):
        raise TypeError(f"window_start_us() takes tumbling windows, got {window}")
    # SQL text: one py4j call where the column functions took a dozen (every bundle's plan)
    ts = f"unix_micros({_sql_name(event_time)})"
    offset, size = int(window.offset_ms) * 1000, int(window.size_ms) * 1000
    return F.expr(f"{ts} - pmod({ts} - {offset}, {size})")


def window_starts_us(event_time: str, window: WindowAssigner) -> Any:
    """Every window start of each row's event time, epoch microseconds (``array<long>``
    column; Flink's ``assignWindows``): one for tumbling windows and sessions, up to
    ``ceil(size / slide)`` for sliding ones, latest first."""
    from pyspark.sql import functions as F

    if isinstance(window, TumblingEventTimeWindows):
        return F.array(window_start_us(event_time, window))
    if isinstance(window, EventTimeSessionWindows):
        return F.array(F.unix_micros(F.col(event_time)))
    if not isinstance(window, SlidingEventTimeWindows):
        raise TypeError(f"unknown window assigner {window!r}")
    ts = F.unix_micros(F.col(event_time))
    slide = window.slide_ms * 1000
    last = ts - F.pmod(ts - F.lit(window.offset_ms * 1000), F.lit(slide))
    steps = F.sequence(F.lit(0), F.lit(window.windows_per_record - 1))
    starts = F.transform(steps, lambda k: last - k.cast("long") * F.lit(slide))
    return F.filter(starts, lambda s: s > ts - F.lit(window.size_ms * 1000))


def assign_windows(frame: Any, event_time: str, window: WindowAssigner) -> Any:
    """``frame`` with each record's window: ``__ws`` (and ``__we`` for sessions); a record of
    sliding windows becomes one row per window (``posexplode``), in the same plan, with
    ``__latest`` true on the row of its latest window (the last to fire).

    Schema:
        ``(frame's columns..., __ws: long[, __we: long][, __latest: boolean])``.
    """
    from pyspark.sql import functions as F

    if isinstance(window, TumblingEventTimeWindows):
        return frame.withColumn(WINDOW_START, window_start_us(event_time, window))
    if isinstance(window, EventTimeSessionWindows):
        start = F.unix_micros(F.col(event_time))
        return frame.select(
            "*",
            start.alias(WINDOW_START),
            (start + F.lit(window.gap_ms * 1000)).alias(WINDOW_END),
        )
    exploded = F.posexplode(window_starts_us(event_time, window)).alias(LATEST, WINDOW_START)
    return frame.select("*", exploded).withColumn(LATEST, F.col(LATEST) == 0)


def marks_latest(window: WindowAssigner) -> bool:
    """Whether ``assign_windows`` gives ``window``'s rows a ``__latest`` column (a record in
    several windows: sliding ones)."""
    return isinstance(window, SlidingEventTimeWindows)


def window_end_ms(window: WindowAssigner) -> Any:
    """Window end (exclusive, epoch ms) of rows carrying ``__ws`` (and ``__we``)."""
    from pyspark.sql import functions as F

    if window.is_merging:
        return F.floor(F.col(WINDOW_END) / 1000)
    return F.floor(F.col(WINDOW_START) / 1000) + F.lit(window.size_ms)


def late_condition(window: WindowAssigner, watermark_ms: int, lateness_ms: int = 0) -> Any:
    """True for rows whose window is past its allowed lateness at ``watermark_ms``
    (``end - 1 + lateness <= watermark``, Flink's ``isWindowLate``)."""
    return window_end_ms(window) - 1 + lateness_ms <= watermark_ms


def merge_sessions(frame: Any, partition: list[str]) -> Any:
    """Merge overlapping or touching session windows ``[__ws, __we)`` per ``partition``
    (the key columns), as Flink's ``MergingWindowSet`` does: every row gets its merged
    session's bounds in ``__ws`` and ``__we``. Gaps and islands with window functions: a row
    starts a new session when its start lies after every earlier end of its key.

    Schema:
        ``frame``'s columns, ``__ws`` and ``__we`` replaced by the session's bounds.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    ordered = Window.partitionBy(*partition).orderBy(WINDOW_START, WINDOW_END)
    before = ordered.rowsBetween(Window.unboundedPreceding, -1)
    running = ordered.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    new = F.coalesce(F.col(WINDOW_START) > F.max(WINDOW_END).over(before), F.lit(True))
    session = "__session"
    marked = frame.withColumn(session, F.sum(new.cast("long")).over(running))
    island = Window.partitionBy(*partition, session)
    return marked.select(
        *[F.col(f"`{c}`") for c in frame.columns if c not in (WINDOW_START, WINDOW_END)],
        F.min(WINDOW_START).over(island).alias(WINDOW_START),
        F.max(WINDOW_END).over(island).alias(WINDOW_END),
    )


def key_group(keys: tuple[str, ...], max_parallelism: int) -> Any:
    """Key group of each row: ``murmur3(keys) mod max_parallelism`` (int column).

    Built from SQL text, one py4j call instead of one per function and column (plan building
    is on the critical path of every bundle).
    """
    from pyspark.sql import functions as F

    columns = ", ".join(_sql_name(k) for k in keys)
    return F.expr(f"pmod(hash({columns}), {int(max_parallelism)})")


def target_subtask(key_group_column: Any, max_parallelism: int, parallelism: int) -> Any:
    """Consumer subtask of each row: its key group scaled to ``parallelism`` (Flink's)."""
    return (key_group_column * int(parallelism) / int(max_parallelism)).cast("int")


def _sql_name(name: str) -> str:
    """``name`` as ``F.col(name)`` reads it (dots reach into structs), quoted for SQL text;
    a name the user quoted already stays as it is."""
    if "`" in name:
        return name
    return ".".join(f"`{part}`" for part in name.split("."))


def window_output_columns(
    keys: tuple[str, ...], window: WindowAssigner, names: tuple[str, ...]
) -> list[Any]:
    """``keys..., window_start, window_end, aggregates...`` with UTC timestamps."""
    from pyspark.sql import functions as F

    start = F.col(WINDOW_START)
    end = F.col(WINDOW_END) if window.is_merging else start + F.lit(window.size_ms * 1000)
    return [
        *[F.col(k) for k in keys],
        F.timestamp_micros(start).alias("window_start"),
        F.timestamp_micros(end).alias("window_end"),
        *[F.col(f"`{n}`") for n in names],
    ]
