"""SlotPoolService: requests to the ResourceManager, slot.request.timeout, slot offers.

The JobMaster's main thread is the testing kit's ManuallyTriggeredMainThreadExecutor on a
ManualClock; the ResourceManager and the TaskExecutors are testing gateways reached through a
``connect`` that answers from a table. No endpoint, no Spark, no sleeps: a connection completes
when the test says so, and time moves only when the test advances the clock.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any

import pytest

from millrace.errors import IllegalThreadError, RecipientUnreachableError
from millrace.runtime.deployment import SlotOffer
from millrace.runtime.jobgraph import JobGraph, JobVertex
from millrace.runtime.jobmaster.slot_pool_service import SlotPoolService
from millrace.runtime.taskexecutor.task_executor_gateway import TaskExecutorGateway
from millrace.testing import (
    ManuallyTriggeredMainThreadExecutor,
    TestingResourceManagerGateway,
    TestingTaskExecutorGateway,
)
from millrace.types import AllocationId, JobMasterId, ResourceId

RM = "local://testing/resourcemanager"
TM1 = "local://testing/tm-1"
TM2 = "local://testing/tm-2"
NOWHERE = "local://testing/nowhere"
TIMEOUT = 10.0


class Job:
    """A SlotPoolService of a job needing 2 slots, and what it told the job."""

    def __init__(self) -> None:
        self.main_thread = ManuallyTriggeredMainThreadExecutor()
        self.rm = TestingResourceManagerGateway(RM)
        self.tms = {TM1: TestingTaskExecutorGateway(TM1), TM2: TestingTaskExecutorGateway(TM2)}
        self.connections: list[str] = []
        self.pending_connections: dict[str, Future[Any]] = {}  # answered by the test
        self.running = True
        self.ready = 0
        self.failures: list[str] = []
        self.connected: list[tuple[ResourceId, TaskExecutorGateway]] = []
        self.graph = JobGraph("job", [JobVertex("source", 2, "m:Source", (), True, "src")], [])
        self.service = SlotPoolService(
            self.graph,
            self.main_thread,
            self.connect,
            RM,
            "local://testing/jobmaster",
            JobMasterId("jm-id"),
            "rm-id",
            TIMEOUT,
            accepts_offers=lambda: self.running,
            slots_ready=self.slots_ready,
            fail=self.failures.append,
            task_manager_connected=lambda rid, gw: self.connected.append((rid, gw)),
        )

    def slots_ready(self) -> None:
        self.ready += 1

    def connect(
        self, address: str, gateway_type: Any, fencing_token: object | None = None
    ) -> Future[Any]:
        self.connections.append(address)
        if address == RM:
            assert fencing_token == "rm-id", "the ResourceManager is reached with its token"
        if address in self.pending_connections:
            return self.pending_connections.pop(address)
        connecting: Future[Any] = Future()
        gateway = self.rm if address == RM else self.tms.get(address)
        if gateway is None:
            connecting.set_exception(RecipientUnreachableError(address, "nothing there"))
        else:
            connecting.set_result(gateway)
        return connecting

    def request_slots(self) -> list[AllocationId]:
        """Request slots and connect; the allocation ids requested by this call."""
        before = len(self.rm.called("request_slot"))
        self.service.request_slots()
        self.main_thread.trigger_all()
        return [args[3] for args in self.rm.called("request_slot")[before:]]

    def offer(
        self, tm: str, allocations: list[AllocationId], resource_id: str | None = None
    ) -> Future[list[SlotOffer]]:
        offers = [SlotOffer(a, i) for i, a in enumerate(allocations)]
        rid = ResourceId(resource_id or tm.rsplit("/", 1)[1])
        reply = self.service.offer_slots(rid, tm, offers)
        self.main_thread.trigger_all()
        return reply


@pytest.fixture
def job() -> Job:
    return Job()


def accepted(reply: Future[list[SlotOffer]]) -> list[AllocationId]:
    assert reply.done()
    return [o.allocation_id for o in reply.result(0)]


# Requests ---------------------------------------------------------------------------------------


def test_once_connected_it_requests_exactly_the_missing_slots(job) -> None:
    job.service.request_slots()
    assert job.rm.called("request_slot") == []  # the connection completes on the main thread
    job.main_thread.trigger_all()
    requests = job.rm.called("request_slot")
    assert [args[:3] for args in requests] == [
        ("local://testing/jobmaster", "jm-id", job.graph.job_id)
    ] * 2
    first, second = (args[3] for args in requests)
    assert first != second
    assert job.request_slots() == []  # both pending: nothing is missing
    assert accepted(job.offer(TM1, [first])) == [first]
    job.service.release_task_manager(ResourceId("tm-1"))
    assert len(job.request_slots()) == 1  # the lost slot only; the other is still pending
    assert job.connections.count(RM) == 1  # connected once
    assert job.failures == []


def test_an_unreachable_resource_manager_fails_the_job_with_the_cause(job) -> None:
    job.pending_connections[RM] = connecting = Future()
    job.service.request_slots()
    connecting.set_exception(RecipientUnreachableError(RM, "no endpoint registered"))
    assert job.failures == []  # the outcome comes back on the main thread
    job.main_thread.trigger_all()
    assert job.failures == [
        f"ResourceManager unreachable: no RPC endpoint reachable at {RM}: no endpoint registered"
    ]
    assert job.rm.called("request_slot") == []
    assert len(job.request_slots()) == 2  # the next request connects again, and succeeds
    assert job.connections == [RM, RM]


def test_the_timeout_fails_the_job_if_requests_are_still_pending(job) -> None:
    first, _ = job.request_slots()
    job.offer(TM1, [first])
    job.main_thread.advance(TIMEOUT - 0.5)
    assert job.failures == []
    job.main_thread.advance(1.0)
    assert job.failures == [
        "could not obtain 2 slots within slot.request.timeout=10 s (got 1); add TaskManagers "
        "or lower the parallelism"
    ]


def test_the_timeout_does_nothing_once_every_request_is_served(job) -> None:
    allocations = job.request_slots()
    job.main_thread.advance(TIMEOUT - 1.0)
    assert accepted(job.offer(TM1, allocations)) == allocations
    job.main_thread.advance(5.0)
    assert job.failures == []
    assert job.main_thread.scheduled == 0


def test_slots_ready_is_called_once_when_every_slot_is_held(job) -> None:
    first, second = job.request_slots()
    job.offer(TM1, [first])
    assert job.ready == 0
    job.offer(TM2, [second])
    assert job.ready == 1
    job.offer(TM2, [second])  # offered again: not wanted, nothing new
    assert job.ready == 1
    job.request_slots()  # e.g. after a restart that kept its slots: ready at once
    assert job.ready == 2
    assert job.rm.called("request_slot")[2:] == []


# Offers -----------------------------------------------------------------------------------------


def test_offers_are_accepted_only_while_the_job_is_running(job) -> None:
    allocations = job.request_slots()
    job.running = False
    assert accepted(job.offer(TM1, allocations)) == []
    assert job.connections == [RM]  # declined without connecting to the TaskExecutor
    job.running = True
    assert accepted(job.offer(TM1, allocations)) == allocations  # still pending


def test_an_offer_is_declined_if_the_job_stops_running_while_connecting(job) -> None:
    allocations = job.request_slots()
    job.pending_connections[TM1] = connecting = Future()
    reply = job.offer(TM1, allocations)
    assert not reply.done()
    job.running = False
    connecting.set_result(job.tms[TM1])
    job.main_thread.trigger_all()
    assert accepted(reply) == []
    assert len(job.service.slot_pool) == 0 and job.connected == []


def test_only_offers_of_pending_requests_are_accepted(job) -> None:
    first, second = job.request_slots()
    stranger = AllocationId("not-requested")
    assert accepted(job.offer(TM1, [stranger, first])) == [first]
    assert accepted(job.offer(TM2, [first, second])) == [second]  # first is held already
    assert accepted(job.offer(TM2, [second])) == []
    assert [s.allocation_id for s in job.service.slot_pool.slots] == [first, second]
    assert job.service.slot_pool.get(first).task_manager == TM1
    assert job.service.slot_pool.get(first).gateway is job.tms[TM1]


def test_offers_of_an_unreachable_task_executor_are_returned_and_the_reply_fails(job) -> None:
    allocations = job.request_slots()
    reply = job.offer(NOWHERE, allocations, resource_id="tm-gone")
    assert isinstance(reply.exception(0), RecipientUnreachableError)
    assert len(job.service.slot_pool) == 0 and job.connected == [] and job.ready == 0
    assert accepted(job.offer(TM1, allocations)) == allocations  # pending again
    assert job.ready == 1


def test_a_task_manager_is_reported_once_when_it_starts_holding_slots(job) -> None:
    first, second = job.request_slots()
    job.offer(TM1, [first])
    job.offer(TM2, [second])
    lost = job.service.release_task_manager(ResourceId("tm-1"))
    assert [s.allocation_id for s in lost] == [first]
    (again,) = job.request_slots()
    job.offer(TM2, [again])  # tm-2 holds slots already: not reported again
    assert job.connected == [("tm-1", job.tms[TM1]), ("tm-2", job.tms[TM2])]


def test_a_task_manager_that_comes_back_is_reported_again(job) -> None:
    first, _ = job.request_slots()
    job.offer(TM1, [first])
    job.service.release_task_manager(ResourceId("tm-1"))
    (again,) = job.request_slots()
    job.offer(TM1, [again])
    assert [rid for rid, _ in job.connected] == ["tm-1", "tm-1"]


# Release ----------------------------------------------------------------------------------------


def test_release_all_frees_every_slot_and_cancels_the_waiting_requests(job) -> None:
    first, _ = job.request_slots()
    job.offer(TM1, [first])
    job.service.release_all("job ended")
    tm = job.tms[TM1]
    assert tm.calls == [
        ("release_partitions", (job.graph.job_id,)),
        ("free_slot", (first, "job ended")),
    ]
    assert job.rm.called("cancel_slot_requests") == [(job.graph.job_id,)]
    assert len(job.service.slot_pool) == 0


def test_public_methods_refuse_other_threads(job) -> None:
    errors: list[BaseException] = []

    def elsewhere() -> None:
        for call in (
            job.service.request_slots,
            lambda: job.service.offer_slots(ResourceId("tm-1"), TM1, []),
            lambda: job.service.release_task_manager(ResourceId("tm-1")),
            lambda: job.service.release_all("job ended"),
        ):
            try:
                call()
            except BaseException as error:
                errors.append(error)

    thread = threading.Thread(target=elsewhere)
    thread.start()
    thread.join(10)
    assert len(errors) == 4 and all(isinstance(e, IllegalThreadError) for e in errors)
