"""How a consumer task pulls its input: long polls to the producers' TaskExecutors, and how it
answers their AckRequests (``acknowledge_partition_events`` tells).

Threading:
    The poll function runs on one task thread (its InputGate's); it connects lazily, once per
    producer TaskExecutor.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future

from millrace.rpc import RpcService
from millrace.runtime.deployment import InputChannelDescriptor
from millrace.runtime.io.input_gate import AckFn, InputGate, PollFn
from millrace.runtime.io.partition_events import Ack, PartitionEvents
from millrace.runtime.taskexecutor.task_executor_gateway import TaskExecutorGateway

__all__ = ["input_gate", "partition_ack", "partition_poll"]


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


def partition_ack(rpc_service: RpcService) -> AckFn:
    """An ack function for an InputGate: ``acknowledge_partition_events`` to the channel's
    producer (a tell: a lost Ack leaves the producer waiting for room until the next one, and
    the job's failover handles a lost producer). Threading: one task thread."""
    gateways: dict[str, TaskExecutorGateway] = {}

    def ack(channel: InputChannelDescriptor, message: Ack) -> None:
        gateway = gateways.get(channel.producer_address)
        if gateway is None:
            gateway = rpc_service.connect(channel.producer_address, TaskExecutorGateway).result()
            gateways[channel.producer_address] = gateway
        gateway.acknowledge_partition_events(
            channel.partition_id, channel.subpartition_index, message
        )

    return ack


def input_gate(
    channels: Sequence[InputChannelDescriptor],
    rpc_service: RpcService,
    poll_timeout: float,
    aligned: bool,
) -> InputGate | None:
    """The InputGate of a consumer task reading ``channels`` (None for a source: no channels),
    polling and acknowledging through ``rpc_service``."""
    if not channels:
        return None
    poll = partition_poll(rpc_service, poll_timeout)
    return InputGate(channels, poll, aligned, partition_ack(rpc_service))
