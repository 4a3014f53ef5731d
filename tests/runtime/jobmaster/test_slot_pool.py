"""SlotPool: pending requests, offers, slot sharing, losing a TaskManager."""

from __future__ import annotations

from millrace.runtime.deployment import SlotOffer
from millrace.runtime.jobmaster.slot_pool import AllocatedSlot, SlotPool
from millrace.types import Address, AllocationId


def slot(allocation: str, resource_id: str) -> AllocatedSlot:
    return AllocatedSlot(
        AllocationId(allocation), resource_id, Address(f"tcp://127.0.0.1:1/{resource_id}"), None
    )  # type: ignore[arg-type]


def offer(allocation: str) -> SlotOffer:
    return SlotOffer(AllocationId(allocation), 0)


def test_only_offers_for_pending_requests_are_taken_once() -> None:
    pool = SlotPool()
    pool.add_pending(AllocationId("a"))
    pool.add_pending(AllocationId("b"))
    assert pool.missing(3) == 1
    assert [o.allocation_id for o in pool.take_offers([offer("a"), offer("x")])] == ["a"]
    assert pool.take_offers([offer("a")]) == []  # no longer pending
    assert pool.has_pending_requests
    pool.return_offers([offer("a")])  # its TaskExecutor was unreachable: wait for it again
    assert [o.allocation_id for o in pool.take_offers([offer("a"), offer("b")])] == ["a", "b"]
    assert not pool.has_pending_requests


def test_subtasks_share_slots_round_robin_and_a_lost_task_manager_takes_its_slots() -> None:
    pool = SlotPool()
    for allocation, resource in [("a", "tm1"), ("b", "tm2"), ("c", "tm1")]:
        pool.add(slot(allocation, resource))
    assert [pool.slot_for(i).allocation_id for i in range(4)] == ["a", "b", "c", "a"]
    assert pool.missing(5) == 2
    lost = pool.release_task_manager("tm1")
    assert [s.allocation_id for s in lost] == ["a", "c"]
    assert pool.get(AllocationId("a")) is None
    assert pool.get(AllocationId("b")).resource_id == "tm2"
    assert [s.allocation_id for s in pool.release_all()] == ["b"]
    assert len(pool) == 0 and pool.missing(2) == 2
