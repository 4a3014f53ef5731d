"""FileSplitEnumerator: RequestNextInputSplit -> NextInputSplit in event-time order, with
watermark bounds."""

from __future__ import annotations

from millrace.connectors.file_formats import FileFormat
from millrace.connectors.file_split_enumerator import FileSplitEnumerator
from millrace.runtime.io.input_split import InputSplit
from millrace.runtime.io.partition_events import MAX_WATERMARK, MIN_WATERMARK


def split(n: int, low: int | None) -> InputSplit:
    return InputSplit(n, f"file-{n}", min_event_time_ms=low)


def enumerator_of(splits: list[InputSplit]) -> FileSplitEnumerator:
    enumerator = FileSplitEnumerator("unused", FileFormat("parquet"), "ts")
    enumerator.add_splits(splits)
    return enumerator


def test_splits_go_out_in_event_time_order_whatever_the_listing_order() -> None:
    assigner = enumerator_of([split(0, 300), split(1, 100), split(2, 200)])
    replies = [assigner.next_split() for _ in range(3)]
    assert [r.split.split_number for r in replies] == [1, 2, 0]
    assert [r.watermark_bound_ms for r in replies] == [99, 199, 299]
    assert [r.splits_assigned for r in replies] == [1, 2, 3]


def test_exhausted_source_answers_none_with_the_final_watermark() -> None:
    assigner = enumerator_of([split(0, 5)])
    assigner.next_split()
    reply = assigner.next_split()
    assert reply.split is None
    assert reply.watermark_bound_ms == MAX_WATERMARK
    assert (reply.splits_total, reply.splits_assigned) == (1, 1)


def test_unknown_minimum_holds_the_bound_at_min_until_it_is_assigned() -> None:
    assigner = enumerator_of([split(0, None), split(1, 100)])
    first = assigner.next_split()
    assert first.split.split_number == 1 and first.watermark_bound_ms == MIN_WATERMARK
    second = assigner.next_split()
    assert second.split.split_number == 0 and second.watermark_bound_ms == MIN_WATERMARK


def test_bound_never_passes_a_split_still_to_come() -> None:
    splits = [split(i, low) for i, low in enumerate([50, 10, 40, 10, 30])]
    assigner = enumerator_of(splits)
    remaining = {s.split_number: s.min_event_time_ms for s in splits}
    while (reply := assigner.next_split()).split is not None:
        assert all(reply.watermark_bound_ms < low for low in remaining.values())
        del remaining[reply.split.split_number]
