"""SourceCoordinator: discovery without repeats, restored splits and positions, start positions."""

from __future__ import annotations

import pytest

from millrace.api.connector.source import Boundedness
from millrace.connectors.kafka_partitions import partition_split
from millrace.connectors.kafka_split_enumerator import KafkaSplitEnumerator
from millrace.errors import PipelineError
from millrace.runtime.io.input_split import SplitState
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
