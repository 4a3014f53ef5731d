"""KafkaSourceReader against a real broker: bundles, positions, snapshots and resuming from
them, bounded ends, dead letters for malformed JSON, the consumer lag in its metric group."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from millrace import KafkaSource
from millrace.api.connector.source import SourceBundle, SourceReaderContext
from millrace.config import Configuration
from millrace.connectors.kafka_records import INTERNAL_COLUMNS
from millrace.connectors.kafka_source_reader import LAG_METRICS, KafkaSourceReader
from millrace.runtime.io.input_split import SplitState
from millrace.runtime.metrics.operator_metric_group import OperatorMetricGroup
from tests.integration.kafka_flights import create_topic, produce

pytestmark = [pytest.mark.slow, pytest.mark.spark]

SCHEMA = "id bigint, name string"
T0_MS = 1_700_000_000_000


def new_topic(bootstrap: str, counts: list[int]) -> str:
    """A topic whose partition ``p`` holds ``counts[p]`` messages ``{"id": ..., "name": ...}``,
    ids numbered across partitions, timestamps T0_MS + id."""
    topic = f"reader-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, len(counts))
    ids = list(range(sum(counts)))
    partitions = [p for p, n in enumerate(counts) for _ in range(n)]
    values = [json.dumps({"id": i, "name": f"n{i}"}).encode() for i in ids]
    produce(bootstrap, topic, values, partitions, timestamps_ms=[T0_MS + i for i in ids])
    return topic


def open_reader(
    spark: Any,
    source: KafkaSource,
    max_records: int,
    positions: list[SplitState] | None = None,
    metric_group: OperatorMetricGroup | None = None,
) -> KafkaSourceReader:
    """A reader of subtask 0 of 1, given every partition (at ``positions`` if given)."""
    group = metric_group or OperatorMetricGroup()
    context = SourceReaderContext(0, 1, max_records, 0.2, Configuration({}), spark, group)
    reader = source.create_reader(context)
    if positions is None:
        positions = [SplitState(s) for s in source.create_enumerator(None).discover()]
    for state in positions:
        reader.add_split(state.split, state.position)
    return reader


@pytest.fixture
def readers() -> Iterator[list[KafkaSourceReader]]:
    """Readers a test opens; closed in teardown."""
    opened: list[KafkaSourceReader] = []
    yield opened
    for reader in opened:
        reader.close()


def good_rows(bundle: SourceBundle) -> list[tuple]:
    frame = bundle.frame.where(bundle.malformed_reason.isNull()).drop(*INTERNAL_COLUMNS)
    return [tuple(row) for row in frame.collect()]


def next_bundle(reader: KafkaSourceReader, attempts: int = 20) -> SourceBundle:
    """The next bundle (the consumer's first fetch may take longer than one poll)."""
    for _ in range(attempts):
        bundle = reader.poll(0.5)
        if bundle is not None:
            return bundle
    raise AssertionError(f"no bundle in {attempts} polls")


def read_to_end(reader: KafkaSourceReader, limit: int = 50) -> list[SourceBundle]:
    bundles = []
    while not reader.is_finished():
        assert len(bundles) < limit, "the bounded reader does not finish"
        bundle = reader.poll(0.5)
        if bundle is not None:
            bundles.append(bundle)
    return bundles


def test_bounded_reader_reads_every_partition_to_its_end_in_bundles(
    spark, kafka_broker, readers
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = new_topic(bootstrap, [250, 0, 120])
    source = KafkaSource.json(bootstrap, topic, SCHEMA, bounded=True)
    readers.append(reader := open_reader(spark, source, max_records=100))

    bundles = read_to_end(reader)

    rows = [row for b in bundles for row in good_rows(b)]
    assert sorted(rows) == [(i, f"n{i}") for i in range(370)]
    assert all(b.frame.count() <= 100 for b in bundles)
    final = {s.split.split_id: s for b in bundles for s in b.progress}
    assert {k: (s.position, s.finished) for k, s in final.items()} == {
        f"{topic}/0": (250, True),
        f"{topic}/1": (0, True),
        f"{topic}/2": (120, True),
    }
    assert bundles[-1].available_at_ms is None or bundles[-1].available_at_ms >= T0_MS
    assert max(b.available_at_ms or 0 for b in bundles) == T0_MS + 369
    assert {b.split_column for b in bundles} == {"__kafka_split"}
    splits = {r[0] for b in bundles for r in b.frame.select("__kafka_split").distinct().collect()}
    assert splits == {f"{topic}/0", f"{topic}/2"}
    assert reader.snapshot() == []


def test_resuming_at_a_snapshot_reads_exactly_the_rest(spark, kafka_broker, readers) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = new_topic(bootstrap, [300, 200])
    source = KafkaSource.json(bootstrap, topic, SCHEMA, bounded=True)
    readers.append(first := open_reader(spark, source, max_records=120))

    before = []
    for _ in range(2):
        before += good_rows(next_bundle(first))
    snapshot = first.snapshot()
    first.close()

    assert 0 < sum(s.position for s in snapshot) == len(before) < 500
    assert not any(s.finished for s in snapshot)
    readers.append(second := open_reader(spark, source, max_records=120, positions=snapshot))
    after = [row for b in read_to_end(second) for row in good_rows(b)]

    assert sorted(before + after) == [(i, f"n{i}") for i in range(500)]
    assert len(before) + len(after) == 500


def test_malformed_values_become_dead_letters_with_a_reason(spark, kafka_broker, readers) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = f"malformed-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1)
    values = [
        b'{"id": 1, "name": "good"}',
        b"not json at all",
        b'{"id": "one", "name": "wrong type"}',
        None,
        b"",
        b"[1, 2]",
        b'{"id": 2}',
    ]
    produce(bootstrap, topic, values, [0] * len(values))
    source = KafkaSource.json(bootstrap, topic, SCHEMA, bounded=True)
    readers.append(reader := open_reader(spark, source, max_records=100))

    bundles = read_to_end(reader)

    assert len(bundles) == 1
    bundle = bundles[0]
    assert good_rows(bundle) == [(1, "good"), (2, None)]
    dead = bundle.frame.where(bundle.malformed_reason.isNotNull()).select(
        bundle.malformed_reason.alias("reason"), bundle.raw_record.alias("raw")
    )
    by_raw = {r.raw: r.reason for r in dead.collect()}
    assert by_raw["not json at all"] == "value is not valid JSON"
    assert "does not fit the schema" in by_raw['{"id": "one", "name": "wrong type"}']
    assert "does not fit the schema" in by_raw["[1, 2]"]
    assert by_raw[""] == "message value is empty"
    assert by_raw[None] == "message has no value (null)"
    assert bundle.progress == [SplitState(bundle.progress[0].split, 7, True)]
    partly = bundle.frame.where(bundle.raw_record.contains("wrong type")).select("name")
    assert partly.collect()[0].name is None  # nothing of a malformed value is kept


def test_unbounded_reader_returns_nothing_until_messages_arrive(
    spark, kafka_broker, readers
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = new_topic(bootstrap, [0, 0])
    source = KafkaSource.json(bootstrap, topic, SCHEMA)
    readers.append(reader := open_reader(spark, source, max_records=1000))

    started = time.monotonic()
    assert reader.poll(0.3) is None
    assert time.monotonic() - started >= 0.3
    produce(bootstrap, topic, [b'{"id": 7, "name": "late"}'] * 3, [1, 1, 1])
    bundle = next_bundle(reader)

    assert good_rows(bundle) == [(7, "late")] * 3
    assert [(s.split.split_id, s.position, s.finished) for s in bundle.progress] == [
        (f"{topic}/1", 3, False)
    ]
    assert not reader.is_finished()
    assert sorted((s.split.split_id, s.position) for s in reader.snapshot()) == [
        (f"{topic}/0", 0),
        (f"{topic}/1", 3),
    ]


def test_bounded_read_stops_at_the_end_offsets_found_at_discovery(
    spark, kafka_broker, readers
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = new_topic(bootstrap, [40])
    source = KafkaSource.json(bootstrap, topic, SCHEMA, bounded=True)
    splits = source.create_enumerator(None).discover()
    produce(bootstrap, topic, [b'{"id": -1, "name": "after the start"}'] * 25, [0] * 25)
    readers.append(reader := open_reader(spark, source, 1000, [SplitState(s) for s in splits]))

    rows = [row for b in read_to_end(reader) for row in good_rows(b)]

    assert sorted(rows) == [(i, f"n{i}") for i in range(40)]


def test_starting_offsets_apply_to_partitions_never_read(spark, kafka_broker, readers) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = new_topic(bootstrap, [10, 10])
    source = KafkaSource.json(bootstrap, topic, SCHEMA, bounded=True, starting_offsets={0: 6})
    readers.append(reader := open_reader(spark, source, max_records=1000))

    rows = [row for b in read_to_end(reader) for row in good_rows(b)]

    assert sorted(r[0] for r in rows) == [6, 7, 8, 9, *range(10, 20)]


def test_the_consumer_lag_shows_the_records_waiting_and_zero_when_caught_up(
    spark, kafka_broker, readers
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = new_topic(bootstrap, [300, 100])
    source = KafkaSource.json(bootstrap, topic, SCHEMA)
    group = OperatorMetricGroup()
    readers.append(reader := open_reader(spark, source, max_records=10, metric_group=group))
    assert group.values() == ()  # no fetch response yet: absent, not 0

    for _ in range(20):  # known once a fetch response of each partition came
        next_bundle(reader)
        if group.values():
            break
    else:
        raise AssertionError("no consumer lag after 20 bundles")

    position = {s.split.split_id: s.position for s in reader.snapshot()}
    waiting = max(300 - position[f"{topic}/0"], 100 - position[f"{topic}/1"])
    assert waiting > 0, position  # at most 200 of the 400 records read
    assert dict(group.values()) == dict.fromkeys(LAG_METRICS, float(waiting)), position
    for _ in range(100):  # catch up: the rest in bundles of at most 10
        reader.poll(0.5)
        if {s.position for s in reader.snapshot()} == {300, 100}:
            break
    else:
        raise AssertionError(f"the reader did not catch up in 100 polls: {reader.snapshot()}")
    assert dict(group.values()) == dict.fromkeys(LAG_METRICS, 0.0)
