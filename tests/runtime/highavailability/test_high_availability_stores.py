"""The HA stores on a real ZooKeeper and a real storage directory: what a new leader recovers
(job graphs, completed checkpoint pointers, job results), and that a former leader's writes
are refused and change nothing. Without HA, the stores keep nothing."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from millrace.config import Configuration
from millrace.errors import HighAvailabilityError, LeadershipLostError
from millrace.runtime.checkpoint.checkpoint_storage import CheckpointMetadata
from millrace.runtime.checkpoint.high_availability_checkpoint_storage import (
    HighAvailabilityCheckpointStorage,
)
from millrace.runtime.executiongraph import IOMetrics, JobStatus
from millrace.runtime.highavailability.high_availability_services import (
    DEFAULT_LEADER_SESSION_ID,
    LeaderServices,
    NoHighAvailabilityServices,
    ZooKeeperHaServices,
    create_high_availability_services,
)
from millrace.runtime.highavailability.job_graph_store import ZooKeeperJobGraphStore
from millrace.runtime.highavailability.job_result_store import FileSystemJobResultStore
from millrace.runtime.highavailability.local_zookeeper import LocalZooKeeper
from millrace.runtime.job_result import (
    JobDetails,
    JobResultFailure,
    JobResultSuccess,
    VertexDetails,
)
from millrace.runtime.jobgraph import (
    DistributionPattern,
    JobEdge,
    JobGraph,
    JobVertex,
    OperatorKind,
    SerializedOperator,
)
from millrace.types import JobId
from tests.runtime.highavailability.ha_processes import (
    JobManagers,
    RecordingContender,
    expire_session,
)
from tests.waiting import wait_until

SOURCE = SerializedOperator(OperatorKind.SOURCE, "Source: flights", b"\x80\x05source")
SINK = SerializedOperator(OperatorKind.SINK, "Sink: parquet at out", b"\x80\x05sink")


def job_graph(name: str = "flight-delays", job_id: str = "a" * 32) -> JobGraph:
    return JobGraph(
        name,
        [
            JobVertex("flights", 2, "m:Task", (SOURCE,), True, "v1"),
            JobVertex("sink", 1, "m:Task", (SINK,), False, "v2"),
        ],
        [JobEdge("v1", "v2", DistributionPattern.HASH, ("carrier",))],
        128,
        JobId(job_id),
        {"execution.checkpointing.interval": "1 s"},
    )


def job_result(job_id: str, status: JobStatus = JobStatus.FINISHED) -> JobResultSuccess:
    metrics = IOMetrics(336_776, 5_430, 0, 0, 2)
    details = JobDetails(
        JobId(job_id),
        "flight-delays",
        status,
        1.7e9,
        8.5,
        [VertexDetails("flights", 2, {"FINISHED": 2}, metrics)],
    )
    return JobResultSuccess(JobId(job_id), 8.5, {"flights": metrics}, details)


@dataclass
class Leader:
    """A process that leads, and what it may do in its term."""

    services: ZooKeeperHaServices
    contender: RecordingContender
    session: str
    leader: LeaderServices


def lead(jobmanagers: JobManagers, identifier: str, **settings: str) -> Leader:
    services, contender = jobmanagers.contend(identifier, **settings)
    session = contender.wait_granted()
    return Leader(services, contender, session, services.leader_services(session))


@pytest.fixture
def leader(jobmanagers: JobManagers) -> Leader:
    return lead(jobmanagers, "jobmanager-a")


def tree(client: KazooClient, path: str) -> dict[str, bytes]:
    """Every znode under ``path`` (itself included) with its data."""
    if client.exists(path) is None:
        return {}
    found = {path: client.get(path)[0]}
    for child in client.get_children(path):
        found.update(tree(client, f"{path}/{child}"))
    return found


# Job graphs -------------------------------------------------------------------------------


def test_job_graph_put_list_recover_remove_round_trip(
    leader: Leader, jobmanagers: JobManagers, observer: KazooClient
) -> None:
    store = leader.leader.job_graph_store()
    first, second = job_graph("first", "a" * 32), job_graph("second", "b" * 32)
    assert store.job_ids() == []

    store.put(second)
    store.put(first)

    assert store.job_ids() == [first.job_id, second.job_id]
    assert store.recover(first.job_id) == first
    pointer = observer.get(leader.services.paths.job_graph(first.job_id))[0].decode()
    assert Path(pointer).is_file() and pointer.startswith(str(jobmanagers.storage_dir))
    # A standby reads them (read-only) from ZooKeeper and the shared directory.
    standby = jobmanagers.start()
    read_only = ZooKeeperJobGraphStore(
        standby.client, standby.paths, standby.storage, standby.codec, None
    )
    assert read_only.recover(second.job_id) == second

    updated = job_graph("first, resubmitted", first.job_id)
    store.put(updated)
    assert store.recover(first.job_id) == updated

    store.remove(first.job_id)
    store.remove(first.job_id)  # idempotent
    assert store.job_ids() == [second.job_id]
    assert not Path(pointer).exists()
    with pytest.raises(HighAvailabilityError, match="no job graph"):
        store.recover(first.job_id)


def test_a_read_only_job_graph_store_refuses_writes(
    jobmanagers: JobManagers, leader: Leader
) -> None:
    leader.leader.job_graph_store().put(job_graph())
    standby = jobmanagers.start()
    store = ZooKeeperJobGraphStore(
        standby.client, standby.paths, standby.storage, standby.codec, None
    )
    with pytest.raises(HighAvailabilityError, match="read-only"):
        store.put(job_graph("other", "c" * 32))
    with pytest.raises(HighAvailabilityError, match="read-only"):
        store.remove(JobId("a" * 32))
    assert store.job_ids() == [JobId("a" * 32)]


# Completed checkpoints ----------------------------------------------------------------------


def test_the_checkpoint_store_keeps_the_retained_pointers_and_drops_the_counter_at_shutdown(
    leader: Leader, jobmanagers: JobManagers, observer: KazooClient
) -> None:
    job = JobId("a" * 32)
    store = leader.leader.checkpoint_store(job)
    counter = leader.leader.checkpoint_id_counter(job)
    assert store.latest() is None

    for _ in range(5):
        checkpoint_id = counter.get_and_increment()  # as the coordinator reserves its ids
        if checkpoint_id < 5:
            store.add(checkpoint_id, f"/chk/{job}/chk-{checkpoint_id}", retained=2)

    paths = leader.services.paths
    assert sorted(observer.get_children(paths.checkpoints(job))) == [
        f"{3:019d}",
        f"{4:019d}",
    ]
    assert store.latest() == (4, f"/chk/{job}/chk-4")
    assert counter.next_id() == 6  # adding a pointer leaves the counter alone
    pointer = json.loads(observer.get(paths.checkpoint(job, 4))[0])
    assert pointer == {"checkpoint_id": 4, "location": f"/chk/{job}/chk-4"}

    store.add(5, f"/chk/{job}/chk-5", retained=1)
    assert observer.get_children(paths.checkpoints(job)) == [f"{5:019d}"]

    # Another job's pointers are its own.
    other = leader.leader.checkpoint_store(JobId("b" * 32))
    assert other.latest() is None
    assert leader.leader.checkpoint_id_counter(JobId("b" * 32)).next_id() == 1

    store.shutdown()
    assert observer.exists(paths.job(job)) is None
    assert store.latest() is None and counter.next_id() == 1
    store.shutdown()  # idempotent
    # a job whose checkpoints never completed has a counter and no pointers: both go
    assert counter.get_and_increment() == 1
    store.shutdown()
    assert observer.exists(paths.job(job)) is None


def test_a_new_leader_restores_the_latest_checkpoint_and_continues_the_ids(
    jobmanagers: JobManagers,
) -> None:
    job = JobId("a" * 32)
    first = lead(jobmanagers, "jobmanager-a")
    assert first.leader.checkpoint_id_counter(job).get_and_increment(at_least=7) == 7
    first.leader.checkpoint_store(job).add(7, "/chk/chk-7", retained=3)
    assert first.leader.checkpoint_id_counter(job).get_and_increment() == 8  # not completed
    first.leader.job_graph_store().put(job_graph(job_id=job))
    second_services, second_contender = jobmanagers.contend("jobmanager-b")

    jobmanagers.close(first.services)

    session = second_contender.wait_granted()
    successor = second_services.leader_services(session)
    store = successor.checkpoint_store(job)
    assert store.latest() == (7, "/chk/chk-7")
    assert successor.checkpoint_id_counter(job).get_and_increment() == 9
    assert successor.job_graph_store().job_ids() == [job]
    store.add(9, "/chk/chk-9", retained=3)
    assert store.latest() == (9, "/chk/chk-9")


# A former leader ----------------------------------------------------------------------------

# The former leader retries as production does by default (retry-wait 1 s): after its session
# expired, kazoo waits 0.6-1.4 s before it connects a new session, and the writes below all run
# within that time.
FORMER_LEADER = {"high-availability.zookeeper.client.retry-wait": "1 s"}


def lose_by_expiry(jobmanagers: JobManagers, former: Leader, observer: KazooClient) -> None:
    """Its session expires: it is revoked, and knows it."""
    expire_session(jobmanagers.zookeeper, former.services.client)
    former.contender.wait_revoked()


def lose_unnoticed(jobmanagers: JobManagers, former: Leader, observer: KazooClient) -> None:
    """Its latch znode vanishes behind its back (as if paused past its session): it still
    believes it leads; only ZooKeeper's check can stop it."""
    latch = former.services.paths.latch
    owner = former.services.client.client_id[0]
    for node in observer.get_children(latch):
        if observer.exists(f"{latch}/{node}").ephemeralOwner == owner:
            observer.delete(f"{latch}/{node}")
    assert former.contender.leader_session_id == former.session


