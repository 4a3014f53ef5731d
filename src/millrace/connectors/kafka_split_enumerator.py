"""KafkaSplitEnumerator: a topic's partitions as splits, assigned by partition number (Flink's
KafkaSourceEnumerator).

Partition ``p`` goes to source subtask ``p % parallelism``, so a partition stays with the same
subtask across restarts at the same parallelism, and a subtask receives its partitions one
request at a time, then None. A bounded source reads every partition up to the end offset found
at discovery (Flink's ``setBounded(OffsetsInitializer.latest())``), carried in
``InputSplit.end_position``; an unbounded one is asked again every
``source.discovery-interval`` and adds the partitions created since. With ``latest`` starting
offsets, the partitions found when the job starts begin at their end offsets then
(``InputSplit.start_position``), and partitions created later at their beginning (Flink's
``OffsetsInitializer.latest()``); a checkpoint's offsets take precedence.

End offsets are the high watermarks that the partition leaders' fetch responses report: the
enumerator asks for the latest offsets (ListOffsets), then fetches from them to the end of each
partition. With Kafka the two agree and the fetch returns no message; some Kafka-compatible
brokers answer ListOffsets with the base offset of the last record batch (Tansu 0.6), which
alone would cut the end of the partition off.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from millrace.connectors.kafka_partitions import (
    consumer_config,
    create_consumer,
    partition_of,
    partition_split,
)
from millrace.errors import PipelineError
from millrace.runtime.io.input_split import InputSplit, NextInputSplit
from millrace.runtime.io.partition_events import MAX_WATERMARK, MIN_WATERMARK

__all__ = ["KafkaSplitEnumerator"]


class KafkaSplitEnumerator:
    """Partition discovery and assignment for one Kafka source.

    Args:
        bootstrap_servers: ``host:port[,host:port...]``.
        topic: The topic read.
        bounded: Whether splits end at the end offsets found at discovery.
        properties: Consumer properties (security settings and the like).
        timeout: Seconds a metadata or offset request may take (> 0).
        start_at_latest: Whether the partitions of the first discovery start at their end
            offsets then.

    Threading:
        ``discover`` in the JobMaster's I/O executor (touches only ``_discovered``); the rest on
        its main thread.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        bounded: bool,
        properties: Mapping[str, str],
        timeout: float,
        start_at_latest: bool = False,
    ) -> None:
        self._bootstrap = bootstrap_servers
        self._start_at_latest = start_at_latest
        self._topic = topic
        self._bounded = bounded
        self._properties = dict(properties)
        self._timeout = timeout
        self._discovered: set[int] = set()
        self._unassigned: dict[int, InputSplit] = {}
        self._total = 0

    def discover(self) -> list[InputSplit]:
        """The partitions not discovered before (all of them on the first call); with their
        end offsets if the source is bounded, and on the first call with ``start_at_latest``
        starting at those end offsets. Blocking I/O.

        Raises:
            PipelineError: If the topic does not exist, the brokers do not answer within the
                timeout, or a consumer property is invalid (``__cause__`` holds the client's
                error, if any).
        """
        from confluent_kafka import KafkaException

        config = consumer_config(self._bootstrap, self._properties, f"millrace-{self._topic}")
        consumer = create_consumer(config, self._topic)
        try:
            partitions = [p for p in self._partitions(consumer) if p not in self._discovered]
            at_latest = self._start_at_latest and not self._discovered
            ends = self._end_offsets(consumer, partitions) if self._bounded or at_latest else {}
        except KafkaException as error:
            raise PipelineError(
                f"Kafka topic {self._topic!r} at {self._bootstrap}: {error.args[0]}"
            ) from error
        finally:
            consumer.close()
        self._discovered.update(partitions)
        return [
            partition_split(
                self._topic,
                p,
                ends.get(p) if self._bounded else None,
                ends.get(p) if at_latest else None,
            )
            for p in partitions
        ]

    def add_splits(self, splits: Sequence[InputSplit]) -> None:
        self.add_splits_back(splits)
        self._total += len(splits)

    def add_splits_back(self, splits: Sequence[InputSplit]) -> None:
        """Queue the partitions ``splits`` again (``SupportsSplitsBack``)."""
        for split in splits:
            self._unassigned[partition_of(split)] = split

    def next_split(self, subtask_index: int, parallelism: int) -> NextInputSplit:
        """The lowest unassigned partition ``p`` with ``p % parallelism == subtask_index``.

        The bound that comes with a split is MIN_WATERMARK: nothing is known of a partition's
        event times before it is read (its own records then move its watermark, per split).
        With None it is MAX_WATERMARK: partitions discovered later do not hold the watermark.
        """
        mine = [p for p in self._unassigned if p % parallelism == subtask_index]
        if not mine:
            return NextInputSplit(None, MAX_WATERMARK, self._total, self.splits_assigned)
        split = self._unassigned.pop(min(mine))
        return NextInputSplit(split, MIN_WATERMARK, self._total, self.splits_assigned)

    @property
    def splits_total(self) -> int:
        return self._total

    @property
    def splits_assigned(self) -> int:
        return self._total - len(self._unassigned)

    def _partitions(self, consumer: Any) -> list[int]:
        """The topic's partition numbers, sorted.

        Raises:
            PipelineError: If the topic does not exist.
            KafkaException: If the brokers do not answer.
        """
        metadata = consumer.list_topics(self._topic, timeout=self._timeout)
        topic = metadata.topics.get(self._topic)
        if topic is None or topic.error is not None or not topic.partitions:
            reason = topic.error.str() if topic is not None and topic.error else "no partitions"
            raise PipelineError(
                f"Kafka topic {self._topic!r} is not available at {self._bootstrap} ({reason}); "
                "create it before starting the job"
            )
        return sorted(topic.partitions)

    def _end_offsets(self, consumer: Any, partitions: list[int]) -> dict[int, int]:
        """Partition -> its high watermark now (see the module docstring).

        Raises:
            KafkaException: If the brokers do not answer.
        """
        from confluent_kafka import KafkaError, TopicPartition

        if not partitions:
            return {}
        listed = {
            p: consumer.get_watermark_offsets(
                TopicPartition(self._topic, p), timeout=self._timeout
            )[1]
            for p in partitions
        }
        consumer.assign([TopicPartition(self._topic, p, listed[p]) for p in partitions])
        ends: dict[int, int] = {}
        deadline = time.monotonic() + self._timeout
        while len(ends) < len(partitions) and (left := deadline - time.monotonic()) > 0:
            for message in consumer.consume(1000, timeout=min(left, 0.1)):
                error = message.error()
                if error is not None and error.code() == KafkaError._PARTITION_EOF:
                    ends[message.partition()] = message.offset()
        for p in partitions:  # end not reached in time (a busy partition): the last fetch's HW
            cached = consumer.get_watermark_offsets(TopicPartition(self._topic, p), cached=True)
            ends.setdefault(p, max(listed[p], cached[1]))
        consumer.unassign()
        return ends
