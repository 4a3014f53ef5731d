"""SlotPool: the slots one JobMaster requested and holds (Flink's SlotPool).

A JobMaster asks the ResourceManager for slots by allocation id; the TaskExecutors that serve
the requests offer the slots to the JobMaster, which accepts offers only for allocation ids it is
still waiting for. Subtask *i* of every vertex runs in slot *i mod n* (slot sharing).

Threading:
    Plain state of the JobMaster's SlotPoolService, which changes it (the ExecutionDeployer
    reads it): every method runs on the JobMaster's main thread.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from millrace.runtime.deployment import SlotOffer
from millrace.runtime.taskexecutor.task_executor_gateway import TaskExecutorGateway
from millrace.types import Address, AllocationId, ResourceId

__all__ = ["AllocatedSlot", "SlotPool"]


@dataclass(frozen=True)
class AllocatedSlot:
    """A slot the job holds.

    Attributes:
        allocation_id: The id the JobMaster requested it under.
        resource_id: The TaskManager that owns it.
        task_manager: That TaskManager's RPC address.
        gateway: Gateway of its TaskExecutor.
    """

    allocation_id: AllocationId
    resource_id: ResourceId
    task_manager: Address
    gateway: TaskExecutorGateway


class SlotPool:
    """The pending slot requests and the allocated slots of one job."""

    def __init__(self) -> None:
        self._pending: list[AllocationId] = []
        self._slots: list[AllocatedSlot] = []

    def __len__(self) -> int:
        """Slots held."""
        return len(self._slots)

    @property
    def slots(self) -> tuple[AllocatedSlot, ...]:
        """Slots held, in the order they were accepted."""
        return tuple(self._slots)

    @property
    def has_pending_requests(self) -> bool:
        return bool(self._pending)

    def missing(self, required: int) -> int:
        """Slots neither held nor requested, out of ``required`` (>= 0)."""
        return max(0, required - len(self._slots) - len(self._pending))

    def add_pending(self, allocation_id: AllocationId) -> None:
        """Remember a request sent to the ResourceManager."""
        self._pending.append(allocation_id)

    def take_offers(self, offers: Iterable[SlotOffer]) -> list[SlotOffer]:
        """The offers whose allocation ids are pending; they stop being pending."""
        wanted = [o for o in offers if o.allocation_id in self._pending]
        for offer in wanted:
            self._pending.remove(offer.allocation_id)
        return wanted

    def return_offers(self, offers: Iterable[SlotOffer]) -> None:
        """Offers taken but not accepted after all (their TaskExecutor was unreachable)."""
        self._pending.extend(o.allocation_id for o in offers)

    def add(self, slot: AllocatedSlot) -> None:
        self._slots.append(slot)

    def holds(self, resource_id: ResourceId) -> bool:
        """Whether a held slot is on TaskManager ``resource_id``."""
        return any(s.resource_id == resource_id for s in self._slots)

    def slot_for(self, subtask_index: int) -> AllocatedSlot:
        """The slot subtask ``subtask_index`` of any vertex runs in (slot sharing).

        Raises:
            ZeroDivisionError: If the pool holds no slot.
        """
        return self._slots[subtask_index % len(self._slots)]

    def get(self, allocation_id: AllocationId | None) -> AllocatedSlot | None:
        """The held slot of ``allocation_id``, None if it is not held."""
        return next((s for s in self._slots if s.allocation_id == allocation_id), None)

    def release_task_manager(self, resource_id: ResourceId) -> list[AllocatedSlot]:
        """Drop and return the slots of TaskManager ``resource_id``."""
        lost = [s for s in self._slots if s.resource_id == resource_id]
        self._slots = [s for s in self._slots if s.resource_id != resource_id]
        return lost

    def release_all(self) -> list[AllocatedSlot]:
        """Drop and return every held slot (the job ended)."""
        slots, self._slots = self._slots, []
        return slots
