"""ResultPartition beyond the long polls of ``test_partitions``: its identity, what it counts,
an expired pull beside another, and release."""

from __future__ import annotations

import pytest

from millrace.errors import PartitionNotFoundError
from millrace.runtime.io.partition_events import (
    DataBundle,
    EndOfPartition,
    PartitionEvents,
    Watermark,
)
from millrace.runtime.io.result_partition import ResultPartition
from millrace.types import JobId, ResultPartitionId


def test_a_partition_knows_its_id_and_job_and_starts_empty() -> None:
    p = ResultPartition(ResultPartitionId("attempt-1"), JobId("job-1"), 2)
    assert (p.partition_id, p.job_id, p.num_subpartitions) == ("attempt-1", "job-1", 2)
    assert (p.num_events, p.has_data, p.finished) == (0, False, False)


def test_it_counts_every_event_and_has_data_once_a_bundle_came() -> None:
    p = ResultPartition(ResultPartitionId("p"), JobId("j"), 3)
    p.broadcast(Watermark(5))  # one event per subpartition
    assert (p.num_events, p.has_data) == (3, False)
    p.add(1, DataBundle("b", 1))
    p.add(1, Watermark(6))
    assert (p.num_events, p.has_data) == (5, True)


def test_a_subpartition_count_below_one_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match="a partition needs >= 1 subpartition, got 0"):
        ResultPartition(ResultPartitionId("p"), JobId("j"), 0)


def test_adding_after_the_end_names_the_partition() -> None:
    p = ResultPartition(ResultPartitionId("attempt-7"), JobId("j"), 1)
    p.broadcast(EndOfPartition())
    with pytest.raises(RuntimeError, match="partition attempt-7 already ended"):
        p.add(0, DataBundle("late", 1))


def test_expiring_one_parked_pull_leaves_the_others_parked() -> None:
    p = ResultPartition(ResultPartitionId("p"), JobId("j"), 1)
    first, second = p.poll(0, 0), p.poll(0, 0)
    p.expire(first, 0)
    assert first.result(0) == PartitionEvents(0, ())
    p.add(0, DataBundle("b", 1))
    assert second.result(0).events == (DataBundle("b", 1),)


def test_release_fails_every_parked_pull_and_drops_the_events() -> None:
    p = ResultPartition(ResultPartitionId("p"), JobId("j"), 2)
    p.add(0, DataBundle("b", 1))
    parked = [p.poll(0, 1), p.poll(1, 0)]
    p.release("released with job j")
    for pull in parked:
        error = pull.exception(0)
        assert isinstance(error, PartitionNotFoundError)
        assert "released with job j" in str(error)
    assert not p.poll(0, 0).done()  # nothing left to read from the start
