"""The TaskExecutor's part of seed 001's channel protocol: its result partitions' flow control.

A mixin of :class:`~millrace.runtime.taskexecutor.task_executor.TaskExecutor` (kept apart so the
endpoint stays small): it creates result partitions with the TaskManager's
``taskmanager.network.flow-control.*`` settings (and the test-only fault injection), takes the
consumers' Acks, and lets a producing task wait for room in its output channels.

Threading:
    Every method on the TaskExecutor's main thread; ``OutputRoom``'s on any thread (they go
    through ``call_async``).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from millrace.config import Configuration
from millrace.runtime.deployment import TaskDeploymentDescriptor
from millrace.runtime.io.channel_fault_injection import ChannelFaultInjector
from millrace.runtime.io.channel_window import FlowControlSettings
from millrace.runtime.io.partition_events import Ack
from millrace.runtime.io.result_partition import ResultPartition
from millrace.types import ResultPartitionId

__all__ = ["OutputRoom", "PartitionFlowControl"]


class PartitionFlowControl:
    """Flow control of a TaskExecutor's result partitions (mixin; needs ``_partitions``,
    ``_configuration``, ``_tmp_dir`` and ``call_async`` of the endpoint)."""

    _partitions: dict[ResultPartitionId, ResultPartition]
    _configuration: Configuration
    _tmp_dir: Path
    call_async: Callable[..., Future[Any]]  # the RpcEndpoint's (annotation only: no override)

    def _new_result_partition(self, tdd: TaskDeploymentDescriptor) -> None:
        """Create the partition ``tdd`` produces (main thread).

        Raises:
            ConfigError: If a ``taskmanager.network.*`` key is invalid.
        """
        assert tdd.output_partition is not None
        conf = self._configuration
        faults = ChannelFaultInjector.from_configuration(
            conf, tdd.subtask_index, self._tmp_dir / "jobs" / tdd.job_id
        )
        self._partitions[tdd.output_partition] = ResultPartition(
            tdd.output_partition,
            tdd.job_id,
            tdd.num_subpartitions,
            FlowControlSettings.from_configuration(conf),
            faults,
        )

    def acknowledge_partition_events(
        self, partition_id: ResultPartitionId, subpartition: int, ack: Ack
    ) -> None:
        partition = self._partitions.get(partition_id)
        if partition is not None:
            partition.acknowledge(subpartition, ack)

    def _output_room(self, tdd: TaskDeploymentDescriptor) -> OutputRoom | None:
        """How the task of ``tdd`` waits for room in its output channels; None when it has no
        output partition or flow control is off (it never waits)."""
        if (
            tdd.output_partition is None
            or not FlowControlSettings.from_configuration(self._configuration).enabled
        ):
            return None
        return OutputRoom(self, tdd.output_partition)

    def _has_room(self, partition_id: ResultPartitionId) -> bool:
        """Main thread: whether every channel has room (True for a released partition: the
        task is being cancelled then)."""
        partition = self._partitions.get(partition_id)
        return partition is None or partition.has_room

    def _wait_for_room(self, partition_id: ResultPartitionId) -> Future[None]:
        """Main thread: completed once every channel has room (at once for a released
        partition)."""
        partition = self._partitions.get(partition_id)
        if partition is None:
            done: Future[None] = Future()
            done.set_result(None)
            return done
        return partition.wait_for_room()

    def _request_acks(self, partition_id: ResultPartitionId) -> None:
        """Main thread: repeat the AckRequest of every full channel of the partition."""
        partition = self._partitions.get(partition_id)
        if partition is not None:
            partition.request_acks()


class OutputRoom:
    """A producing task's view of its output channels' room (any thread; each call is a
    round trip to the TaskExecutor's main thread)."""

    def __init__(self, executor: PartitionFlowControl, partition_id: ResultPartitionId) -> None:
        self._executor = executor
        self._partition_id = partition_id

    def has_room(self) -> Future[bool]:
        """Completed with whether every channel has room now."""
        return self._executor.call_async(lambda: self._executor._has_room(self._partition_id))

    def wait(self) -> Future[None]:
        """Completed once every channel has room."""
        return self._executor.call_async(lambda: self._executor._wait_for_room(self._partition_id))

    def request_acks(self) -> None:
        """Repeat the AckRequest of every full channel (a producer waiting long: an Ack may
        have been lost with a connection)."""
        self._executor.call_async(lambda: self._executor._request_acks(self._partition_id))
