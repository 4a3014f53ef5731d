"""KafkaSourceReader: reads a source subtask's partitions with one consumer, in bundles.

Every partition the JobMaster assigns is read at once (Flink's KafkaSourceReader): the consumer
is assigned it at its position — the checkpointed offset, or the starting offsets for a split
never read — and ``poll`` turns the next messages of all of them into one bundle. A bundle
closes at ``execution.bundle.max-records`` messages, or for an unbounded source after the
``poll`` timeout (``execution.bundle.max-delay``); a bounded source keeps filling it while
messages come, and stops at the end offsets (messages past them are dropped, and a finished
partition is unassigned). Positions move with the bundles returned, so ``snapshot`` is exactly
what a checkpoint taken between two bundles must resume from.

After each fetch the reader sets the consumer lag in its metric group (Flink's
``KafkaSourceReader.KafkaConsumer.records-lag-max``, and FlinkKafkaConsumer's legacy
``KafkaConsumer.records-lag-max``): the largest, over the partitions the consumer reads, of the
high watermark minus the reader's next offset. The high watermarks are the ones the last fetch
responses carried, cached by librdkafka (``get_watermark_offsets(cached=True)``: no request);
while one of them is not known (before the first fetch response) the gauges are absent.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from millrace.api.connector.source import SourceBundle, SourceReaderContext
from millrace.connectors.kafka_partitions import consumer_config, create_consumer, partition_of
from millrace.connectors.kafka_records import (
    INTERNAL_COLUMNS,
    OFFSET,
    PARTITION,
    SPLIT,
    TIMESTAMP,
    json_schema,
    message_table,
    parse_json_records,
)
from millrace.errors import PipelineError
from millrace.runtime.io.input_split import InputSplit, SplitState

__all__ = ["KafkaSourceReader"]

logger = logging.getLogger(__name__)

OFFSET_BEGINNING = -2  # librdkafka's logical offset: the partition's first available message
LAG_METRICS = ("KafkaSourceReader.KafkaConsumer.records-lag-max", "KafkaConsumer.records-lag-max")


@dataclass
class _Partition:
    """Read state of one assigned partition.

    Attributes:
        split: Its split.
        position: The offset of the next message to read (0: the starting offsets).
        assigned: Whether the consumer reads it.
        closed: Whether a bundle reported it finished (it is out of snapshots then).
    """

    split: InputSplit
    position: int
    assigned: bool = False
    closed: bool = False

    @property
    def end(self) -> int | None:
        return self.split.end_position

    @property
    def finished(self) -> bool:
        return self.end is not None and self.position >= self.end


class KafkaSourceReader:
    """A SourceReader of Kafka partitions, with one ``confluent_kafka.Consumer``.

    Args:
        bootstrap_servers: ``host:port[,host:port...]``.
        topic: The topic read.
        schema: The values' schema (DDL string or StructType).
        starting_offsets: Partition -> offset to start a split never read at; partitions not
            in it start at their first available message (earliest).
        properties: Consumer properties.
        context: The task's reader context.

    Raises:
        PipelineError: If the schema uses a reserved field name (``__kafka_...``), or a
            consumer property is invalid.

    Threading:
        The source task's thread only.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        schema: Any,
        starting_offsets: Mapping[int, int],
        properties: Mapping[str, str],
        context: SourceReaderContext,
    ) -> None:
        self._topic = topic
        self._spark = context.spark
        self._max_records = context.max_records
        self._schema = json_schema(schema)
        self._starting_offsets = dict(starting_offsets)
        self._partitions: dict[int, _Partition] = {}
        self._fatal: Any = None
        self._closed = False
        self._metric_group = context.metric_group
        client_id = f"millrace-{topic}-{context.subtask_index}"
        config = consumer_config(bootstrap_servers, properties, client_id)
        config["error_cb"] = self._on_error
        self._consumer = create_consumer(config, topic)

    def add_split(self, split: InputSplit, position: int) -> None:
        """Start reading ``split`` at offset ``position`` (0: at the starting offsets)."""
        from confluent_kafka import TopicPartition

        partition = partition_of(split)
        offset = position or self._starting_offsets.get(partition, OFFSET_BEGINNING)
        state = _Partition(split, max(offset, 0))
        self._partitions[partition] = state
        if state.finished:  # nothing to read (e.g. an empty partition): reported by poll
            return
        self._consumer.incremental_assign([TopicPartition(self._topic, partition, offset)])
        state.assigned = True
        logger.info("reading %s from offset %d", split.path, offset)

    def wants_splits(self) -> bool:
        """Always: all of this subtask's partitions are read at once."""
        return True

    def poll(self, timeout: float) -> SourceBundle | None:
        """The next messages of the assigned partitions as one bundle.

        Args:
            timeout: Unbounded: the longest time to fill a bundle; bounded: the longest wait
                for the next message (seconds, > 0).

        Returns:
            The bundle (its progress: the partitions it read from or finished); None if no
            message came within ``timeout`` (partitions found at their end meanwhile are
            reported with the next records, or when all are at their end).

        Raises:
            PipelineError: On a fatal or non-retriable consumer error (``__cause__`` holds it).
        """
        if self.is_finished():
            time.sleep(timeout)
            return None
        messages, ends = self._consume(timeout)
        table = self._advance(message_table(messages))
        self._move_to_ends(ends)
        lag = self._records_lag_max()
        for name in LAG_METRICS:
            self._metric_group.set_gauge(name, lag)
        read = set(table.column(PARTITION).unique().to_pylist())
        changed = [
            p for n, p in self._partitions.items() if not p.closed and (p.finished or n in read)
        ]
        if not read and self._open():  # only ends: report them with records, or at the end
            return None
        if not changed:
            return None
        self._unassign_finished()
        for state in changed:
            state.closed = state.finished
        records = parse_json_records(self._spark, table, self._schema, self._topic)
        newest = _newest_ms(table.column(TIMESTAMP))
        return SourceBundle(
            records.frame,
            [SplitState(p.split, p.position, p.finished) for p in changed],
            split_column=SPLIT,
            malformed_reason=records.malformed_reason,
            raw_record=records.raw_record,
            available_at_ms=newest,
            internal_columns=INTERNAL_COLUMNS,
        )

    def snapshot(self) -> list[SplitState]:
        """Every partition not yet reported finished, at the offset after the last bundle."""
        return [SplitState(p.split, p.position) for p in self._partitions.values() if not p.closed]

    def is_finished(self) -> bool:
        """True when every assigned partition reached its end and a bundle reported it."""
        return all(p.closed for p in self._partitions.values())

    def close(self) -> None:
        """Close the consumer (it leaves no group: it joined none). Idempotent."""
        if not self._closed:
            self._closed = True
            self._consumer.close()

    # Consuming ---------------------------------------------------------------------------------

    def _consume(self, timeout: float) -> tuple[list[Any], dict[int, int]]:
        """Up to ``max_records`` messages, and the partition ends met (partition -> offset).

        Unbounded: until ``timeout`` has passed. Bounded: while messages come within
        ``timeout`` of each other, until every partition is at its end.
        """
        from confluent_kafka import Message

        open_ = self._open()
        bounded = any(p.end is not None for p in open_)
        # events (messages, partition ends) still to come before every bounded partition is
        # at its end: an upper bound (compaction and transaction markers leave gaps)
        budget = sum(p.end - p.position + 1 for p in open_ if p.end is not None)
        deadline = time.monotonic() + timeout
        messages: list[Any] = []
        ends: dict[int, int] = {}
        while (want := self._max_records - len(messages)) > 0:
            if bounded:
                want, wait = min(want, budget), timeout
            else:
                wait = deadline - time.monotonic()
            if want <= 0 or wait <= 0:
                break
            batch = self._consumer.consume(want, timeout=wait)
            self._raise_fatal()
            budget -= len(batch)
            if any(map(Message.error, batch)):
                batch = self._split_events(batch, ends)
            messages += batch
            if bounded and (not batch or len(ends) == len(open_)):
                break
        return messages, ends

    def _open(self) -> list[_Partition]:
        """The partitions not at their end."""
        return [p for p in self._partitions.values() if not p.finished]

    def _split_events(self, batch: list[Any], ends: dict[int, int]) -> list[Any]:
        """The messages of ``batch``; partition ends go into ``ends``.

        Raises:
            PipelineError: For a fatal or non-retriable error; retriable ones are logged.
        """
        from confluent_kafka import KafkaError, KafkaException

        messages = []
        for message in batch:
            error = message.error()
            if error is None:
                messages.append(message)
            elif error.code() == KafkaError._PARTITION_EOF:
                ends[message.partition()] = message.offset()
            elif error.fatal() or not error.retriable():
                raise PipelineError(
                    f"reading Kafka topic {self._topic!r}: {error.str()}"
                ) from KafkaException(error)
            else:
                logger.warning("reading Kafka topic %r: %s", self._topic, error.str())
        return messages

    def _move_to_ends(self, ends: dict[int, int]) -> None:
        """A partition end moves the position there (past gaps and transaction markers)."""
        for partition, offset in ends.items():
            state = self._partitions.get(partition)
            if state is not None and not state.finished:
                at = offset if state.end is None else min(offset, state.end)
                state.position = max(state.position, at)

    def _advance(self, table: Any) -> Any:
        """Move each partition's position past its messages in ``table``; return the table
        without the messages past a bounded partition's end or of a partition read no more."""
        import pyarrow.compute as pc

        if table.num_rows == 0:
            return table
        last = table.group_by(PARTITION).aggregate([(OFFSET, "max")])
        partitions, offsets = table.column(PARTITION), table.column(OFFSET)
        drop = None
        for partition, offset in zip(
            last.column(PARTITION).to_pylist(),
            last.column(f"{OFFSET}_max").to_pylist(),
            strict=True,
        ):
            state = self._partitions.get(partition)
            mask = None
            if state is None or state.finished:
                mask = pc.equal(partitions, partition)
            elif state.end is not None and offset >= state.end:
                mask = pc.and_(
                    pc.equal(partitions, partition), pc.greater_equal(offsets, state.end)
                )
                state.position = state.end
            else:
                state.position = offset + 1
            if mask is not None:
                drop = mask if drop is None else pc.or_(drop, mask)
        return table if drop is None else table.filter(pc.invert(drop))

    def _records_lag_max(self) -> int | None:
        """Largest high watermark - next offset of the partitions the consumer reads, from the
        high watermarks of the last fetch responses (cached: no request); None if one is not
        known yet, or if it reads none (a bounded partition at its end counts no more)."""
        from confluent_kafka import KafkaException, TopicPartition

        lags = []
        for n, state in self._partitions.items():
            if not state.assigned or state.finished:
                continue
            try:
                _, high = self._consumer.get_watermark_offsets(
                    TopicPartition(self._topic, n), cached=True
                )
            except KafkaException:  # not known to the client (yet)
                return None
            if high < 0:  # OFFSET_INVALID: no fetch response yet
                return None
            lags.append(max(0, high - state.position))
        return max(lags, default=None)

    def _unassign_finished(self) -> None:
        from confluent_kafka import TopicPartition

        done = [n for n, p in self._partitions.items() if p.finished and p.assigned]
        if done:
            self._consumer.incremental_unassign([TopicPartition(self._topic, n) for n in done])
            for n in done:
                self._partitions[n].assigned = False

    def _on_error(self, error: Any) -> None:
        """librdkafka's error callback (called in ``consume``): a fatal error fails the poll."""
        if error.fatal():
            self._fatal = error
        else:
            logger.warning("Kafka consumer of %r: %s", self._topic, error.str())

    def _raise_fatal(self) -> None:
        if self._fatal is not None:
            from confluent_kafka import KafkaException

            raise PipelineError(
                f"reading Kafka topic {self._topic!r}: {self._fatal.str()}"
            ) from KafkaException(self._fatal)


def _newest_ms(timestamps: Any) -> int | None:
    """Largest of a ``timestamp[ms]`` array as epoch ms, None if it has no value."""
    import pyarrow.compute as pc

    return pc.max(timestamps).value if len(timestamps) else None
