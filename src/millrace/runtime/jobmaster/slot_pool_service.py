"""SlotPoolService: the job's side of slot allocation (Flink's SlotPoolService /
DeclarativeSlotPoolService, which the JobMaster owns).

It keeps the job's :class:`~millrace.runtime.jobmaster.slot_pool.SlotPool` and its link to the
ResourceManager. ``request_slots`` connects to the ResourceManager (once) and asks it for the
slots the job neither holds nor waits for, each under a new allocation id; if any request is
still pending ``slot.request.timeout`` seconds later, the job fails with a
``SlotAllocationError`` message. The TaskExecutors that serve the requests offer the slots
(``offer_slots``): while the job is RUNNING, the offers of pending allocation ids are accepted
once their TaskExecutor can be connected to, the rest are declined. When the job holds every
slot it needs, the Scheduler hears ``slots_ready``; when a TaskManager starts holding slots of the
job, the JobMaster hears it and watches that TaskManager's heartbeats (seed 000).

What it needs from outside it gets as callbacks, so that it runs without a JobMaster or a
Scheduler in tests (on a ManuallyTriggeredMainThreadExecutor with testing gateways).

Threading:
    Main thread of the JobMaster (``ComponentMainThreadExecutor``) only; public methods assert
    it. Connections complete anywhere and come back through the executor.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from concurrent.futures import Future
from typing import Protocol, TypeVar

from millrace.errors import SlotAllocationError
from millrace.rpc import GatewayType, RpcGateway
from millrace.rpc.main_thread_executor import ComponentMainThreadExecutor
from millrace.runtime.deployment import SlotOffer
from millrace.runtime.jobgraph import JobGraph
from millrace.runtime.jobmaster.slot_pool import AllocatedSlot, SlotPool
from millrace.runtime.resourcemanager.resource_manager_gateway import ResourceManagerGateway
from millrace.runtime.taskexecutor.task_executor_gateway import TaskExecutorGateway
from millrace.types import Address, AllocationId, JobMasterId, ResourceId, new_id

__all__ = ["Connect", "SlotPoolService"]

logger = logging.getLogger(__name__)

G = TypeVar("G", bound=RpcGateway)


class Connect(Protocol):
    """Resolve an address to a gateway (``RpcService.connect``)."""

    def __call__(
        self, address: str, gateway_type: GatewayType[G], fencing_token: object | None = None
    ) -> Future[G]:
        """Returns a future completed with the gateway, or failed (e.g. with
        RecipientUnreachableError) if nothing answers at ``address``."""
        ...


class SlotPoolService:
    """Requests, times out and accepts the slots of one job.

    Args:
        job_graph: The job (its id, name and ``slots_required()``).
        main_thread: The JobMaster's main thread.
        connect: Connects to the ResourceManager and to offering TaskExecutors.
        resource_manager_address: Where to request slots.
        job_master_address: Where the ResourceManager's TaskExecutors offer the slots.
        job_master_id: The JobMaster's fencing token, sent with every request.
        resource_manager_id: The ResourceManager's fencing token (its leader session).
        slot_request_timeout: Seconds (> 0) after a round of requests by which every slot must
            be held (``slot.request.timeout``).
        accepts_offers: True while the job can use slots (its status is RUNNING).
        slots_ready: Called once the job holds every slot it needs (the Scheduler deploys).
        fail: Called with the cause when the job cannot get its slots (ResourceManager
            unreachable, ``slot.request.timeout`` passed).
        task_manager_connected: Called with a TaskManager's id and gateway when it starts
            holding slots of the job (the JobMaster monitors its heartbeats).

    Attributes:
        slot_pool: The requested and held slots (the Scheduler deploys into them).
    """

    def __init__(
        self,
        job_graph: JobGraph,
        main_thread: ComponentMainThreadExecutor,
        connect: Connect,
        resource_manager_address: str,
        job_master_address: str,
        job_master_id: JobMasterId,
        resource_manager_id: str,
        slot_request_timeout: float,
        *,
        accepts_offers: Callable[[], bool],
        slots_ready: Callable[[], None],
        fail: Callable[[str], None],
        task_manager_connected: Callable[[ResourceId, TaskExecutorGateway], None],
    ) -> None:
        self.slot_pool = SlotPool()
        self._job_graph = job_graph
        self._main_thread = main_thread
        self._connect = connect
        self._rm_address = resource_manager_address
        self._job_master_address = job_master_address
        self._job_master_id = job_master_id
        self._resource_manager_id = resource_manager_id
        self._timeout = slot_request_timeout
        self._accepts_offers = accepts_offers
        self._slots_ready = slots_ready
        self._fail = fail
        self._task_manager_connected = task_manager_connected
        self._resource_manager: ResourceManagerGateway | None = None

    # Requests ----------------------------------------------------------------------------------

    def request_slots(self) -> None:
        """Request the slots the job neither holds nor waits for (Flink's
        SlotPoolService.requestNewAllocatedSlot); ``slots_ready`` at once if it holds them all.

        The first call connects to the ResourceManager and requests once connected; if that
        fails, ``fail`` is called with "ResourceManager unreachable: ..." and the next call
        tries again. Each round of requests checks ``slot.request.timeout`` seconds later and
        calls ``fail`` with a SlotAllocationError message if any request is still pending.

        Threading:
            Main thread only.
        """
        self._main_thread.assert_running_in_main_thread()
        if self._resource_manager is None:
            connecting = self._connect(
                self._rm_address, ResourceManagerGateway, fencing_token=self._resource_manager_id
            )
            self._main_thread.when_done(connecting, self._connected_to_resource_manager)
            return
        required, pool = self._job_graph.slots_required(), self.slot_pool
        if len(pool) >= required:
            self._slots_ready()
            return
        logger.info(
            "job %s: %d of %d slots held; requesting the rest",
            self._job_graph.name,
            len(pool),
            required,
        )
        for _ in range(pool.missing(required)):
            allocation_id = AllocationId(new_id())
            pool.add_pending(allocation_id)
            self._resource_manager.request_slot(
                self._job_master_address,
                self._job_master_id,
                self._job_graph.job_id,
                allocation_id,
            )
        self._main_thread.schedule(self._check_slot_timeout, self._timeout)

    def _connected_to_resource_manager(self, connecting: Future[ResourceManagerGateway]) -> None:
        if connecting.exception() is not None:
            self._fail(f"ResourceManager unreachable: {connecting.exception()}")
            return
        self._resource_manager = connecting.result()
        self.request_slots()

    def _check_slot_timeout(self) -> None:
        if self.slot_pool.has_pending_requests:
            needed = self._job_graph.slots_required()
            cause = SlotAllocationError(
                f"could not obtain {needed} slots within slot.request.timeout="
                f"{self._timeout:g} s (got {len(self.slot_pool)}); add TaskManagers or "
                "lower the parallelism",
                self._job_graph.job_id,
            )
            self._fail(str(cause))

    # Offers ------------------------------------------------------------------------------------

    def offer_slots(
        self, resource_id: ResourceId, task_manager_address: str, offers: list[SlotOffer]
    ) -> Future[list[SlotOffer]]:
        """OfferSlots from the TaskExecutor ``resource_id`` (Flink's SlotPoolService.offerSlots).

        Only offers of pending allocation ids are wanted, and only while ``accepts_offers()``;
        the wanted ones are accepted once the TaskExecutor at ``task_manager_address`` is
        connected to (then ``task_manager_connected`` if it held no slot of the job, and
        ``slots_ready`` if the job now holds every slot).

        Args:
            resource_id: The offering TaskManager.
            task_manager_address: Its TaskExecutor's RPC address.
            offers: The slots it allocated for this job.

        Returns:
            Future completed with the accepted offers (empty if none is wanted, or if the job
            stopped accepting while connecting; the TaskExecutor frees the others).

        Raises:
            Exception: via the future, the connection's error (e.g. RecipientUnreachableError)
                if the TaskExecutor cannot be connected to; the wanted allocation ids are pending
                again.

        Threading:
            Main thread only.
        """
        self._main_thread.assert_running_in_main_thread()
        reply: Future[list[SlotOffer]] = Future()
        wanted = self.slot_pool.take_offers(offers) if self._accepts_offers() else []
        if not wanted:
            reply.set_result([])
            return reply
        connecting = self._connect(task_manager_address, TaskExecutorGateway)
        self._main_thread.when_done(
            connecting,
            functools.partial(
                self._offer_connected,
                resource_id=resource_id,
                address=Address(task_manager_address),
                wanted=wanted,
                reply=reply,
            ),
        )
        return reply

    def _offer_connected(
        self,
        connecting: Future[TaskExecutorGateway],
        resource_id: ResourceId,
        address: Address,
        wanted: list[SlotOffer],
        reply: Future[list[SlotOffer]],
    ) -> None:
        if not self._accepts_offers():
            reply.set_result([])  # the job ended meanwhile: the TaskExecutor frees them
            return
        if connecting.exception() is not None:
            self.slot_pool.return_offers(wanted)
            reply.set_exception(connecting.exception())
            return
        gateway, new_task_manager = connecting.result(), not self.slot_pool.holds(resource_id)
        for offer in wanted:
            self.slot_pool.add(AllocatedSlot(offer.allocation_id, resource_id, address, gateway))
        if new_task_manager:
            self._task_manager_connected(resource_id, gateway)
        reply.set_result(wanted)
        if len(self.slot_pool) == self._job_graph.slots_required():
            self._slots_ready()

    # Release -----------------------------------------------------------------------------------

    def release_task_manager(self, resource_id: ResourceId) -> list[AllocatedSlot]:
        """Drop the slots of a lost TaskManager (Flink's SlotPoolService.releaseTaskManager).

        Returns:
            The slots it held, in the order they were accepted.

        Threading:
            Main thread only.
        """
        self._main_thread.assert_running_in_main_thread()
        return self.slot_pool.release_task_manager(resource_id)

    def release_all(self, cause: str) -> None:
        """The job ended: each held slot's TaskExecutor releases the job's partitions and frees
        the slot (told ``cause``); the requests still waiting at the ResourceManager are
        cancelled.

        Threading:
            Main thread only.
        """
        self._main_thread.assert_running_in_main_thread()
        job_id = self._job_graph.job_id
        for slot in self.slot_pool.release_all():
            slot.gateway.release_partitions(job_id)
            slot.gateway.free_slot(slot.allocation_id, cause)
        if self._resource_manager is not None:
            self._resource_manager.cancel_slot_requests(job_id)
