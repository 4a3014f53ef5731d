"""Where a CheckpointCoordinator's checkpoint ids come from.

Without high availability they are counted here, going on after a restored checkpoint's. Under
high availability they come from the job's checkpoint id counter in ZooKeeper (Flink's
CheckpointIDCounter): each id is reserved there on the I/O executor before its checkpoint
starts, so a new leader never hands out an id its predecessor did, not even one whose
checkpoint never completed (its tasks may have written state and staged sink data under it).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from concurrent.futures import Executor, Future

from millrace.errors import CheckpointError, describe
from millrace.rpc.main_thread_executor import ComponentMainThreadExecutor
from millrace.runtime.checkpoint.checkpoint_storage import CheckpointMetadata
from millrace.runtime.highavailability.checkpoint_id_counter import CheckpointIdCounter

__all__ = ["CheckpointIds"]


class CheckpointIds:
    """The checkpoint ids of one coordinator.

    Args:
        job_name: For error messages.
        main_thread: The JobMaster's main thread (where a reserved id is used).
        io_executor: Runs the counter's blocking I/O.

    Threading:
        Main thread of the JobMaster only.
    """

    def __init__(
        self, job_name: str, main_thread: ComponentMainThreadExecutor, io_executor: Executor
    ) -> None:
        self._job_name = job_name
        self._on_main_thread = main_thread.when_done
        self._io = io_executor
        self.next_id = 1  # the next id, or (with a counter) the least the counter may hand out
        self._counter: CheckpointIdCounter | None = None
        self.reserving = 0  # checkpoints waiting for their id from the counter

    def use_counter(self, counter: CheckpointIdCounter | None) -> None:
        """Take every id from ``counter`` from now on (high availability: the job's counter in
        ZooKeeper, so that no id a former leader handed out is used again); None: count here."""
        self._counter = counter

    def restored(self, checkpoint_id: int) -> None:
        """Ids go on after ``checkpoint_id`` (the counter is raised to it when asked next, as
        Flink's ``setCount`` on a savepoint's restore)."""
        self.next_id = max(self.next_id, checkpoint_id + 1)

    def with_id(
        self, start: Callable[[int], Future[CheckpointMetadata]]
    ) -> Future[CheckpointMetadata]:
        """``start(checkpoint id)``'s outcome: the id counted here, or reserved in the counter
        first (I/O executor), then ``start`` on the main thread (which asks the tasks again:
        after a failover or the job's end they no longer all run, and ``start`` raises
        CheckpointError, as it does if the counter failed)."""
        counter = self._counter
        if counter is None:
            checkpoint_id = self.next_id
            self.next_id += 1
            return start(checkpoint_id)
        outcome: Future[CheckpointMetadata] = Future()
        self.reserving += 1

        def reserved(reserving: Future[int]) -> None:
            self.reserving -= 1
            error = reserving.exception()
            if error is not None:
                why = f"no checkpoint id: {describe(error)}"
                outcome.set_exception(CheckpointError(f"job {self._job_name}: {why}"))
                return
            checkpoint_id = reserving.result()
            self.next_id = max(self.next_id, checkpoint_id + 1)
            try:
                started = start(checkpoint_id)
            except CheckpointError as refused:
                outcome.set_exception(refused)
                return
            started.add_done_callback(functools.partial(_copy_outcome, outcome))

        self._on_main_thread(self._io.submit(counter.get_and_increment, self.next_id), reserved)
        return outcome


def _copy_outcome(into: Future[CheckpointMetadata], source: Future[CheckpointMetadata]) -> None:
    """Any thread: complete ``into`` as ``source`` completed."""
    error = source.exception()
    if error is not None:
        into.set_exception(error)
    else:
        into.set_result(source.result())
