"""SlotManager: the ResourceManager's table of registered TaskManagers and their slots.

Matches slot requests to free slots, first come first served; requests that cannot be served
wait until a slot frees up or a TaskManager registers (Flink's SlotManager, reduced to one
resource profile: every slot is equal).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from millrace.runtime.hardware_description import HardwareDescription
from millrace.types import Address, AllocationId, JobId, JobMasterId, ResourceId

__all__ = [
    "AllocatedSlotInfo",
    "PendingSlotRequest",
    "SlotManager",
    "TaskManagerInfo",
    "TaskManagerSlot",
]


@dataclass
class TaskManagerSlot:
    """One slot: free when ``allocation_id`` is None."""

    resource_id: ResourceId
    slot_index: int
    allocation_id: AllocationId | None = None
    job_id: JobId | None = None


@dataclass(frozen=True)
class PendingSlotRequest:
    job_id: JobId
    allocation_id: AllocationId
    job_master_address: str
    job_master_id: JobMasterId


@dataclass(frozen=True)
class AllocatedSlotInfo:
    """A slot of a TaskManager allocated to a job.

    Attributes:
        slot_index: The slot.
        job_id: The job holding it ("" for one the TaskManager still holds for a job it is
            letting go of).
        allocation_id: The allocation.
    """

    slot_index: int
    job_id: str
    allocation_id: str


@dataclass(frozen=True)
class TaskManagerInfo:
    """What REST and the CLI show of a TaskManager.

    Attributes:
        resource_id, address: The TaskManager and its TaskExecutor's RPC address.
        slots_total, slots_free: Its slots.
        hardware: Its machine, as it told at registration (None: not told).
        time_since_last_heartbeat_ms: Since its last heartbeat (or its registration), ms.
        resident_memory_bytes: Its process's resident memory at the last heartbeat (-1:
            unknown).
        allocated_slots: Its slots allocated to jobs.
    """

    resource_id: ResourceId
    address: Address
    slots_total: int
    slots_free: int
    hardware: HardwareDescription | None = None
    time_since_last_heartbeat_ms: int = 0
    resident_memory_bytes: int = -1
    allocated_slots: tuple[AllocatedSlotInfo, ...] = ()


@dataclass
class _Worker:
    address: Address
    registration_id: str
    slots: list[TaskManagerSlot] = field(default_factory=list)
    hardware: HardwareDescription | None = None
    last_heartbeat: float = 0.0  # monotonic s
    resident_memory_bytes: int = -1


class SlotManager:
    """Slot bookkeeping.

    Threading:
        ResourceManager main thread only.
    """

    def __init__(self) -> None:
        self._workers: dict[ResourceId, _Worker] = {}
        self._pending: deque[PendingSlotRequest] = deque()

    def register(
        self,
        resource_id: ResourceId,
        address: Address,
        slots: int,
        registration_id: str,
        hardware: HardwareDescription | None = None,
        now: float = 0.0,
    ) -> None:
        """Add a TaskManager with ``slots`` free slots; ``now`` (monotonic s) counts as its
        latest heartbeat."""
        self._workers[resource_id] = _Worker(
            address,
            registration_id,
            [TaskManagerSlot(resource_id, i) for i in range(slots)],
            hardware,
            now,
        )

    def heartbeat(self, resource_id: ResourceId, now: float, resident_memory_bytes: int) -> None:
        """A heartbeat of ``resource_id`` at ``now`` (monotonic s); unknown ones are ignored."""
        worker = self._workers.get(resource_id)
        if worker is not None:
            worker.last_heartbeat = now
            worker.resident_memory_bytes = resident_memory_bytes

    def unregister(self, resource_id: ResourceId) -> None:
        self._workers.pop(resource_id, None)

    def registration(self, resource_id: ResourceId) -> tuple[Address, str] | None:
        worker = self._workers.get(resource_id)
        return (worker.address, worker.registration_id) if worker else None

    def add_request(self, request: PendingSlotRequest) -> None:
        self._pending.append(request)

    def cancel_requests(self, job_id: JobId) -> None:
        self._pending = deque(r for r in self._pending if r.job_id != job_id)

    def free(self, resource_id: ResourceId, slot_index: int) -> None:
        worker = self._workers.get(resource_id)
        if worker is not None and 0 <= slot_index < len(worker.slots):
            worker.slots[slot_index].allocation_id = None
            worker.slots[slot_index].job_id = None

    def match(self) -> list[tuple[PendingSlotRequest, TaskManagerSlot, Address]]:
        """Assign free slots to waiting requests, oldest first; returns the assignments.

        Slots spread over TaskManagers: the TaskManager with the most free slots goes first.
        """
        out = []
        while self._pending:
            best: tuple[int, ResourceId] | None = None
            for rid, worker in self._workers.items():
                free = sum(s.allocation_id is None for s in worker.slots)
                if free and (best is None or free > best[0]):
                    best = (free, rid)
            if best is None:
                break
            request = self._pending.popleft()
            worker = self._workers[best[1]]
            slot = next(s for s in worker.slots if s.allocation_id is None)
            slot.allocation_id = request.allocation_id
            slot.job_id = request.job_id
            out.append((request, slot, worker.address))
        return out

    def infos(self, now: float = 0.0) -> list[TaskManagerInfo]:
        """Every registered TaskManager; ``now`` (monotonic s) dates the heartbeat ages."""
        return [
            TaskManagerInfo(
                rid,
                w.address,
                len(w.slots),
                sum(s.allocation_id is None for s in w.slots),
                w.hardware,
                max(0, round((now - w.last_heartbeat) * 1000)),
                w.resident_memory_bytes,
                tuple(
                    AllocatedSlotInfo(s.slot_index, s.job_id or "", s.allocation_id)
                    for s in w.slots
                    if s.allocation_id is not None
                ),
            )
            for rid, w in self._workers.items()
        ]

    @property
    def free_slots(self) -> int:
        return sum(i.slots_free for i in self.infos())
