"""TaskSlotTable: a TaskManager's slots and which job allocation holds each (Flink's names)."""

from __future__ import annotations

from dataclasses import dataclass

from millrace.errors import SlotAllocationError
from millrace.types import AllocationId, JobId

__all__ = ["TaskSlot", "TaskSlotTable"]


@dataclass
class TaskSlot:
    index: int
    allocation_id: AllocationId | None = None
    job_id: JobId | None = None
    job_master_address: str | None = None


class TaskSlotTable:
    """Slots of one TaskManager.

    Threading:
        TaskExecutor main thread only.
    """

    def __init__(self, number_of_slots: int) -> None:
        self.slots = [TaskSlot(i) for i in range(number_of_slots)]

    def allocate(
        self, index: int, job_id: JobId, allocation_id: AllocationId, job_master_address: str
    ) -> None:
        """Raises SlotAllocationError if the slot does not exist or holds another allocation."""
        if not 0 <= index < len(self.slots):
            raise SlotAllocationError(f"no slot {index}; this TaskManager has {len(self.slots)}")
        slot = self.slots[index]
        if slot.allocation_id not in (None, allocation_id):
            raise SlotAllocationError(f"slot {index} is held by allocation {slot.allocation_id}")
        slot.allocation_id, slot.job_id, slot.job_master_address = (
            allocation_id,
            job_id,
            job_master_address,
        )

    def find(self, allocation_id: AllocationId) -> TaskSlot | None:
        return next((s for s in self.slots if s.allocation_id == allocation_id), None)

    def free(self, allocation_id: AllocationId) -> TaskSlot | None:
        """Free the slot of ``allocation_id``; returns it, or None if no slot holds it."""
        slot = self.find(allocation_id)
        if slot is not None:
            slot.allocation_id = slot.job_id = slot.job_master_address = None
        return slot
