"""Properties of event-time window assignment, for any size, slide, offset and timestamp,
before the epoch too. Tumbling (Flink's TimeWindow.getWindowStartWithOffset): the window holds
the timestamp, starts on the offset grid, and neighbouring timestamps share a window exactly
when no window boundary lies between them. Sliding: a record gets exactly the grid windows that
hold it. Sessions: merged windows are disjoint and cover every record's window. For all: the
earliest end of an unfired window after a watermark."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from millrace.api.windows import (
    EventTimeSessionWindows,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
)

DAY_MS = 86_400_000
timestamps = st.integers(-(10**13), 10**13)  # about 1653 to 2286


@st.composite
def windows(draw: st.DrawFn) -> TumblingEventTimeWindows:
    size = draw(st.integers(1, 400 * DAY_MS))
    return TumblingEventTimeWindows(size, draw(st.integers(0, size - 1)))


@given(windows(), timestamps)
def test_the_window_of_a_timestamp_holds_it_and_starts_on_the_grid(
    window: TumblingEventTimeWindows, timestamp: int
) -> None:
    start = window.window_start_ms(timestamp)
    assert start <= timestamp < start + window.size_ms
    assert (start - window.offset_ms) % window.size_ms == 0


@given(windows(), timestamps, st.integers(0, 10 * DAY_MS))
def test_two_timestamps_share_a_window_when_no_boundary_lies_between(
    window: TumblingEventTimeWindows, first: int, gap: int
) -> None:
    second = first + gap
    next_boundary = window.window_start_ms(first) + window.size_ms
    same = window.window_start_ms(first) == window.window_start_ms(second)
    assert same == (second < next_boundary)


@given(windows(), timestamps)
def test_a_window_start_is_its_own_window_start(
    window: TumblingEventTimeWindows, timestamp: int
) -> None:
    start = window.window_start_ms(timestamp)
    assert window.window_start_ms(start) == start
    assert window.window_start_ms(start - 1) == start - window.size_ms


@st.composite
def sliding_windows(draw: st.DrawFn) -> SlidingEventTimeWindows:
    slide = draw(st.integers(1, 10 * DAY_MS))
    size = draw(st.integers(1, 40) if draw(st.booleans()) else st.integers(1, 8 * slide))
    return SlidingEventTimeWindows(size, slide, draw(st.integers(0, slide - 1)))


@given(sliding_windows(), timestamps)
def test_a_record_belongs_to_exactly_the_sliding_windows_that_hold_it(
    window: SlidingEventTimeWindows, timestamp: int
) -> None:
    assigned = window.assign_windows_ms(timestamp)
    for start, end in assigned:
        assert start <= timestamp < end == start + window.size_ms
        assert (start - window.offset_ms) % window.slide_ms == 0
    # brute force: every grid start within one size before the timestamp
    first = window.last_start_ms(timestamp) - window.windows_per_record * window.slide_ms
    grid = range(first, timestamp + 1, window.slide_ms)
    assert sorted(assigned) == [
        (s, s + window.size_ms) for s in grid if s + window.size_ms > timestamp
    ]
    assert len(assigned) <= window.windows_per_record


@given(sliding_windows() | windows(), timestamps)
def test_no_window_ending_before_the_next_unfired_end_is_unfired(
    window: SlidingEventTimeWindows | TumblingEventTimeWindows, watermark: int
) -> None:
    next_end = window.next_unfired_end_ms(watermark)
    assert next_end - 1 > watermark
    # that end is a window's end, and the window before it on the grid has fired
    start = next_end - window.size_ms
    assert (start - window.offset_ms) % window.slide_ms == 0
    assert start - window.slide_ms + window.size_ms - 1 <= watermark


@given(
    st.integers(1, 12),
    st.lists(st.integers(-50, 50), min_size=1, max_size=30),
    st.integers(1, 3_600_000),
)
def test_merged_sessions_are_disjoint_and_cover_every_record_window(
    gaps: int, steps: list[int], unit: int
) -> None:
    # on a grid of ``unit``, so that windows often touch exactly
    gap, times = gaps * unit, [k * unit for k in steps]
    window = EventTimeSessionWindows(gap)
    records = [w for t in times for w in window.assign_windows_ms(t)]
    merged = window.merge_windows_ms(records)
    for (_, end), (start, _) in itertools.pairwise(merged):
        assert end < start  # touching windows merge (Flink's TimeWindow.intersects)
    for start, end in records:
        assert any(s <= start and end <= e for s, e in merged)
    for s, e in merged:  # a session starts at a record and ends a gap after one
        assert s in times and e - gap in times


@given(st.integers(1, DAY_MS), timestamps)
def test_a_session_is_unfired_exactly_while_its_end_lies_after_the_watermark_plus_one(
    gap: int, watermark: int
) -> None:
    assert EventTimeSessionWindows(gap).next_unfired_end_ms(watermark) == watermark + 2