Loss = Callable[[JobManagers, Leader, KazooClient], None]


@pytest.fixture(params=[lose_by_expiry, lose_unnoticed], ids=["expired", "unnoticed"])
def lose(request: pytest.FixtureRequest) -> Loss:
    loss: Loss = request.param
    return loss


@dataclass
class Succession:
    """A former leader (its stores taken while it led) and its successor."""

    former: Leader
    successor: LeaderServices
    job: JobId
    original: JobGraph
    before: dict[str, bytes]  # the cluster's znodes but the leader ones, before the loss
    results_before: dict[JobId, tuple[object, bool]]


def not_leader_znodes(client: KazooClient, base: str) -> dict[str, bytes]:
    return {k: v for k, v in tree(client, base).items() if "/leader/" not in k}


def succession(jobmanagers: JobManagers, observer: KazooClient, lose: Loss) -> Succession:
    """A leads and stores a job, B queues; A loses its leadership; B leads."""
    job = JobId("a" * 32)
    former = lead(jobmanagers, "jobmanager-a", **FORMER_LEADER)
    original = job_graph("original", job)
    former.leader.job_graph_store().put(original)
    for _ in range(3):
        former.leader.checkpoint_id_counter(job).get_and_increment()
    former.leader.checkpoint_store(job).add(3, "/chk/chk-3", retained=2)
    former.leader.job_result_store().create_dirty(job_result("d" * 32))
    standby_services, standby = jobmanagers.contend("jobmanager-b")
    wait_until(
        lambda: len(observer.get_children(former.services.paths.latch)) == 2,
        what="the standby queued",
        timeout=15.0,
    )
    before = not_leader_znodes(observer, former.services.paths.base)
    results_before = dict(former.leader.job_result_store().results())

    lose(jobmanagers, former, observer)

    session = standby.wait_granted()
    successor = standby_services.leader_services(session)
    return Succession(former, successor, job, original, before, results_before)


