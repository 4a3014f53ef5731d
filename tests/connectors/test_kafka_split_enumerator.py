"""KafkaSplitEnumerator: partitions as splits, end offsets of a bounded read, assignment of
partition p to subtask p % parallelism (Flink's KafkaSourceEnumerator)."""

from __future__ import annotations

import re
import uuid

import pytest

from millrace.connectors.kafka_partitions import partition_split
from millrace.connectors.kafka_split_enumerator import KafkaSplitEnumerator
from millrace.errors import PipelineError
from millrace.runtime.io.partition_events import MAX_WATERMARK, MIN_WATERMARK
from tests.integration.kafka_flights import create_topic, produce
from tests.kafka_broker import free_port


def enumerator(
    bootstrap: str, topic: str, bounded: bool, timeout: float = 30
) -> KafkaSplitEnumerator:
    return KafkaSplitEnumerator(bootstrap, topic, bounded, {}, timeout)


def topic_with(bootstrap: str, counts: list[int]) -> str:
    """A new topic with ``counts[p]`` messages in partition ``p``, produced in batches."""
    topic = f"enum-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, len(counts))
    partitions = [p for p, n in enumerate(counts) for _ in range(n)]
    produce(bootstrap, topic, [b"{}"] * len(partitions), partitions)
    return topic


def test_partition_p_goes_to_subtask_p_mod_parallelism_one_at_a_time() -> None:
    assigner = enumerator("unused:1", "t", bounded=False)
    assigner.add_splits([partition_split("t", p) for p in range(6)])

    replies = [assigner.next_split(1, 2) for _ in range(4)]

    assert [r.split.path if r.split else None for r in replies] == ["t/1", "t/3", "t/5", None]
    assert [r.watermark_bound_ms for r in replies] == [MIN_WATERMARK] * 3 + [MAX_WATERMARK]
    assert [r.splits_assigned for r in replies] == [1, 2, 3, 3]
    assert assigner.next_split(0, 2).split.path == "t/0"
    assert (assigner.splits_total, assigner.splits_assigned) == (6, 4)


def test_subtask_without_partitions_gets_none_with_the_final_bound() -> None:
    assigner = enumerator("unused:1", "t", bounded=True)
    assigner.add_splits([partition_split("t", 0, 10)])
    reply = assigner.next_split(3, 4)
    assert reply.split is None and reply.watermark_bound_ms == MAX_WATERMARK


@pytest.mark.slow
def test_bounded_discovery_finds_partitions_and_their_end_offsets(kafka_broker) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    counts = [1200, 0, 35, 7]
    topic = topic_with(bootstrap, counts)

    assigner = enumerator(bootstrap, topic, bounded=True)
    splits = assigner.discover()

    assert [s.path for s in splits] == [f"{topic}/{p}" for p in range(4)]
    assert [s.split_id for s in splits] == [f"{topic}/{p}" for p in range(4)]
    assert [s.split_number for s in splits] == [0, 1, 2, 3]
    assert [s.end_position for s in splits] == counts
    assert assigner.discover() == []  # nothing new


@pytest.mark.slow
def test_latest_starts_the_partitions_found_at_job_start_at_their_ends(kafka_broker) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    counts = [40, 0, 7]
    topic = topic_with(bootstrap, counts)
    for bounded in (False, True):
        assigner = KafkaSplitEnumerator(bootstrap, topic, bounded, {}, 30, start_at_latest=True)
        splits = assigner.discover()
        assert [s.start_position for s in splits] == counts
        assert [s.end_position for s in splits] == (counts if bounded else [None] * 3)


@pytest.mark.slow
def test_unbounded_discovery_has_no_end_offsets(kafka_broker) -> None:
    topic = topic_with(kafka_broker.bootstrap_servers, [3, 4])
    splits = enumerator(kafka_broker.bootstrap_servers, topic, bounded=False).discover()
    assert [(s.path, s.end_position) for s in splits] == [
        (f"{topic}/0", None),
        (f"{topic}/1", None),
    ]


@pytest.mark.slow
def test_discovered_splits_are_assigned_by_partition_number(kafka_broker) -> None:
    topic = topic_with(kafka_broker.bootstrap_servers, [1, 1, 1, 1, 1])
    assigner = enumerator(kafka_broker.bootstrap_servers, topic, bounded=True)
    assigner.add_splits(assigner.discover())

    def drain(subtask: int) -> list[int]:
        taken = []
        while (reply := assigner.next_split(subtask, 2)).split is not None:
            taken.append(reply.split.split_number)
        return taken

    assert drain(0) == [0, 2, 4]
    assert drain(1) == [1, 3]


@pytest.mark.slow
def test_missing_topic_fails_discovery_naming_it(kafka_broker) -> None:
    assigner = enumerator(kafka_broker.bootstrap_servers, "no-such-topic", bounded=True)
    with pytest.raises(PipelineError, match="no-such-topic"):
        assigner.discover()


def test_unreachable_brokers_fail_discovery_naming_them() -> None:
    bootstrap = f"127.0.0.1:{free_port()}"
    with pytest.raises(PipelineError, match=re.escape(bootstrap)):
        enumerator(bootstrap, "t", bounded=True, timeout=0.5).discover()


def test_invalid_consumer_property_fails_discovery_naming_it() -> None:
    assigner = KafkaSplitEnumerator("127.0.0.1:1", "t", True, {"no.such.property": "1"}, 1)
    with pytest.raises(PipelineError, match=re.escape("no.such.property")):
        assigner.discover()
