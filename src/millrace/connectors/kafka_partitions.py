"""Kafka partitions as input splits, and the consumer settings the enumerator and the readers
share.

A partition is one split (Flink's KafkaPartitionSplit): its path is ``topic/partition`` (also
its id across restarts), its number the partition number, and its position the offset of the
next message to read. Position 0 is also what a split carries before it was ever read; the
reader starts it at the source's starting offsets then (OFFSET_BEGINNING for ``earliest``,
which is offset 0 unless retention removed the head, where Kafka would start anyway).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from millrace.errors import PipelineError
from millrace.runtime.io.input_split import InputSplit

__all__ = [
    "consumer_config",
    "create_consumer",
    "partition_of",
    "partition_split",
]

logger = logging.getLogger(__name__)


def partition_split(
    topic: str, partition: int, end_offset: int | None = None, start_offset: int | None = None
) -> InputSplit:
    """The split of ``topic``'s partition ``partition``.

    Args:
        topic: Topic name.
        partition: Partition number (>= 0).
        end_offset: For a bounded read: the offset to read up to (exclusive); None: no end.
        start_offset: The offset to start at (``latest`` starting offsets); None: the
            reader's starting offsets.
    """
    return InputSplit(
        partition, f"{topic}/{partition}", end_position=end_offset, start_position=start_offset
    )


def partition_of(split: InputSplit) -> int:
    """The partition number of a split made by ``partition_split``.

    Raises:
        ValueError: If the split's path is not ``topic/partition``.
    """
    topic, _, number = split.path.rpartition("/")
    if not topic or not number.isdigit():
        raise ValueError(f"not a Kafka partition split: {split.path!r} (expected topic/partition)")
    return int(number)


def consumer_config(
    bootstrap_servers: str, properties: Mapping[str, str], client_id: str
) -> dict[str, Any]:
    """librdkafka settings of a consumer that reads assigned partitions (no group membership,
    no offset commits: positions live in Millrace's checkpoints, as in Flink).

    Args:
        bootstrap_servers: ``host:port[,host:port...]``.
        properties: The user's consumer properties; they override the defaults here, except
            the settings the source relies on (no commits, partition-end events).
        client_id: ``client.id`` (names the consumer in broker logs).

    Returns:
        The configuration for ``confluent_kafka.Consumer``; librdkafka's log lines go to this
        module's logger instead of stderr.
    """
    return {
        "client.id": client_id,
        # The Python client requires a group id even for assign(); nothing joins or commits.
        "group.id": "millrace",
        "auto.offset.reset": "earliest",
        **properties,
        # what the source relies on, whatever the properties say
        "bootstrap.servers": bootstrap_servers,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "logger": logger,
    }


def create_consumer(config: dict[str, Any], topic: str) -> Any:
    """A ``confluent_kafka.Consumer`` with ``config`` (``consumer_config``).

    Raises:
        PipelineError: If librdkafka rejects the configuration (an unknown or invalid
            property); ``__cause__`` holds its error.
    """
    from confluent_kafka import Consumer, KafkaException

    try:
        return Consumer(config)
    except (KafkaException, ValueError, TypeError) as error:
        raise PipelineError(
            f"Kafka consumer of topic {topic!r}: invalid properties: {error}"
        ) from error