def test_a_former_leaders_writes_are_refused_and_change_nothing_in_zookeeper(
    jobmanagers: JobManagers, observer: KazooClient, lose: Loss
) -> None:
    s = succession(jobmanagers, observer, lose)
    graphs = s.former.leader.job_graph_store()
    checkpoints = s.former.leader.checkpoint_store(s.job)
    results = s.former.leader.job_result_store()

    with pytest.raises(HighAvailabilityError):
        s.former.leader.check_leadership()
    with pytest.raises(HighAvailabilityError):
        graphs.put(job_graph("written by the former leader", "e" * 32))
    with pytest.raises(HighAvailabilityError):
        graphs.remove(s.job)
    with pytest.raises(HighAvailabilityError):
        checkpoints.add(4, "/chk/chk-4", retained=1)
    with pytest.raises(HighAvailabilityError):
        checkpoints.shutdown()
    with pytest.raises(HighAvailabilityError):
        s.former.leader.checkpoint_id_counter(s.job).get_and_increment()
    with pytest.raises(HighAvailabilityError):
        results.create_dirty(job_result("f" * 32))
    with pytest.raises(HighAvailabilityError):
        results.mark_clean(JobId("d" * 32))

    assert not_leader_znodes(observer, s.former.services.paths.base) == s.before
    assert s.successor.job_graph_store().job_ids() == [s.job]
    assert s.successor.checkpoint_store(s.job).latest() == (3, "/chk/chk-3")
    assert s.successor.checkpoint_id_counter(s.job).next_id() == 4
    assert s.successor.job_result_store().results() == s.results_before


