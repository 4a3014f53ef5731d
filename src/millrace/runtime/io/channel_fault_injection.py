"""TEST ONLY: spoil one bundle of one channel, to show seed 001's message-loss detection.

Enabled solely by the test-only key ``taskmanager.network.test.fault-injection`` (empty, the
default: off), as ``KIND:PRODUCER:CONSUMER:BUNDLE``: the BUNDLE-th data bundle (from 0) that
producer subtask PRODUCER sends to consumer subtask CONSUMER, in a result partition of any
vertex, is

* ``drop``: never delivered (its sequence number is skipped: the consumer sees a gap);
* ``repeat``: delivered twice with one sequence number (the consumer sees a repeat);
* ``delay``: delivered after the channel's next event (overtaken: the consumer sees a gap);
* ``stale``: delivered with another session id, as a zombie of an earlier attempt would (the
  consumer sees a stale session and drops it).

The fault fires once per job: the first partition to spoil its bundle creates the marker file
``channel-fault-injected`` in the job's working directory (atomically), and no later attempt
spoils anything, so the job recovers.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from millrace.config import Configuration, FlowControlOptions
from millrace.errors import ConfigError
from millrace.runtime.io.partition_events import DataBundle, PartitionEvent

__all__ = ["KINDS", "ChannelFault", "ChannelFaultInjector", "Stamped"]

KINDS = ("drop", "repeat", "delay", "stale")

Stamped = tuple[int, int, PartitionEvent]
"""``(session_id, sequence, event)`` as a channel carries it."""


@dataclass(frozen=True)
class ChannelFault:
    """One fault: ``kind`` on bundle ``bundle`` of channel ``producer`` -> ``consumer``."""

    kind: str
    producer: int
    consumer: int
    bundle: int

    @classmethod
    def parse(cls, spec: str) -> ChannelFault | None:
        """Parse ``KIND:PRODUCER:CONSUMER:BUNDLE``; None for an empty spec.

        Raises:
            ConfigError: If the spec is malformed (naming the key).
        """
        if not spec:
            return None
        parts = spec.split(":")
        allowed = f"KIND:PRODUCER:CONSUMER:BUNDLE with KIND one of {', '.join(KINDS)}"
        if len(parts) != 4 or parts[0] not in KINDS or not all(p.isdigit() for p in parts[1:]):
            raise ConfigError(FlowControlOptions.FAULT_INJECTION.key, spec, allowed)
        return cls(parts[0], int(parts[1]), int(parts[2]), int(parts[3]))


class ChannelFaultInjector:
    """Spoils the configured bundle of one producer subtask's partition.

    Args:
        fault: The fault.
        producer_index: This partition's producer subtask.
        marker: File whose creation claims the job's one fault.

    Threading:
        The owning TaskExecutor's main thread.
    """

    def __init__(self, fault: ChannelFault, producer_index: int, marker: Path) -> None:
        self.fault = fault
        self._producer = producer_index
        self._marker = marker
        self._bundles = 0
        self._delayed: Stamped | None = None

    @classmethod
    def from_configuration(
        cls, conf: Configuration, producer_index: int, working_dir: Path
    ) -> ChannelFaultInjector | None:
        """The injector the test-only key asks for, or None (the default).

        Raises:
            ConfigError: If the key is malformed.
        """
        fault = ChannelFault.parse(conf.get(FlowControlOptions.FAULT_INJECTION))
        if fault is None or fault.producer != producer_index:
            return None
        return cls(fault, producer_index, working_dir / "channel-fault-injected")

    def apply(self, subpartition: int, stamped: Stamped) -> list[Stamped]:
        """What the channel carries instead of ``stamped``: usually ``[stamped]``."""
        if subpartition != self.fault.consumer:
            return [stamped]
        out = [stamped]
        if self._delayed is not None:  # the delayed bundle follows the next event
            out.append(self._delayed)
            self._delayed = None
        if not isinstance(stamped[2], DataBundle):
            return out
        index = self._bundles
        self._bundles += 1
        if index != self.fault.bundle or not self._claim():
            return out
        session, sequence, event = stamped
        kind = self.fault.kind
        if kind == "drop":
            return out[1:]
        if kind == "repeat":
            return [stamped, stamped, *out[1:]]
        if kind == "delay":
            self._delayed = stamped
            return out[1:]
        return [(session ^ 1, sequence, event), *out[1:]]  # stale: another attempt's session

    def _claim(self) -> bool:
        try:
            self._marker.parent.mkdir(parents=True, exist_ok=True)
            os.close(os.open(self._marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return False
        return True
