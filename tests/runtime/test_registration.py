"""RegisterTaskManager at the ResourceManager and the slot protocol (seed 000), in-process."""

from __future__ import annotations

import time
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


def test_task_executor_retries_until_the_resource_manager_exists(service) -> None:
    te = TaskExecutor(service, CONF, "local://test/resourcemanager", SPARK, ResourceId("tm-early"))
    te.start()
    time.sleep(0.5)  # first lookups fail (lookup timeout 300 ms); it keeps retrying
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
    jm = StubJobMaster(service, True)
    jm.start()
    rm.request_slot(jm.address, "jm-token", JobId("job"), AllocationId("a")).result(WAIT)
    time.sleep(0.1)
    assert jm.call_async(lambda: jm.offers).result(WAIT) == []
    TaskExecutor(
        service, CONF, "local://test/resourcemanager", SPARK, ResourceId("tm-late")
    ).start()
    wait_until(lambda: len(jm.call_async(lambda: jm.offers).result(WAIT)) == 1)


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


def start_rm(service: LocalRpcService) -> tuple[ResourceManager, ResourceManagerGateway]:
    endpoint = ResourceManager(service, configuration=FAST_HEARTBEATS)
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
    _, rm = start_rm(fast_service)
    start_te(fast_service, "tm-live")
    doomed = start_te(fast_service, "tm-doomed")
    wait_until(lambda: registered_names(rm) == ["tm-doomed", "tm-live"])
    doomed.close_async().result(WAIT)  # stops answering heartbeats
    wait_until(lambda: registered_names(rm) == ["tm-live"])
    time.sleep(1.0)  # many heartbeat intervals: the live one is not falsely declared dead
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
