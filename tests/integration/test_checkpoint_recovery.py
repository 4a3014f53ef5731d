"""Checkpoints of the flight-delays job on the embedded cluster, and recovery from them.

A TaskManager is lost after a checkpoint completed: the job restores that checkpoint (sources
resume after the splits it had finished, window state and watermarks come back, staged sink
data that no checkpoint covered is dropped) and the committed output equals pandas on the same
files, row by row.
"""

from __future__ import annotations

import pytest

from millrace import Configuration, StreamExecutionEnvironment
from millrace.errors import JobSubmissionError
from millrace.runtime.dispatcher.dispatcher_gateway import DispatcherGateway
from millrace.runtime.job_result import JobResultSuccess
from millrace.runtime.minicluster import MiniCluster
from millrace.spark.spark_task_runtime import SparkTaskRuntime
from tests.faults import busy_task_executor, crash_task_executor
from tests.integration.helpers import (
    assert_same_result,
    build_flight_delays_held,
    expected_flight_delays,
    load_example,
    read_flights,
    read_output,
)
from tests.waiting import result_within, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.spark]

WAIT = 120.0
FLIGHTS = 336_776


def configuration(tmp_path, **extra: object) -> Configuration:
    return Configuration(
        {
            "parallelism.default": 2,
            "minicluster.number-of-taskmanagers": 3,
            "io.tmp.dirs": str(tmp_path / "tmp"),
            "execution.bundle.max-records": 30_000,  # one month per bundle
            "execution.checkpointing.interval": "200 ms",
            "state.checkpoints.num-retained": 2,
            "heartbeat.interval": "100 ms",
            "heartbeat.pause": "1 s",
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": 3,
            "restart-strategy.fixed-delay.delay": "100 ms",
            **extra,
        }
    )


@pytest.mark.parametrize("parallelism", [1, 2])  # 1: the window chained into the source
def test_task_manager_lost_after_a_checkpoint_restores_it_and_output_is_exact(
    spark, flights_dir, tmp_path, parallelism
) -> None:
    conf = configuration(tmp_path, **{"parallelism.default": parallelism})
    env = StreamExecutionEnvironment(conf, spark)
    gate = tmp_path / "december"
    build_flight_delays_held(env, flights_dir, tmp_path / "out", gate)
    graph = env.get_job_graph("flight-delays-checkpointed")
    assert len(graph.vertices) == (1 if parallelism == 1 else 2)
    with MiniCluster(conf, SparkTaskRuntime(conf, given=spark)) as cluster:
        assert cluster.dispatcher is not None
        dispatcher = cluster.dispatcher.get_self_gateway(DispatcherGateway)
        waiting = cluster.job_client.submit_job_wait(graph)

        def statistics():  # type: ignore[no-untyped-def]
            return dispatcher.request_checkpoint_statistics(graph.job_id).result(30)

        def progress() -> tuple[int, int]:
            try:
                splits = dispatcher.request_job_details(graph.job_id).result(30).splits_assigned
                return statistics().completed, splits
            except JobSubmissionError:  # not submitted yet
                return 0, 0

        wait_until(
            lambda: (progress()[0] >= 2 and progress()[1] >= 5) or waiting.done(),
            what="2 completed checkpoints and 5 splits assigned",
            seen=progress,
            timeout=WAIT,
        )
        assert not waiting.done(), "the job ended before the TaskManager was lost"
        before = statistics()
        crash_task_executor(busy_task_executor(cluster))
        gate.touch()  # December may go on
        result = result_within(waiting, WAIT, what="the job's result after the crash")

    assert isinstance(result, JobResultSuccess), result
    assert result.details.restarts >= 1
    assert before.completed >= 2 and before.retained
    source = result.details.vertices[0]
    # the restored sources read only what the checkpoint had not finished
    assert source.metrics.records_in < FLIGHTS
    assert_same_result(
        read_output(tmp_path / "out"), expected_flight_delays(read_flights(flights_dir))
    )
    assert not list((tmp_path / "out").glob(".pending/*"))


@pytest.mark.parametrize("parallelism", [1, 2])
def test_frequent_checkpoints_leave_the_output_unchanged(
    spark, flights_dir, tmp_path, parallelism
) -> None:
    conf = configuration(
        tmp_path,
        **{"execution.checkpointing.interval": "50 ms", "parallelism.default": parallelism},
    )
    env = StreamExecutionEnvironment(conf, spark)
    load_example("flight_delays").build(env, str(flights_dir), str(tmp_path / "out"))
    graph = env.get_job_graph("flight-delays-checkpointed")
    with MiniCluster(conf, SparkTaskRuntime(conf, given=spark)) as cluster:
        result = result_within(cluster.job_client.submit_job_wait(graph), WAIT, what="the job")
    assert isinstance(result, JobResultSuccess) and result.details.restarts == 0
    assert result.details.checkpoints >= 3
    assert_same_result(
        read_output(tmp_path / "out"), expected_flight_delays(read_flights(flights_dir))
    )
    assert not list((tmp_path / "tmp" / "checkpoints").glob("*/chk-*")), "kept after the end"
