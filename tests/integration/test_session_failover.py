"""Session windows through a TaskManager crash and a savepoint: checkpoints hold each key's
open sessions (buffered records with their merged bounds, in key groups); the job restores the
latest one (or a new job at another parallelism the savepoint) and the committed output equals
the failure-free output (pandas on the same files), row for row, with no session lost, split
or written twice."""

from __future__ import annotations

import pandas as pd
import pyarrow.parquet as pq
import pytest

from millrace import (
    Configuration,
    DirectorySource,
    FileSource,
    ParquetSink,
    StreamExecutionEnvironment,
)
from millrace.errors import JobSubmissionError
from millrace.runtime.dispatcher.dispatcher_gateway import DispatcherGateway
from millrace.runtime.job_result import JobResultSuccess
from millrace.runtime.minicluster import MiniCluster
from millrace.spark.spark_task_runtime import SparkTaskRuntime
from tests.faults import busy_task_executor, crash_task_executor
from tests.integration.helpers import held_at_december, load_example, read_flights
from tests.integration.streams import arrive, stream_settings
from tests.integration.test_sliding_and_session_windows import committed
from tests.integration.window_expectations import assert_rows_equal, expected_sessions
from tests.waiting import WAIT, result_within, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.spark]


def test_a_task_manager_lost_mid_job_leaves_the_sessions_exact(
    spark, flights_dir, tmp_path
) -> None:
    conf = Configuration(
        {
            "parallelism.default": 2,
            "minicluster.number-of-taskmanagers": 3,
            "io.tmp.dirs": str(tmp_path / "tmp"),
            "execution.bundle.max-records": 10_000,  # three bundles a month: a longer job
            "execution.checkpointing.interval": "200 ms",
            "state.compaction.max-files": 2,
            "heartbeat.interval": "100 ms",
            "heartbeat.pause": "1 s",
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": 3,
            "restart-strategy.fixed-delay.delay": "100 ms",
        }
    )
    env = StreamExecutionEnvironment(conf, spark)
    sessions = load_example("sessions")
    gate = tmp_path / "december"
    flights = env.from_source(
        FileSource.parquet(str(flights_dir)), event_time="time_hour", max_out_of_orderness="1 h"
    ).transform(held_at_december(gate), name="held at december")
    sessions.sessions_of(flights).sink_to(ParquetSink(str(tmp_path / "out")))
    graph = env.get_job_graph("sessions-failover")
    with MiniCluster(conf, SparkTaskRuntime(conf, given=spark)) as cluster:
        assert cluster.dispatcher is not None
        dispatcher = cluster.dispatcher.get_self_gateway(DispatcherGateway)
        waiting = cluster.job_client.submit_job_wait(graph)

        def progress() -> tuple[int, int]:
            try:
                splits = dispatcher.request_job_details(graph.job_id).result(30).splits_assigned
                completed = dispatcher.request_checkpoint_statistics(graph.job_id).result(30)
                return completed.completed, splits
            except JobSubmissionError:  # not submitted yet
                return 0, 0

        wait_until(
            lambda: (progress()[0] >= 2 and progress()[1] >= 3) or waiting.done(),
            what="2 completed checkpoints and 3 splits assigned",
            seen=progress,
        )
        assert not waiting.done(), "the job ended before the TaskManager was lost"
        crash_task_executor(busy_task_executor(cluster))
        gate.touch()  # December may go on: the restored job runs to its end
        result = result_within(waiting, WAIT, what="the job's result after the crash")

    assert isinstance(result, JobResultSuccess), result
    assert result.details.restarts >= 1
    expected = expected_sessions(read_flights(flights_dir), pd.Timedelta(sessions.GAP))
    assert_rows_equal(committed(tmp_path / "out"), expected, "tailnum")


def test_open_sessions_resume_from_a_savepoint_at_another_parallelism(
    spark, flights_dir, tmp_path
) -> None:
    """Months 1 and 2 arrive in a directory, a savepoint stops the job with the planes' open
    sessions in its state (buffered flights with their key groups); a new job at parallelism
    3 resumes from it and month 3 arrives: every session that must have fired by then is
    committed exactly once with exactly its flights, those spanning the savepoint included."""
    sessions = load_example("sessions")
    inbox, out = tmp_path / "inbox", tmp_path / "out"
    inbox.mkdir()

    def build(conf: Configuration) -> StreamExecutionEnvironment:
        env = StreamExecutionEnvironment(conf, spark)
        flights = env.from_source(
            DirectorySource.parquet(str(inbox)), event_time="time_hour", max_out_of_orderness="1 h"
        )
        sessions.sessions_of(flights).sink_to(ParquetSink(str(out)))
        return env

    flights = read_flights(flights_dir)
    gap = pd.Timedelta(sessions.GAP)

    def fired_through(month: int) -> pd.DataFrame:
        seen = flights[flights["month"] <= month]
        expected = expected_sessions(seen, gap)
        return expected[expected["window_end"] <= seen["time_hour"].max() - pd.Timedelta("1 h")]

    def wait_for_rows(rows: int) -> None:
        def count() -> int:
            return sum(pq.read_metadata(f).num_rows for f in out.glob("part-*.parquet"))

        wait_until(lambda: count() >= rows, what=f"{rows} sessions committed", seen=count)

    first = Configuration(stream_settings(tmp_path))
    graph = build(first).get_job_graph("sessions-inbox")
    with MiniCluster(first, SparkTaskRuntime(first, given=spark)) as cluster:
        assert cluster.dispatcher is not None
        dispatcher = cluster.dispatcher.get_self_gateway(DispatcherGateway)
        cluster.job_client.submit_job_detached(graph).result(60)
        for month in (1, 2):
            arrive(flights_dir, inbox, month)
        wait_for_rows(len(fired_through(2)))
        savepoint = dispatcher.trigger_savepoint(graph.job_id, None, True).result(120)

    second = Configuration(
        stream_settings(
            tmp_path, **{"parallelism.default": 3, "execution.savepoint.path": savepoint}
        )
    )
    resumed = build(second).get_job_graph("sessions-inbox-resumed")
    with MiniCluster(second, SparkTaskRuntime(second, given=spark)) as cluster:
        assert cluster.dispatcher is not None
        dispatcher = cluster.dispatcher.get_self_gateway(DispatcherGateway)
        cluster.job_client.submit_job_detached(resumed).result(60)
        arrive(flights_dir, inbox, 3)
        wait_for_rows(len(fired_through(3)))
        statistics = dispatcher.request_checkpoint_statistics(resumed.job_id).result(30)
        details = dispatcher.request_job_details(resumed.job_id).result(30)
        dispatcher.cancel_job(resumed.job_id).result(30)

    assert statistics.restored_from  # it restored the savepoint
    assert [v.parallelism for v in details.vertices] == [3, 3]
    assert_rows_equal(committed(out), fired_through(3), "tailnum")
