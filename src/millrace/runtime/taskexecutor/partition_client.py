"""How a consumer task pulls its input: long polls to the producers' TaskExecutors.

Threading:
    The poll function runs on one task thread (its InputGate's); it connects lazily, once per
    producer TaskExecutor.
"""

from __future__ import annotations

from concurrent.futures import Future

from millrace.rpc import RpcService
from millrace.runtime.deployment import InputChannelDescriptor
from millrace.runtime.io.input_gate import PollFn
from millrace.runtime.io.partition_events import PartitionEvents
from millrace.runtime.taskexecutor.task_executor_gateway import TaskExecutorGateway

__all__ = ["partition_poll"]


def partition_poll(rpc_service: RpcService, poll_timeout: float) -> PollFn:
    """A poll function for an InputGate: ``request_partition_events`` to the channel's
    producer, which answers when events exist or empty after ``poll_timeout`` s (the call's
    own timeout adds the ask timeout to that)."""
    timeout = poll_timeout + rpc_service.ask_timeout
    gateways: dict[str, TaskExecutorGateway] = {}  # used by one task thread only

    def poll(channel: InputChannelDescriptor, from_index: int) -> Future[PartitionEvents]:
        gateway = gateways.get(channel.producer_address)
        if gateway is None:  # the lookup fails after rpc.lookup-timeout at the latest
            gateway = rpc_service.connect(channel.producer_address, TaskExecutorGateway).result()
            gateways[channel.producer_address] = gateway
        return gateway.request_partition_events(
            channel.partition_id, channel.subpartition_index, from_index, timeout=timeout
        )

    return poll
