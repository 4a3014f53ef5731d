"""A TaskManager lost mid-job: heartbeats notice, the job restarts on the others, and the
committed output equals pandas on the same files, row by row (no loss, no duplicate)."""

from __future__ import annotations

import time

import pytest

from millrace import Configuration, StreamExecutionEnvironment
from millrace.runtime.job_result import JobResultSuccess
from millrace.runtime.minicluster import MiniCluster
from millrace.spark.spark_task_runtime import SparkTaskRuntime
from tests.faults import busy_task_executor, crash_task_executor
from tests.integration.helpers import (
    assert_same_result,
    build_flight_delays_held,
    expected_flight_delays,
    read_flights,
    read_output,
)
from tests.waiting import result_within, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.spark]

WAIT = 120.0


def test_task_manager_lost_mid_job_restarts_and_output_is_exact(
    spark, flights_dir, tmp_path
) -> None:
    conf = Configuration(
        {
            "parallelism.default": 2,
            "minicluster.number-of-taskmanagers": 3,
            "io.tmp.dirs": str(tmp_path / "tmp"),
            "execution.bundle.max-records": 30_000,  # one month per Spark job: a longer job
            "heartbeat.interval": "100 ms",
            "heartbeat.pause": "1 s",
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": 2,
            "restart-strategy.fixed-delay.delay": "100 ms",
        }
    )
    env = StreamExecutionEnvironment(conf, spark)
    gate = tmp_path / "december"
    build_flight_delays_held(env, flights_dir, tmp_path / "out", gate)
    graph = env.get_job_graph("flight-delays-failover")
    with MiniCluster(conf, SparkTaskRuntime(conf, given=spark)) as cluster:
        waiting = cluster.job_client.submit_job_wait(graph)
        details = lambda: cluster.job_client.request_job_details(graph.job_id).result(30)  # noqa: E731
        wait_until(  # mid-job: some months read, most not
            lambda: details().splits_assigned >= 3 or waiting.done(),
            what="3 splits assigned",
            seen=details,
        )
        assert not waiting.done(), "the job ended before the TaskManager was lost"
        victim = busy_task_executor(cluster)
        killed_at = time.monotonic()
        crash_task_executor(victim)
        gate.touch()  # December may go on
        result = result_within(waiting, WAIT, what="the job's result after the crash")
        print(f"crashed {victim.resource_id}; job ended {time.monotonic() - killed_at:.1f} s later")

    assert isinstance(result, JobResultSuccess), result
    assert result.details.restarts >= 1
    assert_same_result(
        read_output(tmp_path / "out"), expected_flight_delays(read_flights(flights_dir))
    )
