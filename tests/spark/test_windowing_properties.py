"""Properties of the Spark side of windowing and key groups, checked against the pure Python
definitions for random inputs: the window start Spark computes per row is Flink's
getWindowStartWithOffset, a sliding record gets exactly its windows (its latest marked), a
key's session windows merge as Flink's MergingWindowSet merges them, every row's key group
lies in ``[0, max_parallelism)`` and depends on its key alone, and the consumer subtask the
exchange sends a row to owns the row's key group. Every input row comes back exactly once
(rows carry an id; the returned rows are compared as a multiset). Each example is one Spark
job over a batch of rows."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from millrace.api.windows import (
    EventTimeSessionWindows,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
)
from millrace.runtime.checkpoint.key_groups import key_group_range
from millrace.spark.windowing import (
    LATEST,
    WINDOW_END,
    WINDOW_START,
    assign_windows,
    key_group,
    merge_sessions,
    target_subtask,
    window_start_us,
)

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
    """Every record comes back once from ``assign_windows`` (the window tasks' step), with
    Flink's window start of its timestamp: the rows as a multiset, each with its id."""
    from pyspark.sql import functions as F

    frame = spark.createDataFrame(list(enumerate(timestamps_ms)), "id long, ms long").select(
        "id", "ms", F.timestamp_millis("ms").alias("t")
    )
    rows = assign_windows(frame, "t", window).select("id", "ms", WINDOW_START).collect()
    got = Counter(tuple(row) for row in rows)
    want = Counter((i, t, window.window_start_ms(t) * 1000) for i, t in enumerate(timestamps_ms))
    assert got == want, f"surplus {got - want}, missing {want - got}"
    column = frame.select("id", window_start_us("t", window).alias("start")).collect()
    assert Counter(tuple(row) for row in column) == Counter((i, s) for i, _, s in want)


@settings(max_examples=25)
@given(
    st.integers(1, 4096),
    st.integers(1, 64),
    st.lists(st.text(max_size=8) | st.none(), min_size=1, max_size=50),
)
def test_rows_go_to_the_subtask_owning_their_key_group(
    spark: Any, max_parallelism: int, parallelism: int, keys: list[str | None]
) -> None:
    """Every row comes back once with a key group in ``[0, max_parallelism)`` that depends on
    its key alone, and a target subtask whose key-group range holds it."""
    parallelism = min(parallelism, max_parallelism)
    frame = spark.createDataFrame(list(enumerate(keys)), "id long, carrier string")
    group = key_group(("carrier",), max_parallelism)
    rows = frame.select(
        "id",
        "carrier",
        group.alias("kg"),
        target_subtask(group, max_parallelism, parallelism).alias("to"),
    ).collect()
    got, want = Counter((r.id, r.carrier) for r in rows), Counter(enumerate(keys))
    assert got == want, f"surplus {got - want}, missing {want - got}"
    groups: dict[str | None, set[int]] = {}
    for row in rows:
        assert row.kg is not None and 0 <= row.kg < max_parallelism, row
        assert row.to is not None and row.kg in key_group_range(
            max_parallelism, parallelism, row.to
        ), row
        groups.setdefault(row.carrier, set()).add(row.kg)
    assert all(len(g) == 1 for g in groups.values()), groups  # a key's state in one group


@st.composite
def sliding_windows(draw: st.DrawFn) -> SlidingEventTimeWindows:
    slide = draw(st.integers(1, 10 * DAY_MS))
    size = draw(st.integers(1, 40) if draw(st.booleans()) else st.integers(1, 8 * slide))
    return SlidingEventTimeWindows(size, slide, draw(st.integers(0, slide - 1)))


@settings(max_examples=25)
@given(sliding_windows(), st.lists(st.integers(-(10**12), 4 * 10**12), min_size=1, max_size=50))
@example(SlidingEventTimeWindows(10, 100), [-100, -90, 0, 9, 10, 99, 100])  # window ends, gaps
def test_spark_sliding_windows_are_flinks(
    spark: Any, window: SlidingEventTimeWindows, timestamps_ms: list[int]
) -> None:
    from pyspark.sql import functions as F

    frame = spark.createDataFrame([(t,) for t in timestamps_ms], "ms long").select(
        "ms", F.timestamp_millis("ms").alias("t")
    )
    rows = assign_windows(frame, "t", window).select("ms", WINDOW_START, LATEST).collect()
    got: dict[int, list[tuple[int, bool]]] = {}
    for row in rows:
        got.setdefault(row.ms, []).append((row[WINDOW_START], row[LATEST]))
    for t in set(timestamps_ms):
        expected = [
            (start * 1000, i == 0) for i, (start, _) in enumerate(window.assign_windows_ms(t))
        ]
        assert sorted(got.get(t, [])) == sorted(expected * timestamps_ms.count(t)), t


@settings(max_examples=25)
@given(
    st.integers(1, 12),
    st.lists(st.tuples(st.sampled_from("ab"), st.integers(-50, 50)), min_size=1, max_size=40),
)
def test_spark_merges_sessions_as_flink(
    spark: Any, gaps: int, records: list[tuple[str, int]]
) -> None:
    from pyspark.sql import functions as F

    """Every record comes back once, in the one merged session of its key that holds it: the
    rows (id, key, time, session) as a multiset, so each session's record count adds up."""
    unit = 60_000
    window = EventTimeSessionWindows(gaps * unit)
    frame = spark.createDataFrame(
        [(i, k, t * unit) for i, (k, t) in enumerate(records)], "id long, k string, ms long"
    )
    assigned = assign_windows(frame.withColumn("t", F.timestamp_millis("ms")), "t", window)
    rows = merge_sessions(assigned, ["k"]).select("id", "k", "ms", WINDOW_START, WINDOW_END)
    got = Counter(tuple(row) for row in rows.collect())
    want: Counter[tuple[int, str, int, int, int]] = Counter()
    for key in "ab":
        windows = [window.assign_windows_ms(t * unit)[0] for k, t in records if k == key]
        sessions = window.merge_windows_ms(windows)
        for i, (k, t) in enumerate(records):
            if k == key:
                [(start, end)] = [(s, e) for s, e in sessions if s <= t * unit < e]
                want[(i, k, t * unit, start * 1000, end * 1000)] += 1
    assert got == want, f"surplus {got - want}, missing {want - got}"
