"""Per-split watermarks of a source subtask."""

from __future__ import annotations

import pytest

from millrace.runtime.io.partition_events import MAX_WATERMARK, MIN_WATERMARK
from millrace.spark.source_watermarks import SplitWatermarkTracker


def test_watermark_is_the_minimum_over_open_splits_and_the_pending_bound() -> None:
    tracker = SplitWatermarkTracker(max_out_of_orderness_ms=10)
    tracker.set_pending_bound(1_000)
    tracker.open_split(1, 0)
    tracker.open_split(2, 0)
    tracker.on_records(1, 500)
    tracker.on_records(2, 200)
    assert tracker.advance() == 189  # split 2: 200 - 10 - 1
    tracker.close_split(2)
    assert tracker.advance() == 489  # split 1: 500 - 10 - 1
    tracker.close_split(1)
    assert tracker.advance() == 1_000  # only the pending bound is left


def test_watermark_never_goes_back() -> None:
    tracker = SplitWatermarkTracker(0)
    tracker.set_pending_bound(100)
    assert tracker.advance() == 100
    tracker.open_split(7, 0)  # a split opened with a lower bound does not lower it
    assert tracker.advance() is None
    assert tracker.current() == 100


def test_before_any_bound_the_watermark_is_min() -> None:
    tracker = SplitWatermarkTracker(0)
    assert tracker.current() == MIN_WATERMARK
    assert tracker.advance() is None


def test_a_slow_split_holds_back_a_fast_one() -> None:
    """Files read in any order: the split behind in event time keeps the watermark."""
    tracker = SplitWatermarkTracker(0)
    tracker.set_pending_bound(10**12)
    tracker.open_split(1, 0)
    tracker.open_split(2, 0)
    tracker.on_records(2, 5_000_000)  # December
    tracker.on_records(1, 1_000)  # January
    assert tracker.advance() == 999


def test_negative_out_of_orderness_is_rejected() -> None:
    with pytest.raises(ValueError, match="out-of-orderness"):
        SplitWatermarkTracker(-1)


def test_an_unbounded_source_without_open_splits_holds_at_its_data() -> None:
    tracker = SplitWatermarkTracker(10)
    tracker.set_pending_bound(MAX_WATERMARK, more_expected=True)
    tracker.open_split("a", MIN_WATERMARK)
    tracker.on_records("a", 1_000)
    tracker.close_split("a", 2_000)
    assert tracker.advance() == 1_989  # not MAX: files still to come may hold older events
    tracker.set_pending_bound(MAX_WATERMARK, more_expected=False)
    assert tracker.advance() == MAX_WATERMARK  # a bounded source's end


def test_a_restored_split_with_nothing_new_does_not_hold_the_watermark_back() -> None:
    """Rescaled from two subtasks to one: the split the fast subtask had read to its end comes
    back with its own watermark, so the lagging split's new records move the watermark past
    the restored floor, as they would have in the failure-free run (CI's rescale test: the
    split held the watermark at the floor until new records came to it)."""
    tracker = SplitWatermarkTracker(0)
    tracker.set_pending_bound(MAX_WATERMARK, more_expected=True)
    tracker.restore(1_000)  # the minimum of the two former subtasks' watermarks
    tracker.open_split("p0", MIN_WATERMARK, restored_ms=9_999)  # read to its end before
    tracker.open_split("p1", MIN_WATERMARK, restored_ms=1_000)  # lagging
    assert tracker.split_watermark("p0") == 9_999
    tracker.on_records("p1", 8_001)
    assert tracker.advance() == 8_000
    assert tracker.split_watermark("p1") == 8_000
    assert tracker.split_watermark("unknown") == MIN_WATERMARK


def test_a_restored_split_is_never_behind_its_assignment_bound() -> None:
    tracker = SplitWatermarkTracker(0)
    tracker.set_pending_bound(MAX_WATERMARK)
    tracker.open_split("a", 5_000, restored_ms=MIN_WATERMARK)
    assert tracker.split_watermark("a") == 5_000


def test_a_lone_restored_split_with_nothing_new_stands_at_its_own_watermark() -> None:
    """Rescaled 1 -> 2: this subtask got only a split read to its end before; its watermark is
    that split's, not the restored floor (the minimum over the former subtasks)."""
    tracker = SplitWatermarkTracker(0)
    tracker.set_pending_bound(MAX_WATERMARK, more_expected=True)
    tracker.restore(1_000)
    tracker.open_split("p0", MIN_WATERMARK, restored_ms=9_999)
    assert tracker.advance() == 9_999
