"""An unbounded job over a directory that files keep arriving in: windows fire as event time
advances, output becomes visible checkpoint by checkpoint, and a lost TaskManager costs nothing.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from millrace import (
    Configuration,
    DirectorySource,
    ParquetSink,
    StreamExecutionEnvironment,
    tumbling,
)
from millrace.runtime.dispatcher.dispatcher_gateway import DispatcherGateway
from millrace.runtime.executiongraph import JobStatus
from millrace.runtime.minicluster import MiniCluster
from tests.integration.helpers import expected_flight_delays, read_flights

pytestmark = [pytest.mark.slow, pytest.mark.spark]

WAIT = 180.0


def committed(out: Path) -> pd.DataFrame:
    files = sorted(out.glob("part-*.parquet"))
    if not files:
        return pd.DataFrame(columns=["carrier", "window_start"])
    frame = pd.concat([pq.read_table(f).to_pandas() for f in files], ignore_index=True)
    return frame.sort_values(["carrier", "window_start"], ignore_index=True)


def arrive(flights_dir: Path, inbox: Path, month: int) -> None:
    """A month's file appears in the directory at once (written aside, then renamed in)."""
    source = flights_dir / f"flights-2013-{month:02d}.parquet"
    hidden = inbox / f".incoming-{month:02d}.parquet"
    shutil.copy(source, hidden)
    hidden.rename(inbox / source.name)


def test_files_arriving_in_a_directory_stream_through_windows_exactly_once(
    spark, flights_dir, tmp_path
) -> None:
    inbox, out = tmp_path / "inbox", tmp_path / "out"
    inbox.mkdir()
    conf = Configuration(
        {
            "parallelism.default": 2,
            "minicluster.number-of-taskmanagers": 3,
            "io.tmp.dirs": str(tmp_path / "tmp"),
            "execution.checkpointing.interval": "300 ms",
            "source.discovery-interval": "200 ms",
            "execution.bundle.max-records": 10_000,  # several bundles per month file
            "heartbeat.interval": "100 ms",
            "heartbeat.pause": "1 s",
            "restart-strategy.fixed-delay.delay": "100 ms",
        }
    )
    env = StreamExecutionEnvironment(conf, spark)
    (
        env.from_source(DirectorySource.parquet(str(inbox)), event_time="time_hour",
                        max_out_of_orderness="1 h")
        .transform(lambda df: df.where(F.col("dep_delay").isNotNull()))
        .key_by("carrier")
        .window(tumbling("1 day"))
        .agg(F.count("*").alias("flights"), F.avg("dep_delay").alias("avg_dep_delay"))
        .sink_to(ParquetSink(str(out)))
    )  # fmt: skip
    graph = env.get_job_graph("inbox-delays")
    flights = read_flights(flights_dir)
    expected = expected_flight_delays(flights)

    def fired_through(month: int) -> pd.DataFrame:
        """Windows that must have fired once months 1..month arrived: those ending at least
        one hour (the out-of-orderness) before the last event."""
        last = flights[flights["month"] <= month]["time_hour"].max()
        return expected[expected["window_end"] <= last - pd.Timedelta(hours=1)]

    with MiniCluster(conf, spark_session=spark) as cluster:
        assert cluster.dispatcher is not None
        dispatcher = cluster.dispatcher.get_self_gateway(DispatcherGateway)
        cluster.job_client.submit_job_detached(graph).result(60)
        for month in (1, 2):
            arrive(flights_dir, inbox, month)
        wait_for_rows(out, len(fired_through(2)))

        rm = cluster.resource_manager
        assert rm is not None
        infos = rm.call_async(rm.request_task_manager_infos).result(30)
        busy = next(i.resource_id for i in infos if i.slots_free < i.slots_total)
        next(te for te in cluster.task_executors if te.resource_id == busy).close_async().result(30)
        arrive(flights_dir, inbox, 3)
        wait_for_rows(out, len(fired_through(3)))
        details = dispatcher.request_job_details(graph.job_id).result(30)
        assert details.status is JobStatus.RUNNING and details.restarts >= 1
        watermarks = dispatcher.request_watermarks(graph.job_id).result(30)
        dispatcher.cancel_job(graph.job_id).result(30)

    actual = committed(out)
    wanted = fired_through(3)
    assert len(actual) == len(wanted)  # no window twice, none missing
    merged = actual.merge(wanted, on=["carrier", "window_start"], suffixes=("", "_expected"))
    assert len(merged) == len(wanted)
    assert (merged["flights"] == merged["flights_expected"]).all()
    assert (merged["avg_dep_delay"] - merged["avg_dep_delay_expected"]).abs().max() <= 1e-9
    march = pd.Timestamp("2013-03-01", tz="UTC").value // 10**6
    assert watermarks.min_clock_ms >= march  # the global min clock followed the data


def wait_for_rows(out: Path, rows: int) -> None:
    deadline = time.monotonic() + WAIT
    while len(committed(out)) < rows:
        assert time.monotonic() < deadline, f"{len(committed(out))} of {rows} rows committed"
        time.sleep(0.2)
