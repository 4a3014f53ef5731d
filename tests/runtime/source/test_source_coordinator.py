"""SourceCoordinator: discovery without repeats, restored splits and positions, start positions,
splits handed back (addSplitsBack)."""

from __future__ import annotations

import pytest

from millrace.api.connector.source import Boundedness
from millrace.connectors.file_formats import FileFormat
from millrace.connectors.file_split_enumerator import FileSplitEnumerator
from millrace.connectors.kafka_partitions import partition_split
from millrace.connectors.kafka_split_enumerator import KafkaSplitEnumerator
from millrace.errors import PipelineError
from millrace.runtime.io.input_split import InputSplit, SplitState
from millrace.runtime.io.partition_events import MIN_WATERMARK
from millrace.runtime.source.source_coordinator import SourceCoordinator


def coordinator(
    boundedness: Boundedness = Boundedness.CONTINUOUS_UNBOUNDED,
    finished: tuple[str, ...] = (),
    open_: tuple[SplitState, ...] = (),
) -> SourceCoordinator:
    enumerator = KafkaSplitEnumerator("127.0.0.1:9", "t", False, {}, 1.0)  # never discovers here
    return SourceCoordinator("kafka", enumerator, boundedness, finished, open_)


def test_splits_found_again_or_finished_before_are_not_added() -> None:
    source = coordinator(finished=("t/1",))
    assert source.add_discovered([partition_split("t", p) for p in range(3)]) == 2
    assert source.add_discovered([partition_split("t", 0), partition_split("t", 3)]) == 1
    assert (source.splits_total, source.splits_assigned) == (4, 1)


def test_open_splits_come_back_with_their_checkpointed_positions_once() -> None:
    restored = partition_split("t", 0, start_offset=5)
    source = coordinator(open_=(SplitState(restored, 120),))
    source.add_discovered([partition_split("t", 0, start_offset=900)])  # "latest" moved on
    reply = source.next_split(0, 1)
    assert reply.split == restored and reply.position == 120  # the checkpoint wins


def test_restored_splits_are_held_at_their_positions_until_handed_out() -> None:
    first, second = partition_split("t", 0), partition_split("t", 1)
    source = coordinator(open_=(SplitState(first, 120), SplitState(second, 7)))
    source.add_discovered([first, second])
    assert set(source.unassigned_restored()) == {SplitState(first, 120), SplitState(second, 7)}
    source.next_split(0, 2)
    assert source.unassigned_restored() == (SplitState(second, 7),)
    source.next_split(1, 2)
    assert source.unassigned_restored() == ()


def test_a_restored_split_comes_back_with_its_own_watermark() -> None:
    first, second = partition_split("t", 0), partition_split("t", 1)
    source = coordinator(open_=(SplitState(first, 120, watermark_ms=9_999), SplitState(second, 7)))
    source.add_discovered([first, second])
    assert SplitState(first, 120, watermark_ms=9_999) in source.unassigned_restored()
    replies = {r.split.split_id: r for r in (source.next_split(0, 2), source.next_split(1, 2))}
    assert replies[first.split_id].split_watermark_ms == 9_999
    assert replies[second.split_id].split_watermark_ms == MIN_WATERMARK


def test_a_split_never_checkpointed_starts_at_its_start_position_else_at_zero() -> None:
    source = coordinator()
    source.add_discovered([partition_split("t", 0, start_offset=42), partition_split("t", 1)])
    first, second = source.next_split(0, 2), source.next_split(1, 2)
    assert (first.split.path, first.position) == ("t/0", 42)
    assert (second.split.path, second.position) == ("t/1", 0)


def test_an_unbounded_source_without_a_split_says_more_may_come() -> None:
    assert coordinator().next_split(0, 1).more_expected
    assert not coordinator(Boundedness.BOUNDED).next_split(0, 1).more_expected


class BrokenEnumerator(KafkaSplitEnumerator):
    def next_split(self, subtask_index: int, parallelism: int):
        raise ValueError("offsets unreadable")


def test_a_failing_enumerator_is_a_pipeline_error_naming_the_source_with_its_cause() -> None:
    source = SourceCoordinator(
        "kafka", BrokenEnumerator("127.0.0.1:9", "t", False, {}, 1.0), Boundedness.BOUNDED
    )
    with pytest.raises(PipelineError, match="kafka: the split enumerator failed: ValueError") as e:
        source.next_split(0, 1)
    assert isinstance(e.value.__cause__, ValueError)


def file_source(splits: int) -> SourceCoordinator:
    enumerator = FileSplitEnumerator("unused", FileFormat("parquet"), "ts")
    source = SourceCoordinator("files", enumerator, Boundedness.BOUNDED)
    source.add_discovered([InputSplit(n, f"f{n}", min_event_time_ms=n * 10) for n in range(splits)])
    return source


def test_a_failed_subtasks_splits_go_out_again_and_no_other_ones() -> None:
    source = file_source(4)
    handed = [source.next_split(i % 2, 2).split for i in range(3)]  # 0 -> f0, f2; 1 -> f1
    assert source.takes_splits_back
    assert source.add_splits_back(0) == 2
    assert (source.splits_total, source.splits_assigned) == (4, 1)  # f1 stays handed out
    again = [source.next_split(0, 2).split for _ in range(3)]
    assert [s.path for s in again] == ["f0", "f2", "f3"]  # in event-time order, f3 after them
    assert handed[1].path == "f1" and source.next_split(0, 2).split is None
    assert source.add_splits_back(1) == 1  # only f1: subtask 1 was handed nothing else


def test_splits_handed_back_twice_are_not_handed_back_again() -> None:
    source = file_source(2)
    source.next_split(0, 1)
    assert source.add_splits_back(0) == 1
    assert source.add_splits_back(0) == 0  # the failed attempt's list went with them
    assert (source.splits_total, source.splits_assigned) == (2, 0)


def test_a_split_handed_back_keeps_the_position_it_was_handed_out_with() -> None:
    restored = partition_split("t", 0, start_offset=5)
    enumerator = KafkaSplitEnumerator("127.0.0.1:9", "t", True, {}, 1.0)
    source = SourceCoordinator(
        "kafka", enumerator, Boundedness.BOUNDED, (), (SplitState(restored, 120, False, 9_999),)
    )
    source.add_discovered([restored])
    assert source.next_split(0, 1).position == 120
    source.add_splits_back(0)
    again = source.next_split(0, 1)
    assert (again.position, again.split_watermark_ms) == (120, 9_999)  # and its watermark


def test_an_unbounded_source_takes_no_splits_back() -> None:
    source = coordinator()
    source.add_discovered([partition_split("t", 0)])
    source.next_split(0, 1)
    assert not source.takes_splits_back
    with pytest.raises(PipelineError, match="cannot take splits back"):
        source.add_splits_back(0)
