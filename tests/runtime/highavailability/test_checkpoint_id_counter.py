"""The checkpoint id counter (Flink's CheckpointIDCounter) on a real ZooKeeper: under high
availability a job's checkpoint ids come from it, so a new leader never hands out an id its
predecessor did, also one whose checkpoint was triggered and never completed (its tasks may
have written state and staged sink data under it), though it restores an older checkpoint.
A former leader can reserve no id. Without high availability the ids live in memory."""

from __future__ import annotations

from pathlib import Path

import pytest
from kazoo.client import KazooClient

from millrace.errors import CheckpointError, LeadershipLostError
from millrace.runtime.checkpoint.checkpoint_coordinator import CheckpointCoordinator
from millrace.runtime.checkpoint.checkpoint_settings import CheckpointSettings
from millrace.runtime.checkpoint.checkpoint_storage import CheckpointStorage
from millrace.runtime.checkpoint.high_availability_checkpoint_storage import (
    HighAvailabilityCheckpointStorage,
)
from millrace.runtime.highavailability.checkpoint_id_counter import StandaloneCheckpointIdCounter
from millrace.runtime.highavailability.high_availability_services import (
    LeaderServices,
    ZooKeeperHaServices,
)
from millrace.types import JobId
from tests.runtime.checkpoint.test_checkpoint_coordinator import InlineExecutor, Job, Settled
from tests.runtime.highavailability.ha_processes import JobManagers


def lead(jobmanagers: JobManagers, identifier: str) -> tuple[ZooKeeperHaServices, LeaderServices]:
    services, contender = jobmanagers.contend(identifier)
    return services, services.leader_services(contender.wait_granted())


def job_master_of(leader: LeaderServices, work: Path) -> Job:
    """A job's tasks and main thread (the coordinator tests' Job) with the coordinator a
    JobMaster under HA builds: checkpoints complete through the completed-checkpoint store,
    ids come from the job's counter in ZooKeeper."""
    job = Job(work)
    storage = HighAvailabilityCheckpointStorage(
        str(work / "chk"), str(work / "sp"), job.graph.job_id, leader, retained=2
    )
    coordinator = CheckpointCoordinator(
        job.graph,
        CheckpointSettings(interval=1.0),
        storage,
        job.main_thread,
        InlineExecutor(),
        job,
    )
    coordinator.ids.use_counter(leader.checkpoint_id_counter(job.graph.job_id))
    job.coordinator = Settled(coordinator, job.main_thread)
    return job


def triggered_ids(job: Job) -> list[int]:
    """The checkpoint ids the job's sources were told, in order, once each."""
    return list(dict.fromkeys(checkpoint_id for _, checkpoint_id in job.triggered))


def test_after_a_leader_change_checkpoint_ids_go_on_after_every_id_handed_out(
    jobmanagers: JobManagers, tmp_path: Path
) -> None:
    first_services, first = lead(jobmanagers, "jobmanager-a")
    a = job_master_of(first, tmp_path / "a")
    a.coordinator.trigger()
    a.ack_all(1)
    assert [m.checkpoint_id for m in a.completed] == [1]
    a.coordinator.trigger()  # never completes: its leader goes
    a.coordinator.trigger(is_savepoint=True, savepoint_target=str(tmp_path / "sp"))  # neither
    handed = triggered_ids(a)
    assert handed == [1, 2, 3]
    job_id = a.graph.job_id
    latest = first.checkpoint_store(job_id).latest()
    assert latest is not None and latest[0] == 1

    standby_services, standby = jobmanagers.contend("jobmanager-b")
    jobmanagers.close(first_services)
    successor = standby_services.leader_services(standby.wait_granted())
    b = job_master_of(successor, tmp_path / "b")
    b.coordinator.restore(CheckpointStorage(str(tmp_path), "").read(latest[1]))
    b.coordinator.trigger()
    [next_id] = triggered_ids(b)
    assert next_id > max(handed), f"checkpoint id {next_id} was handed out before: {handed}"
    b.ack_all(next_id)
    assert [m.checkpoint_id for m in b.completed] == [next_id]
    assert successor.checkpoint_store(job_id).latest() == (next_id, b.completed[0].location)
    assert successor.checkpoint_id_counter(job_id).next_id() == next_id + 1

    # the former leader reserves no id: none of its checkpoints starts
    refused = a.coordinator.trigger()
    assert refused.done(), "the former leader started a checkpoint"
    with pytest.raises(CheckpointError, match="no checkpoint id"):
        refused.result(timeout=0)
    assert triggered_ids(a) == handed


def test_the_zookeeper_counter_hands_out_each_id_once_and_is_fenced(
    jobmanagers: JobManagers, observer: KazooClient
) -> None:
    job = JobId("c" * 32)
    first_services, first = lead(jobmanagers, "jobmanager-a")
    counter = first.checkpoint_id_counter(job)
    assert counter.next_id() == 1
    assert [counter.get_and_increment() for _ in range(3)] == [1, 2, 3]
    # raised to a restored savepoint's id + 1, never lowered
    assert counter.get_and_increment(at_least=10) == 10
    assert counter.get_and_increment(at_least=2) == 11
    assert counter.next_id() == 12
    node = first_services.paths.checkpoint_id_counter(job)
    assert observer.get(node)[0] == b"12"

    standby_services, standby = jobmanagers.contend("jobmanager-b")
    jobmanagers.close(first_services)
    successor = standby_services.leader_services(standby.wait_granted())
    assert successor.checkpoint_id_counter(job).get_and_increment() == 12
    with pytest.raises(LeadershipLostError):
        counter.get_and_increment()
    # the job's clean-up takes its counter with it
    successor.checkpoint_store(job).shutdown()
    assert observer.exists(standby_services.paths.job(job)) is None
    assert successor.checkpoint_id_counter(job).next_id() == 1


def test_without_ha_the_ids_are_counted_in_memory() -> None:
    counter = StandaloneCheckpointIdCounter()
    assert [counter.get_and_increment() for _ in range(2)] == [1, 2]
    assert counter.get_and_increment(at_least=7) == 7
    assert counter.get_and_increment(at_least=3) == 8
    assert counter.next_id() == 9
