"""RegisterTaskManager at the ResourceManager and the slot protocol (seed 000), in-process.

A check that something does not happen (no registration yet, no offer without a TaskManager,
no live TaskManager declared dead) first waits for a positive event proving the system went
past the point where it would have happened: failed registration attempts logged, the
ResourceManager's answer to the request, heartbeats the monitor received after the pause.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Iterator

import pytest

from millrace.config import Configuration
from millrace.rpc import FencedRpcEndpoint, LocalRpcService
from millrace.runtime.deployment import Acknowledge, SlotOffer, TaskDeploymentDescriptor
from millrace.runtime.jobmaster.job_master_gateway import JobMasterGateway
from millrace.runtime.registration import (
    AcknowledgeRegistration,
    AlreadyRegistered,
    RefuseRegistration,
    RegisterTaskManager,
)
from millrace.runtime.resourcemanager.resource_manager import ResourceManager
from millrace.runtime.resourcemanager.resource_manager_gateway import ResourceManagerGateway
from millrace.runtime.taskexecutor.task_environment import AbstractInvokable
from millrace.runtime.taskexecutor.task_executor import TaskExecutor
from millrace.runtime.taskexecutor.task_executor_gateway import TaskExecutorGateway
from millrace.testing import TestingTaskRuntime
from millrace.types import (
    DEFAULT_LEADER_SESSION_ID,
    Address,
    AllocationId,
    ExecutionAttemptId,
    JobId,
    JobVertexId,
    ResourceId,
)
from tests import waiting

WAIT = 10.0
SPARK = TestingTaskRuntime()  # the TaskExecutors here never run a Spark task
CONF = Configuration({"rpc.lookup-timeout": "300 ms", "rpc.ask-timeout": "5 s"})


@pytest.fixture
def service() -> Iterator[LocalRpcService]:
    svc = LocalRpcService("test", configuration=CONF)
    yield svc
    svc.close_async().exception(timeout=WAIT)


@pytest.fixture
def rm(service: LocalRpcService) -> ResourceManagerGateway:
    endpoint = ResourceManager(service)
    endpoint.start()
    return service.connect(
        endpoint.address, ResourceManagerGateway, fencing_token=DEFAULT_LEADER_SESSION_ID
    ).result(WAIT)


def register(rm: ResourceManagerGateway, message: RegisterTaskManager):
    return rm.register_task_executor(message).result(WAIT)


def stub(service: LocalRpcService, name: str) -> Address:
    """A real TaskExecutor that does not register by itself (its RM address leads nowhere)."""
    endpoint = TaskExecutor(service, CONF, "local://test/nowhere", SPARK, ResourceId(name))
    endpoint.start()
    return Address(endpoint.address)


def test_first_registration_is_acknowledged(service, rm) -> None:
    reply = register(rm, RegisterTaskManager(ResourceId("tm-1"), stub(service, "tm-1"), 2))
    assert isinstance(reply, AcknowledgeRegistration)
    infos = rm.request_task_manager_infos().result(WAIT)
    assert [(i.resource_id, i.slots_total, i.slots_free) for i in infos] == [("tm-1", 2, 2)]


def test_repeated_registration_is_already_registered(service, rm) -> None:
    message = RegisterTaskManager(ResourceId("tm-1"), stub(service, "tm-1"), 2)
    first = register(rm, message)
    again = register(rm, message)
    assert isinstance(again, AlreadyRegistered)
    assert again.registration_id == first.registration_id
    assert len(rm.request_task_manager_infos().result(WAIT)) == 1


@pytest.mark.parametrize(
    ("version", "slots", "reason"),
    [
        (99, 2, "protocol version 99"),
        (1, 0, "at least one slot"),
    ],
)
def test_unacceptable_registration_is_refused(service, rm, version, slots, reason) -> None:
    message = RegisterTaskManager(ResourceId("tm-1"), stub(service, "tm-1"), slots, version)
    reply = register(rm, message)
    assert isinstance(reply, RefuseRegistration)
    assert reason in reply.reason
    assert rm.request_task_manager_infos().result(WAIT) == []


def test_unreachable_task_manager_is_refused(rm) -> None:
    reply = register(rm, RegisterTaskManager(ResourceId("ghost"), Address("local://test/ghost"), 2))
    assert isinstance(reply, RefuseRegistration)
    assert "cannot reach" in reply.reason


def wait_until(predicate, timeout: float = WAIT) -> None:  # type: ignore[no-untyped-def]
    waiting.wait_until(predicate, what="the condition", timeout=timeout, interval=0.01)


def test_task_executor_retries_until_the_resource_manager_exists(service, caplog) -> None:
    """A TaskManager started before its ResourceManager keeps trying: it registers once the
    ResourceManager exists, after attempts that failed."""
    caplog.set_level(logging.INFO, logger=TaskExecutor.__module__)

    def failed_attempts() -> int:
        return sum("tm-early: registration failed" in r.getMessage() for r in caplog.records)

    te = TaskExecutor(service, CONF, "local://test/resourcemanager", SPARK, ResourceId("tm-early"))
    te.start()
    # two attempts failed (lookup timeout 300 ms each): it retried after a failure
    waiting.wait_until(
        lambda: failed_attempts() >= 2, what="2 failed registration attempts", timeout=WAIT
    )
    assert not te.call_async(lambda: te.registered).result(WAIT)
    ResourceManager(service).start()
    wait_until(lambda: te.call_async(lambda: te.registered).result(WAIT))


class StubJobMaster(FencedRpcEndpoint, JobMasterGateway):
    """Accepts or rejects slot offers; records them."""

    def __init__(self, service, accept: bool) -> None:
        super().__init__(service, "jobmaster", "jm-token")
        self.accept = accept
        self.offers: list[SlotOffer] = []

    def offer_slots(self, resource_id, task_manager_address, offers, timeout=None):
        self.offers += offers
        return list(offers) if self.accept else []


@pytest.mark.parametrize("accept", [True, False])
def test_slot_request_is_offered_to_the_job_master(service, rm, accept) -> None:
    te = TaskExecutor(service, CONF, "local://test/resourcemanager", SPARK, ResourceId("tm-1"))
    te.start()
    wait_until(lambda: len(rm.request_task_manager_infos().result(WAIT)) == 1)
    jm = StubJobMaster(service, accept)
    jm.start()
    ack = rm.request_slot(jm.address, "jm-token", JobId("job"), AllocationId("alloc-1"))
    assert isinstance(ack.result(WAIT), Acknowledge)
    wait_until(lambda: jm.call_async(lambda: len(jm.offers)).result(WAIT) == 1)
    assert jm.call_async(lambda: jm.offers[0].allocation_id).result(WAIT) == "alloc-1"
    free = 1 if accept else 2  # a rejected offer goes back to the ResourceManager
    wait_until(lambda: rm.request_task_manager_infos().result(WAIT)[0].slots_free == free)


def test_slot_requests_wait_for_a_task_manager(service, rm) -> None:
    """A slot request that no TaskManager can serve waits; it is served when one registers."""
    jm = StubJobMaster(service, True)
    jm.start()
    # The acknowledgement is the ResourceManager's answer after it matched the request against
    # its TaskManagers (in the same message): it went past the point of serving it, with none.
    rm.request_slot(jm.address, "jm-token", JobId("job"), AllocationId("a")).result(WAIT)
    assert rm.request_task_manager_infos().result(WAIT) == []
    assert jm.call_async(lambda: jm.offers).result(WAIT) == []
    TaskExecutor(
        service, CONF, "local://test/resourcemanager", SPARK, ResourceId("tm-late")
    ).start()
    waiting.wait_until(
        lambda: len(jm.call_async(lambda: jm.offers).result(WAIT)) == 1,
        what="the waiting request offered a slot of the TaskManager that came",
        timeout=WAIT,
    )


FAST_HEARTBEATS = Configuration(
    {
        "rpc.lookup-timeout": "300 ms",
        "rpc.ask-timeout": "5 s",
        "heartbeat.interval": "50 ms",
        "heartbeat.pause": "300 ms",
    }
)


@pytest.fixture
def fast_service() -> Iterator[LocalRpcService]:
    svc = LocalRpcService("hb", configuration=FAST_HEARTBEATS)
    yield svc
    svc.close_async().exception(timeout=WAIT)


class WatchedResourceManager(ResourceManager):
    """The real ResourceManager, counting what its heartbeat monitor hears and declares.

    Threading:
        Both counters are written on the endpoint's main thread; read them through
        ``call_async``.
    """

    def __init__(self, service: LocalRpcService, configuration: Configuration) -> None:
        super().__init__(service, configuration=configuration)
        self.heartbeats: Counter[str] = Counter()  # by TaskManager
        self.declared_dead: list[str] = []

    def heartbeat_from_task_manager(self, resource_id, resident_memory_bytes=-1) -> None:  # type: ignore[no-untyped-def]
        self.heartbeats[resource_id] += 1
        super().heartbeat_from_task_manager(resource_id, resident_memory_bytes)

    def notify_heartbeat_timeout(self, resource_id) -> None:  # type: ignore[no-untyped-def]
        self.declared_dead.append(resource_id)
        super().notify_heartbeat_timeout(resource_id)


def start_rm(
    service: LocalRpcService, kind: type[ResourceManager] = ResourceManager
) -> tuple[ResourceManager, ResourceManagerGateway]:
    endpoint = kind(service, configuration=FAST_HEARTBEATS)
    endpoint.start()
    return endpoint, service.connect(
        endpoint.address, ResourceManagerGateway, fencing_token=DEFAULT_LEADER_SESSION_ID
    ).result(WAIT)


def start_te(service: LocalRpcService, name: str) -> TaskExecutor:
    te = TaskExecutor(
        service, FAST_HEARTBEATS, "local://hb/resourcemanager", SPARK, ResourceId(name)
    )
    te.start()
    return te


def registered_names(rm: ResourceManagerGateway) -> list[str]:
    return sorted(i.resource_id for i in rm.request_task_manager_infos().result(WAIT))


def test_dead_task_manager_leaves_the_slot_pool_and_live_ones_stay(fast_service) -> None:
    """A TaskManager that stops answering heartbeats is declared dead; one that answers never
    is, however long the monitor watches it."""
    watched, rm = start_rm(fast_service, WatchedResourceManager)
    assert isinstance(watched, WatchedResourceManager)
    start_te(fast_service, "tm-live")
    doomed = start_te(fast_service, "tm-doomed")
    wait_until(lambda: registered_names(rm) == ["tm-doomed", "tm-live"])
    doomed.close_async().result(WAIT)  # stops answering heartbeats
    wait_until(lambda: registered_names(rm) == ["tm-live"])

    def heard(resource_id: str) -> int:
        return watched.call_async(lambda: watched.heartbeats[resource_id]).result(WAIT)

    # 20 more heartbeats of the live one: the monitor asked it 20 times, one interval (50 ms)
    # apart, so it checked it for 1 s, far past the pause (300 ms) after which a wrong verdict
    # would have come; each heartbeat is an answer to one of its checks.
    before = heard("tm-live")
    waiting.wait_until(
        lambda: heard("tm-live") >= before + 20,
        what="20 more heartbeats of tm-live",
        timeout=WAIT,
        seen=lambda: heard("tm-live"),
    )
    assert watched.call_async(lambda: list(watched.declared_dead)).result(WAIT) == ["tm-doomed"]
    assert registered_names(rm) == ["tm-live"]


def test_task_manager_registers_again_with_a_new_resource_manager(fast_service) -> None:
    old, _ = start_rm(fast_service)
    te = start_te(fast_service, "tm-1")
    wait_until(lambda: te.call_async(lambda: te.registered).result(WAIT))
    old.close_async().result(WAIT)
    _, new_rm = start_rm(fast_service)  # same address, new leader
    wait_until(lambda: registered_names(new_rm) == ["tm-1"])


class RunsUntilCancelled(AbstractInvokable):
    def invoke(self) -> None:
        while True:
            self.environment.check_cancelled()
            time.sleep(0.01)


def test_task_manager_that_loses_its_job_master_fails_its_tasks_and_frees_the_slots(
    fast_service,
) -> None:
    _, rm = start_rm(fast_service)
    te = start_te(fast_service, "tm-1")
    wait_until(lambda: registered_names(rm) == ["tm-1"])
    jm = StubJobMaster(fast_service, accept=True)  # accepts the slot, never sends heartbeats
    jm.start()
    rm.request_slot(jm.address, "jm-token", JobId("job"), AllocationId("alloc-1")).result(WAIT)
    wait_until(lambda: jm.call_async(lambda: len(jm.offers)).result(WAIT) == 1)
    tdd = TaskDeploymentDescriptor(
        JobId("job"),
        "job",
        Address(jm.address),
        JobVertexId("v"),
        "runs (1/1)",
        0,
        1,
        ExecutionAttemptId("attempt-1"),
        AllocationId("alloc-1"),
        f"{__name__}:RunsUntilCancelled",
        (),
        True,
        None,
        0,
        (),
        128,
    )
    gateway = fast_service.connect(te.address, TaskExecutorGateway).result(WAIT)
    assert gateway.submit_task(tdd).result(WAIT).success

    # pause 300 ms + interval 50 ms without a heartbeat from the JobMaster: the task is
    # cancelled and the slot goes back to the ResourceManager
    wait_until(lambda: rm.request_task_manager_infos().result(WAIT)[0].slots_free == 2)
    wait_until(lambda: te.call_async(lambda: len(te._tasks)).result(WAIT) == 0)
