"""Session windows through a TaskManager crash: checkpoints hold each key's open sessions
(buffered records with their merged bounds, in key groups); the job restores the latest one
and the committed output equals the failure-free output (pandas on the same files), row for
row, with no session lost, split or written twice."""

from __future__ import annotations

import pandas as pd
import pytest

from millrace import Configuration, StreamExecutionEnvironment
from millrace.errors import JobSubmissionError
from millrace.runtime.dispatcher.dispatcher_gateway import DispatcherGateway
from millrace.runtime.job_result import JobResultSuccess
from millrace.runtime.minicluster import MiniCluster
from millrace.spark.spark_task_runtime import SparkTaskRuntime
from tests.faults import busy_task_executor, crash_task_executor
from tests.integration.helpers import load_example, read_flights
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
    sessions.build(env, str(flights_dir), str(tmp_path / "out"))
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
        result = result_within(waiting, WAIT, what="the job's result after the crash")

    assert isinstance(result, JobResultSuccess), result
    assert result.details.restarts >= 1
    expected = expected_sessions(read_flights(flights_dir), pd.Timedelta(sessions.GAP))
    assert_rows_equal(committed(tmp_path / "out"), expected, "tailnum")