def test_a_former_leaders_writes_raise_leadership_lost(
    jobmanagers: JobManagers,
    observer: KazooClient,
    lose: Loss,
) -> None:
    s = succession(jobmanagers, observer, lose)
    graphs = s.former.leader.job_graph_store()
    checkpoints = s.former.leader.checkpoint_store(s.job)
    writes: dict[str, Callable[[], None]] = {
        "check_leadership": s.former.leader.check_leadership,
        "put": lambda: graphs.put(job_graph("by the former leader", "e" * 32)),
        "remove": lambda: graphs.remove(s.job),
        "add": lambda: checkpoints.add(4, "/chk/chk-4", retained=1),
        "shutdown": checkpoints.shutdown,
        "get_and_increment": s.former.leader.checkpoint_id_counter(s.job).get_and_increment,
        "create_dirty": lambda: s.former.leader.job_result_store().create_dirty(
            job_result("f" * 32)
        ),
    }
    raised: dict[str, str] = {}
    for name, write in writes.items():
        try:
            write()
        except HighAvailabilityError as error:
            raised[name] = type(error).__name__
        else:
            raised[name] = "nothing"
    assert raised == dict.fromkeys(writes, "LeadershipLostError")


# A former leader's refused put of a job the successor recovers leaves the successor's graph
# (the payload goes under a fresh name; its pointer is committed fenced).
def test_a_former_leaders_put_of_a_known_job_leaves_the_stored_graph_alone(
    jobmanagers: JobManagers, observer: KazooClient, lose: Loss
) -> None:
    s = succession(jobmanagers, observer, lose)
    with pytest.raises(HighAvailabilityError):
        s.former.leader.job_graph_store().put(job_graph("changed by the former leader", s.job))

    assert s.successor.job_graph_store().recover(s.job) == s.original


# A refused put leaves no payload behind in the HA storage directory.
def test_a_former_leaders_refused_put_leaves_no_payload(
    jobmanagers: JobManagers, observer: KazooClient, lose: Loss
) -> None:
    s = succession(jobmanagers, observer, lose)
    with pytest.raises(HighAvailabilityError):
        s.former.leader.job_graph_store().put(job_graph("refused", "e" * 32))

    assert list(jobmanagers.storage_dir.rglob(f"*{'e' * 32}*")) == []


# HighAvailabilityCheckpointStorage ----------------------------------------------------------


def metadata(checkpoint_id: int) -> CheckpointMetadata:
    return CheckpointMetadata(JobId("a" * 32), "job", checkpoint_id, 0, 0, False, 128, [])


def test_a_checkpoint_completes_through_the_store_only_while_leading(
    jobmanagers: JobManagers, observer: KazooClient, tmp_path: Path
) -> None:
    job = JobId("a" * 32)
    former = lead(jobmanagers, "jobmanager-a")
    storage = HighAvailabilityCheckpointStorage(
        str(tmp_path / "chk"), str(tmp_path / "sp"), job, former.leader, retained=1
    )
    first = storage.write(metadata(1), storage.checkpoint_directory(job, 1))
    second = storage.write(metadata(2), storage.checkpoint_directory(job, 2))
    assert former.leader.checkpoint_store(job).latest() == (2, second.location)
    storage.discard(first)
    assert not Path(first.location).exists()

    lose_unnoticed(jobmanagers, former, observer)

    with pytest.raises(LeadershipLostError):
        storage.write(metadata(3), storage.checkpoint_directory(job, 3))
    storage.discard(second)  # refused quietly: the successor restores it
    storage.discard_directory(second.location)
    assert Path(second.location, "_metadata").is_file()
    assert former.leader.checkpoint_store(job).latest() == (2, second.location)


def test_a_suspended_job_discards_no_checkpoint(leader: Leader, tmp_path: Path) -> None:
    job = JobId("a" * 32)
    storage = HighAvailabilityCheckpointStorage(
        str(tmp_path / "chk"), str(tmp_path / "sp"), job, leader.leader, retained=2
    )
    written = storage.write(metadata(1), storage.checkpoint_directory(job, 1))
    storage.suspended = True
    storage.discard(written)
    assert Path(written.location, "_metadata").is_file()


