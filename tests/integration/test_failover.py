"""A TaskManager lost mid-job: heartbeats notice, the job restarts on the others, and the
committed output equals pandas on the same files, row by row (no loss, no duplicate)."""

from __future__ import annotations

import time

import pytest

from millrace import Configuration, StreamExecutionEnvironment
from millrace.runtime.client.job_client import NO_TIMEOUT
from millrace.runtime.job_result import JobResultSuccess
from millrace.runtime.minicluster import MiniCluster
from tests.integration.helpers import (
    assert_same_result,
    expected_flight_delays,
    load_example,
    read_flights,
    read_output,
)

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
    load_example("flight_delays").build(env, str(flights_dir), str(tmp_path / "out"))
    graph = env.get_job_graph("flight-delays-failover")
    with MiniCluster(conf, spark_session=spark) as cluster:
        waiting = cluster.job_client.submit_job_wait(graph)
        details = lambda: cluster.job_client.request_job_details(graph.job_id).result(30)  # noqa: E731
        deadline = time.monotonic() + WAIT
        while details().splits_assigned < 3:  # mid-job: some months read, most not
            assert time.monotonic() < deadline and not waiting.done()
            time.sleep(0.05)
        rm = cluster.resource_manager
        assert rm is not None
        infos = rm.call_async(rm.request_task_manager_infos).result(30)
        busy = next(i.resource_id for i in infos if i.slots_free < i.slots_total)
        victim = next(te for te in cluster.task_executors if te.resource_id == busy)
        killed_at = time.monotonic()
        victim.close_async().result(30)
        result = waiting.result(timeout=NO_TIMEOUT)
        print(f"killed {busy}; job ended {time.monotonic() - killed_at:.1f} s later")

    assert isinstance(result, JobResultSuccess), result
    assert result.details.restarts >= 1
    assert_same_result(
        read_output(tmp_path / "out"), expected_flight_delays(read_flights(flights_dir))
    )
