"""Properties of the Spark side of windowing and key groups, checked against the pure Python
definitions for random inputs: the window start Spark computes per row is Flink's
getWindowStartWithOffset, every row's key group lies in ``[0, max_parallelism)``, and the
consumer subtask the exchange sends a row to owns the row's key group. Each example is one
Spark job over a batch of rows."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from millrace.api.windows import TumblingEventTimeWindows
from millrace.runtime.checkpoint.key_groups import key_group_range
from millrace.spark.windowing import key_group, target_subtask, window_start_us

pytestmark = [pytest.mark.slow, pytest.mark.spark]

DAY_MS = 86_400_000


@st.composite
def windows(draw: st.DrawFn) -> TumblingEventTimeWindows:
    size = draw(st.integers(1, 400 * DAY_MS))
    return TumblingEventTimeWindows(size, draw(st.integers(0, size - 1)))


@settings(max_examples=25)
@given(windows(), st.lists(st.integers(-(10**12), 4 * 10**12), min_size=1, max_size=50))
def test_spark_window_starts_are_flinks(
    spark: Any, window: TumblingEventTimeWindows, timestamps_ms: list[int]
) -> None:
    from pyspark.sql import functions as F

    frame = spark.createDataFrame([(t,) for t in timestamps_ms], "ms long").select(
        "ms", F.timestamp_millis("ms").alias("t")
    )
    rows = frame.select("ms", window_start_us("t", window).alias("start")).collect()
    for row in rows:
        assert row.start == window.window_start_ms(row.ms) * 1000, row


@settings(max_examples=25)
@given(
    st.integers(1, 4096),
    st.integers(1, 64),
    st.lists(st.text(max_size=8) | st.none(), min_size=1, max_size=50),
)
def test_rows_go_to_the_subtask_owning_their_key_group(
    spark: Any, max_parallelism: int, parallelism: int, keys: list[str | None]
) -> None:
    parallelism = min(parallelism, max_parallelism)
    frame = spark.createDataFrame([(k,) for k in keys], "carrier string")
    group = key_group(("carrier",), max_parallelism)
    rows = frame.select(
        group.alias("kg"), target_subtask(group, max_parallelism, parallelism).alias("to")
    ).collect()
    for row in rows:
        assert 0 <= row.kg < max_parallelism
        assert row.kg in key_group_range(max_parallelism, parallelism, row.to), row