# Job results --------------------------------------------------------------------------------


def test_a_job_result_goes_dirty_then_clean_and_a_new_store_reads_it(
    leader: Leader, jobmanagers: JobManagers
) -> None:
    store = leader.leader.job_result_store()
    finished = job_result("a" * 32)
    failure = JobResultFailure(
        JobId("b" * 32), JobStatus.FAILED, 1.0, "RuntimeError: boom", finished.details
    )
    assert store.results() == {}

    store.create_dirty(finished)
    store.create_dirty(failure)
    assert store.results() == {finished.job_id: (finished, False), failure.job_id: (failure, False)}

    store.mark_clean(finished.job_id)
    store.mark_clean(JobId("c" * 32))  # no entry: nothing happens
    assert store.results() == {finished.job_id: (finished, True), failure.job_id: (failure, False)}
    directory = jobmanagers.storage_dir / "unit" / "job-result-store"
    assert sorted(p.name for p in directory.iterdir()) == [
        f"{'a' * 32}.msgpack",
        f"{'b' * 32}_DIRTY.msgpack",
    ]
    standby = jobmanagers.start()
    read_only = FileSystemJobResultStore(standby.storage, standby.codec, None)
    assert read_only.results() == store.results()


def test_a_read_only_job_result_store_refuses_writes(jobmanagers: JobManagers) -> None:
    services = jobmanagers.start()
    store = FileSystemJobResultStore(services.storage, services.codec, None)
    with pytest.raises(HighAvailabilityError, match="read-only"):
        store.create_dirty(job_result("a" * 32))
    with pytest.raises(HighAvailabilityError, match="read-only"):
        store.mark_clean(JobId("a" * 32))
    assert store.results() == {}
    assert not (jobmanagers.storage_dir / "unit" / "job-result-store").exists()


# Without high availability --------------------------------------------------------------------


@pytest.fixture
def no_ha() -> Iterator[NoHighAvailabilityServices]:
    services = create_high_availability_services(Configuration())
    assert isinstance(services, NoHighAvailabilityServices)
    try:
        yield services
    finally:
        services.close()


def test_without_ha_the_only_jobmanager_leads_at_once(
    no_ha: NoHighAvailabilityServices,
) -> None:
    contender = RecordingContender()
    no_ha.start_leader_election(contender, "jobmanager")
    assert contender.events == [("granted", DEFAULT_LEADER_SESSION_ID)]
    leader = no_ha.leader_services(DEFAULT_LEADER_SESSION_ID)
    assert leader.leader_session_id == DEFAULT_LEADER_SESSION_ID == "0" * 32
    leader.check_leadership()
    leader.publish("dispatcher", "tcp://127.0.0.1:1111/dispatcher")
    leader.unpublish("dispatcher")


def test_without_ha_the_stores_keep_nothing(
    no_ha: NoHighAvailabilityServices, tmp_path: Path
) -> None:
    leader = no_ha.leader_services(DEFAULT_LEADER_SESSION_ID)
    graph = job_graph()
    graphs = leader.job_graph_store()
    graphs.put(graph)
    assert graphs.job_ids() == []
    with pytest.raises(HighAvailabilityError, match="no job graph store"):
        graphs.recover(graph.job_id)
    graphs.remove(graph.job_id)

    checkpoints = leader.checkpoint_store(graph.job_id)
    checkpoints.add(1, "/chk/chk-1", retained=1)
    assert checkpoints.latest() is None
    checkpoints.shutdown()
    counter = leader.checkpoint_id_counter(graph.job_id)
    assert [counter.get_and_increment(), counter.get_and_increment(at_least=5)] == [1, 5]

    results = leader.job_result_store()
    results.create_dirty(job_result(graph.job_id))
    results.mark_clean(graph.job_id)
    assert results.results() == {}


def test_the_zookeeper_mode_needs_a_reachable_quorum(zookeeper: LocalZooKeeper) -> None:
    port = zookeeper.port
    zookeeper.stop()
    configuration = Configuration(
        {
            "high-availability.type": "zookeeper",
            "high-availability.zookeeper.quorum": f"127.0.0.1:{port}",
            "high-availability.storageDir": "/tmp/unused",
            "high-availability.zookeeper.client.connection-timeout": "0.5 s",
        }
    )
    with pytest.raises(HighAvailabilityError, match=f"127.0.0.1:{port}"):
        create_high_availability_services(configuration)
