"""The HttpSource's JobMaster side: ``open`` starts the endpoint and opens the log, the log is
the one split (to subtask 0), and a committed checkpoint truncates the log below the position
the checkpoint holds for it (``notify_committed``, as the Scheduler calls it)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from millrace import Configuration, HttpSource
from millrace.api.connector.source import Boundedness
from millrace.connectors.http_source_log import list_segments, truncation_mark
from millrace.connectors.http_source_server import stop_servers
from millrace.runtime.checkpoint.checkpoint_storage import CheckpointMetadata, VertexState
from millrace.runtime.checkpoint.task_state_snapshot import TaskStateSnapshot
from millrace.runtime.io.input_split import SplitState
from millrace.runtime.source.source_coordinator import SourceCoordinator, notify_committed
from millrace.types import JobId, JobVertexId
from tests.waiting import wait_until

TOKEN = "a-token-of-the-enumerator-tests"


@pytest.fixture
def opened(tmp_path: Path) -> Iterator[tuple[SourceCoordinator, str]]:
    source = HttpSource("id long", name="orders", token=TOKEN)
    enumerator = source.create_enumerator(None)
    conf = Configuration({"io.tmp.dirs": str(tmp_path / "tmp"), "http-source.port": 0})
    try:
        enumerator.open(conf, "job1", "orders")
        coordinator = SourceCoordinator("orders", enumerator, source.boundedness)
        coordinator.add_discovered(enumerator.discover())
        yield coordinator, str(tmp_path / "tmp" / "http-sources" / "job1" / "orders")
    finally:
        stop_servers()


def _metadata(checkpoint_id: int, state: TaskStateSnapshot) -> CheckpointMetadata:
    vertex = VertexState(JobVertexId("src"), "orders", 1, {0: state})
    return CheckpointMetadata(JobId("job1"), "j", checkpoint_id, 0, 0, False, 128, [vertex])


def test_the_log_is_one_split_for_subtask_zero(opened) -> None:
    coordinator, log_dir = opened
    assert coordinator.enumerator.discover() == []  # once
    assert coordinator.next_split(1, 2).split is None
    reply = coordinator.next_split(0, 2)
    assert reply.split is not None and reply.split.path == log_dir and reply.position == 0
    assert coordinator.next_split(0, 2).split is None
    assert coordinator.bounded is False and coordinator.enumerator  # unbounded: asks again
    assert HttpSource("id long").boundedness is Boundedness.CONTINUOUS_UNBOUNDED


def test_a_committed_checkpoint_truncates_the_log_below_its_position(opened) -> None:
    coordinator, log_dir = opened
    split = coordinator.next_split(0, 1).split
    assert split is not None
    log = coordinator.enumerator.log  # the endpoint's writer of this source
    for i in range(3):
        log.append(b'{"id": %d}\n' % i, 1)
    assert [s.first for s in list_segments(log_dir)] == [0, 1, 2]
    sources = {JobVertexId("src"): coordinator}
    notify_committed(sources, _metadata(1, TaskStateSnapshot(split_states=(SplitState(split, 2),))))
    # the writer thread records the mark first, then deletes (a crash between leaves segments
    # that readers skip by the mark): wait for both
    wait_until(
        lambda: truncation_mark(log_dir) == 2 and [s.first for s in list_segments(log_dir)] == [2],
        what="truncation below offset 2, its segments deleted",
        timeout=30,
    )
    notify_committed(sources, _metadata(2, TaskStateSnapshot()))  # no position: nothing
    assert [s.first for s in list_segments(log_dir)] == [2]
