"""Two-input jobs through failures: a TaskManager lost after checkpoints (the joins' keyed state
of both inputs restored, sources of both inputs resumed), and a savepoint that carries a window
join over to a new run at another parallelism. The committed output equals the failure-free
answer (pandas) row for row: nothing lost, nothing twice.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from millrace import Configuration, FileSource, ParquetSink, StreamExecutionEnvironment
from millrace.errors import JobSubmissionError
from millrace.runtime.dispatcher.dispatcher_gateway import DispatcherGateway
from millrace.runtime.job_result import JobResult, JobResultFailure, JobResultSuccess
from millrace.runtime.minicluster import MiniCluster
from millrace.spark.spark_task_runtime import SparkTaskRuntime
from tests.faults import busy_task_executor, crash_task_executor
from tests.integration.test_two_input import (
    FLIGHT_COLUMNS,
    JOIN_ORDER,
    WEATHER_COLUMNS,
    assert_rows_equal,
    committed,
    expected_flights_weather,
    expected_interval_join,
    flights,
    flights_weather,
)
from tests.waiting import WAIT, result_within, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.spark]


def configuration(tmp_path: Path, **extra: object) -> Configuration:
    return Configuration(
        {
            "parallelism.default": 2,
            "minicluster.number-of-taskmanagers": 3,
            "io.tmp.dirs": str(tmp_path / "tmp"),
            "pipeline.side-output.dir": str(tmp_path / "side"),
            "execution.bundle.max-records": 10_000,
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


def run_with_a_crash(
    spark,
    conf: Configuration,
    env: StreamExecutionEnvironment,
    name: str,
    checkpoints: int,
    restarts: bool = True,
) -> JobResult:
    """Run the job of ``env``; crash a busy TaskManager once ``checkpoints`` checkpoints
    completed and 6 splits were assigned; with ``restarts`` the job must recover."""
    graph = env.get_job_graph(name)
    with MiniCluster(conf, SparkTaskRuntime(conf, given=spark)) as cluster:
        assert cluster.dispatcher is not None
        dispatcher = cluster.dispatcher.get_self_gateway(DispatcherGateway)
        waiting = cluster.job_client.submit_job_wait(graph)

        def progress() -> tuple[int, int]:
            try:
                completed = dispatcher.request_checkpoint_statistics(graph.job_id).result(30)
                details = dispatcher.request_job_details(graph.job_id).result(30)
                return completed.completed, details.splits_assigned
            except JobSubmissionError:  # not submitted yet
                return 0, 0

        wait_until(
            lambda: (progress()[0] >= checkpoints and progress()[1] >= 6) or waiting.done(),
            what=f"{checkpoints} completed checkpoints and 6 splits assigned",
            seen=progress,
            timeout=WAIT,
        )
        assert not waiting.done(), "the job ended before the TaskManager was lost"
        crash_task_executor(busy_task_executor(cluster))
        result = result_within(waiting, WAIT, what="the job's result after the crash")
    if restarts:
        assert isinstance(result, JobResultSuccess), result
        assert result.details.restarts >= 1
    return result


def test_window_join_after_a_lost_task_manager_equals_pandas(
    spark, flights_dir, weather_dir, tmp_path
) -> None:
    conf = configuration(tmp_path, **{"execution.bundle.max-records": 5_000})  # a longer job
    env = StreamExecutionEnvironment(conf, spark)
    flights_weather.build(env, str(flights_dir), str(weather_dir), str(tmp_path / "out"))
    run_with_a_crash(spark, conf, env, "flights-weather-crash", checkpoints=1)

    expected = expected_flights_weather(flights_dir, weather_dir)
    assert_rows_equal(committed(tmp_path / "out", JOIN_ORDER), expected, JOIN_ORDER)
    assert not list((tmp_path / "out").glob(".pending/*"))


def test_interval_join_after_a_lost_task_manager_equals_pandas(
    spark, flights_dir, weather_dir, tmp_path
) -> None:
    conf = configuration(tmp_path)
    env = StreamExecutionEnvironment(conf, spark)
    weather = env.from_source(
        FileSource.parquet(str(weather_dir)),
        event_time="time_hour",
        max_out_of_orderness="1 h",
        name="weather",
    ).transform(lambda df: df.select(*WEATHER_COLUMNS))
    (
        flights(env, flights_dir)
        .key_by("origin")
        .interval_join(weather.key_by("origin"))
        .between("-2 h", "30 min")
        .sink_to(ParquetSink(str(tmp_path / "out")))
    )
    run_with_a_crash(spark, conf, env, "interval-join-crash", checkpoints=1)

    order = ["time_hour", "carrier", "flight", "time_hour_right"]
    assert FLIGHT_COLUMNS[-1] == "time_hour"
    expected = expected_interval_join(flights_dir, weather_dir)
    assert_rows_equal(committed(tmp_path / "out", order), expected, order)


def test_a_failed_window_join_resumes_from_its_checkpoint_at_another_parallelism(
    spark, flights_dir, weather_dir, tmp_path
) -> None:
    """Without restarts the crash fails the job and its checkpoints are retained; a new run at
    parallelism 3 starts from the latest one (each subtask takes its key groups' rows of both
    inputs from the 2 subtasks' state files) and the output is complete, each row once."""
    out = tmp_path / "out"
    first = configuration(tmp_path, **{"restart-strategy.type": "none"})
    env = StreamExecutionEnvironment(first, spark)
    flights_weather.build(env, str(flights_dir), str(weather_dir), str(out))
    failed = run_with_a_crash(spark, first, env, "flights-weather", checkpoints=1, restarts=False)
    assert isinstance(failed, JobResultFailure), failed
    latest = max(
        (tmp_path / "tmp" / "checkpoints" / failed.job_id).glob("chk-*"),
        key=lambda p: int(p.name.removeprefix("chk-")),
    )

    second = configuration(
        tmp_path, **{"parallelism.default": 3, "execution.savepoint.path": str(latest)}
    )
    env = StreamExecutionEnvironment(second, spark)
    flights_weather.build(env, str(flights_dir), str(weather_dir), str(out))
    resumed = env.get_job_graph("flights-weather-resumed")
    with MiniCluster(second, SparkTaskRuntime(second, given=spark)) as cluster:
        result = result_within(cluster.job_client.submit_job_wait(resumed), WAIT, what="resumed")
    assert isinstance(result, JobResultSuccess), result
    assert [v.parallelism for v in result.details.vertices] == [3, 3, 3]

    expected = expected_flights_weather(flights_dir, weather_dir)
    assert_rows_equal(committed(out, JOIN_ORDER), expected, JOIN_ORDER)
