"""InputGate: a consumer subtask's view of its input channels (Flink's names).

One channel per producer subtask. The gate keeps one outstanding long-poll per unfinished
channel and hands events to the task as they arrive, preserving each channel's order, and
tracks per-channel watermarks: the gate's watermark is their minimum (seed 002).
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Sequence
from concurrent.futures import Future

from millrace.runtime.deployment import InputChannelDescriptor
from millrace.runtime.io.partition_events import (
    MIN_WATERMARK,
    EndOfPartition,
    PartitionEvent,
    PartitionEvents,
    Watermark,
)

__all__ = ["InputGate"]

PollFn = Callable[[InputChannelDescriptor, int], "Future[PartitionEvents]"]


class InputGate:
    """Reads the channels of one consumer subtask.

    Args:
        channels: The input channels, one per producer subtask.
        poll: Starts a pull ``(channel, from_index) -> Future[PartitionEvents]`` (an ask to the
            producer's TaskExecutor).

    Threading:
        The task thread only.
    """

    def __init__(self, channels: Sequence[InputChannelDescriptor], poll: PollFn) -> None:
        self._channels = list(channels)
        self._poll = poll
        self._next_index = [0] * len(channels)
        self._finished = [False] * len(channels)
        self._watermarks = [MIN_WATERMARK] * len(channels)
        self._pending: dict[Future[PartitionEvents], int] = {}

    @property
    def finished(self) -> bool:
        """True once every channel delivered EndOfPartition."""
        return all(self._finished)

    @property
    def watermark(self) -> int:
        """Minimum of the channels' last watermarks (epoch ms)."""
        return min(self._watermarks) if self._watermarks else MIN_WATERMARK

    def poll_next(self, timeout: float) -> list[tuple[int, PartitionEvent]]:
        """Wait up to ``timeout`` seconds for events; return them as ``(channel, event)``.

        Watermarks and EndOfPartition update the gate's state before they are returned.

        Raises:
            RpcError: If a producer cannot be reached or its partition is gone.
        """
        for i, done in enumerate(self._finished):
            if not done and i not in self._pending.values():
                self._pending[self._poll(self._channels[i], self._next_index[i])] = i
        if not self._pending:
            return []
        done, _ = concurrent.futures.wait(
            list(self._pending), timeout=timeout, return_when=concurrent.futures.FIRST_COMPLETED
        )
        out: list[tuple[int, PartitionEvent]] = []
        for future in done:
            channel = self._pending.pop(future)
            reply: PartitionEvents = future.result()
            if reply.from_index != self._next_index[channel]:
                continue  # stale reply
            self._next_index[channel] += len(reply.events)
            for event in reply.events:
                if isinstance(event, Watermark):
                    self._watermarks[channel] = max(self._watermarks[channel], event.timestamp_ms)
                elif isinstance(event, EndOfPartition):
                    self._finished[channel] = True
                out.append((channel, event))
        return out

    def close(self) -> None:
        """Forget outstanding pulls (their replies are ignored)."""
        for future in self._pending:
            future.cancel()
        self._pending.clear()

    def __repr__(self) -> str:
        return f"InputGate(channels={len(self._channels)}, watermark={self.watermark})"
