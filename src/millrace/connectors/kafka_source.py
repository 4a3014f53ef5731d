"""KafkaSource: JSON records from a Kafka topic, bounded or unbounded (Flink's KafkaSource).

Splits are the topic's partitions; positions are offsets, kept in Millrace's checkpoints (never
committed to the brokers), so a restored job rewinds every partition to the checkpoint and the
output stays exactly-once. In the JobMaster the KafkaSplitEnumerator lists the partitions (and,
bounded, their end offsets at the start of the job) and assigns partition ``p`` to subtask
``p % parallelism``; in each subtask the KafkaSourceReader consumes its partitions with
confluent-kafka and hands each bundle to Spark as one Arrow table, whose JSON values Spark
parses (``from_json``): Python never parses a record. Values that are not JSON for the schema
become dead letters with the reason. Watermarks are per partition, from the data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from millrace.api.connector.source import Boundedness, SourceReaderContext
from millrace.connectors.kafka_source_reader import KafkaSourceReader
from millrace.connectors.kafka_split_enumerator import KafkaSplitEnumerator

__all__ = ["KafkaSource"]

EARLIEST = "earliest"
LATEST = "latest"


@dataclass(frozen=True)
class KafkaSource:
    """The messages of one Kafka topic, their values JSON records of ``schema``.

    Use the constructor ``json``. Picklable: it travels to the cluster with the job.

    Args:
        bootstrap_servers: ``host:port[,host:port...]`` of the brokers.
        topic: The topic to read.
        schema: The values' Spark schema: a DDL string (``"carrier string, dep_delay
            double"``) or a StructType. Fields missing from a value are null; a value that is
            not a JSON object of these types is a dead letter.
        bounded: True: read every partition up to the end offsets found when the job starts,
            then finish (Flink's ``setBounded(latest)``); False: read forever.
        starting_offsets: Where partitions never read start: ``"earliest"`` (the first
            available message), ``"latest"`` (the end of each partition when the job starts;
            partitions created later from their first message), or a mapping partition ->
            offset (others: earliest). A job restored from a checkpoint starts at the
            checkpoint's offsets instead; one that restarts without a checkpoint resolves
            ``latest`` again.
        properties: librdkafka consumer properties (security, fetch sizes...); offsets are
            never committed, and partition-end events stay on.
        timeout: Seconds a metadata or offset request of the enumerator may take (> 0).
        format: The value format; only ``json``.

    Raises:
        ValueError: For an empty topic or bootstrap servers, an unknown format or starting
            offsets value, a negative starting offset, or a timeout <= 0.
    """

    bootstrap_servers: str
    topic: str
    schema: Any
    bounded: bool = False
    starting_offsets: str | Mapping[int, int] = EARLIEST
    properties: Mapping[str, str] = field(default_factory=dict)
    timeout: float = 30.0
    format: str = "json"

    def __post_init__(self) -> None:
        if not self.bootstrap_servers or not self.topic:
            raise ValueError("a Kafka source needs bootstrap servers and a topic")
        if self.format != "json":
            raise ValueError(f"Kafka value format must be 'json', got {self.format!r}")
        if isinstance(self.starting_offsets, str):
            if self.starting_offsets not in (EARLIEST, LATEST):
                raise ValueError(
                    f"starting_offsets must be 'earliest', 'latest' or a mapping partition -> "
                    f"offset, got {self.starting_offsets!r}"
                )
        else:
            offsets = {int(p): int(o) for p, o in self.starting_offsets.items()}
            if any(o < 0 for o in offsets.values()):
                raise ValueError(f"starting offsets must be >= 0, got {offsets}")
            object.__setattr__(self, "starting_offsets", offsets)
        if self.timeout <= 0:
            raise ValueError(f"timeout must be > 0 s, got {self.timeout}")
        object.__setattr__(self, "properties", dict(self.properties))

    @classmethod
    def json(
        cls,
        bootstrap_servers: str,
        topic: str,
        schema: Any,
        *,
        bounded: bool = False,
        starting_offsets: str | Mapping[int, int] = EARLIEST,
        properties: Mapping[str, str] | None = None,
    ) -> KafkaSource:
        """JSON values of ``schema`` (see the class for the arguments)."""
        return cls(
            bootstrap_servers,
            topic,
            schema,
            bounded=bounded,
            starting_offsets=starting_offsets,
            properties=properties or {},
        )

    @property
    def boundedness(self) -> Boundedness:
        return Boundedness.BOUNDED if self.bounded else Boundedness.CONTINUOUS_UNBOUNDED

    def describe(self) -> str:
        mode = "bounded" if self.bounded else "unbounded"
        return f"Kafka topic {self.topic} at {self.bootstrap_servers} ({self.format}, {mode})"

    def create_enumerator(self, event_time: str | None) -> KafkaSplitEnumerator:
        """The JobMaster's enumerator (event times are not known before reading)."""
        return KafkaSplitEnumerator(
            self.bootstrap_servers,
            self.topic,
            self.bounded,
            self.properties,
            self.timeout,
            start_at_latest=self.starting_offsets == LATEST,
        )

    def create_reader(self, context: SourceReaderContext) -> KafkaSourceReader:
        """A subtask's reader, with its own consumer."""
        starting = {} if isinstance(self.starting_offsets, str) else self.starting_offsets
        return KafkaSourceReader(
            self.bootstrap_servers, self.topic, self.schema, starting, self.properties, context
        )
