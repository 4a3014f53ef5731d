"""The Spark columns of ``spark/windowing.py`` that the properties of
``test_windowing_properties`` leave out, against the pure definitions of
``api/windows.py``: a window's end, lateness at a watermark (its boundary included), and the
output columns of a fired window."""

from __future__ import annotations

from typing import Any

import pytest

from millrace.api.windows import TumblingEventTimeWindows
from millrace.spark.windowing import (
    WINDOW_START,
    late_condition,
    window_end_ms,
    window_output_columns,
    window_start_us,
)

pytestmark = [pytest.mark.slow, pytest.mark.spark]

HOUR_MS = 3_600_000
WINDOW = TumblingEventTimeWindows(HOUR_MS, 15 * 60_000)  # [hh:15, hh+1:15)
# event times, epoch ms: before 1970, on a window's first and last millisecond, in 2013
TIMES = [-5_400_001, 900_000, 4_499_999, 1_357_000_000_000]


def frame_of(spark: Any, times_ms: list[int]) -> Any:
    from pyspark.sql import functions as F

    rows = spark.createDataFrame([(t,) for t in times_ms], "ms long")
    return rows.select("ms", F.timestamp_millis("ms").alias("t")).withColumn(
        WINDOW_START, window_start_us("t", WINDOW)
    )


def end_of(timestamp_ms: int) -> int:
    return WINDOW.window_start_ms(timestamp_ms) + WINDOW.size_ms


def test_the_window_end_is_the_exclusive_end_in_epoch_ms(spark: Any) -> None:
    rows = frame_of(spark, TIMES).select("ms", window_end_ms(WINDOW).alias("end")).collect()
    assert {r.ms: r.end for r in rows} == {t: end_of(t) for t in TIMES}


@pytest.mark.parametrize("before_end_ms", [1, 2])
def test_a_row_is_late_once_the_watermark_reached_its_windows_last_millisecond(
    spark: Any, before_end_ms: int
) -> None:
    watermark = end_of(TIMES[1]) - before_end_ms  # 1: the last ms of the window; 2: before it
    rows = frame_of(spark, TIMES).select("ms", late_condition(WINDOW, watermark).alias("late"))
    late = {r.ms: r.late for r in rows.collect()}
    assert late == {t: end_of(t) - 1 <= watermark for t in TIMES}
    assert late[TIMES[1]] is (before_end_ms == 1)


def test_a_fired_window_has_its_keys_its_bounds_as_utc_timestamps_and_its_aggregates(
    spark: Any,
) -> None:
    from pyspark.sql import functions as F

    fired = frame_of(spark, TIMES).select(
        F.lit("AA").alias("carrier"), WINDOW_START, (F.col("ms") + 1).alias("delay.p50")
    )
    out = fired.select(*window_output_columns(("carrier",), WINDOW, ("delay.p50",)))
    assert out.columns == ["carrier", "window_start", "window_end", "delay.p50"]
    assert dict(out.dtypes)["window_start"] == "timestamp"
    bounds = out.select(
        F.unix_micros("window_start").alias("start"),
        F.unix_micros("window_end").alias("end"),
        F.col("`delay.p50`").alias("value"),
    ).collect()
    assert sorted((r.start, r.end, r.value) for r in bounds) == sorted(
        ((end_of(t) - HOUR_MS) * 1000, end_of(t) * 1000, t + 1) for t in TIMES
    )


def test_key_groups_of_keys_with_spaces_dots_and_struct_fields(spark) -> None:
    """The key group's SQL text names its keys as ``F.col`` would: a name with a space, a
    struct's field, a quoted name with a dot."""
    from pyspark.sql import functions as F

    from millrace.spark.windowing import key_group

    rows = spark.createDataFrame(
        [("a", 1, ("x",), 5), ("b", 2, ("y",), 6), ("c", 3, ("z",), 7)],
        "`my key` string, n int, s struct<f: string>, `d.e` int",
    )
    keys = ("my key", "s.f", "`d.e`")
    ours = rows.select(key_group(keys, 128).alias("kg")).collect()
    spark_s = rows.select(
        F.pmod(F.hash(*[F.col(k) for k in keys]), F.lit(128)).alias("kg")
    ).collect()
    assert [r.kg for r in ours] == [r.kg for r in spark_s]
