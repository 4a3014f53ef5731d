"""Spark column expressions of event-time windowing and key-group partitioning.

Internal columns: ``__ws`` window start (epoch microseconds, long), ``__kg`` a row's key group
(int; kept with keyed state so that it can be redistributed), ``__target`` the consumer subtask
of that key group. Key groups follow Flink: ``key_group = murmur3(keys) mod
max_parallelism`` and ``subtask = key_group * parallelism // max_parallelism``, so rescaling
moves whole key groups.
"""

from __future__ import annotations

from typing import Any

from millrace.api.windows import TumblingEventTimeWindows

__all__ = [
    "KEY_GROUP",
    "TARGET",
    "WINDOW_START",
    "key_group",
    "late_condition",
    "target_subtask",
    "window_end_ms",
    "window_output_columns",
    "window_start_us",
]

WINDOW_START = "__ws"
KEY_GROUP = "__kg"
TARGET = "__target"


def window_start_us(event_time: str, window: TumblingEventTimeWindows) -> Any:
    """Window start of each row's event time, epoch microseconds (long column)."""
    from pyspark.sql import functions as F

    ts = F.unix_micros(F.col(event_time))
    size = F.lit(window.size_ms * 1000)
    return ts - F.pmod(ts - F.lit(window.offset_ms * 1000), size)


def window_end_ms(window: TumblingEventTimeWindows) -> Any:
    """Window end (exclusive, epoch ms) of rows carrying ``__ws``."""
    from pyspark.sql import functions as F

    return F.floor(F.col(WINDOW_START) / 1000) + F.lit(window.size_ms)


def late_condition(window: TumblingEventTimeWindows, watermark_ms: int) -> Any:
    """True for rows whose window already fired at ``watermark_ms`` (end - 1 <= watermark)."""
    return window_end_ms(window) - 1 <= watermark_ms


def key_group(keys: tuple[str, ...], max_parallelism: int) -> Any:
    """Key group of each row: ``murmur3(keys) mod max_parallelism`` (int column)."""
    from pyspark.sql import functions as F

    return F.pmod(F.hash(*[F.col(k) for k in keys]), F.lit(max_parallelism))


def target_subtask(key_group_column: Any, max_parallelism: int, parallelism: int) -> Any:
    """Consumer subtask of each row: its key group scaled to ``parallelism`` (Flink's)."""
    from pyspark.sql import functions as F

    return (key_group_column * F.lit(parallelism) / F.lit(max_parallelism)).cast("int")


def window_output_columns(
    keys: tuple[str, ...], window: TumblingEventTimeWindows, names: tuple[str, ...]
) -> list[Any]:
    """``keys..., window_start, window_end, aggregates...`` with UTC timestamps."""
    from pyspark.sql import functions as F

    start = F.col(WINDOW_START)
    return [
        *[F.col(k) for k in keys],
        F.timestamp_micros(start).alias("window_start"),
        F.timestamp_micros(start + F.lit(window.size_ms * 1000)).alias("window_end"),
        *[F.col(f"`{n}`") for n in names],
    ]
