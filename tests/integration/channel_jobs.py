"""A union of two Kafka topics into a sink, for the channel-protocol tests and
bench/backpressure.py: each topic's source vertex sends every bundle over a REBALANCE channel to
the one sink vertex (``ForwardStreamTask``), so every bundle crosses a flow-controlled channel.
``SlowParquetSink`` stages like ``ParquetSink`` after sleeping ``delay`` seconds per part: a
sink many times slower than its sources."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from millrace import KafkaSource, ParquetSink, StreamExecutionEnvironment
from millrace.api.connector.sink import SinkWrite
from millrace.runtime.jobgraph import JobGraph
from tests.integration.kafka_flights import (
    FLIGHTS_SCHEMA,
    FlightMessages,
    create_topic,
    produce_range,
)

__all__ = ["KEY", "SlowParquetSink", "exchange_usage", "output_rows", "union_job", "write_topics"]

KEY = ["year", "month", "day", "carrier", "flight", "sched_dep_time", "origin", "dest"]
"""Columns that identify a flight."""


@dataclass(frozen=True)
class SlowParquetSink(ParquetSink):
    """A ParquetSink that sleeps ``delay`` seconds before staging each part (task thread)."""

    delay: float = 1.0

    def write(
        self, table: Any, job_id: str, subtask: int, sequence: int, attempt_id: str
    ) -> SinkWrite:
        time.sleep(self.delay)
        return super().write(table, job_id, subtask, sequence, attempt_id)


def write_topics(bootstrap: str, topics: list[str], messages: FlightMessages, stop: int) -> None:
    """Flights ``[0, stop)`` dealt over ``topics`` in halves, each topic one partition."""
    bounds = [round(i * stop / len(topics)) for i in range(len(topics) + 1)]
    for topic, start, end in zip(topics, bounds, bounds[1:], strict=False):
        create_topic(bootstrap, topic, 1)
        produce_range(bootstrap, topic, messages, start, end, 1)


def union_job(
    env: StreamExecutionEnvironment, bootstrap: str, topics: list[str], sink: ParquetSink
) -> JobGraph:
    """Every topic's flights, projected to :data:`KEY` and ``dep_delay``, into ``sink``."""
    streams = [
        env.from_source(
            KafkaSource.json(bootstrap, topic, FLIGHTS_SCHEMA),
            event_time="time_hour",
            max_out_of_orderness="1 h",
        ).transform(lambda df: df.select(*KEY, "dep_delay"))
        for topic in topics
    ]
    streams[0].union(*streams[1:]).sink_to(sink)
    return env.get_job_graph("channel-union")


def output_rows(out: Path) -> pd.DataFrame:
    """The committed output, sorted by :data:`KEY`."""
    files = sorted(out.glob("part-*.parquet"))
    if not files:
        return pd.DataFrame(columns=[*KEY, "dep_delay"])
    frame = pd.concat([pq.read_table(f).to_pandas() for f in files], ignore_index=True)
    return frame.sort_values(KEY, ignore_index=True)


def exchange_usage(tmp_dir: Path) -> tuple[int, int]:
    """Files and bytes in the exchange store under ``io.tmp.dirs`` (``jobs/*/exchange``)."""
    files = [p for p in tmp_dir.glob("jobs/*/exchange/**/*.parquet") if p.is_file()]
    sizes = []
    for path in files:
        with contextlib.suppress(FileNotFoundError):  # consumed meanwhile
            sizes.append(path.stat().st_size)
    return len(sizes), sum(sizes)
