"""Region failover in BATCH mode: a TaskManager killed while the keyed stage runs (a window, a
window join) or while the source stage runs. Only the lost subtask runs again: a keyed one from
the blocking exchange files its producers left in the exchange store, a source one with the
splits it was handed back at its SplitEnumerator (Flink's addSplitsBack); the other subtasks
run once; the output equals pandas row for row. A keyed subtask lost after its sink staged its
output leaves those staged files behind: the final commit takes the final attempts' files only,
so not one row of the lost attempt is committed."""

from __future__ import annotations

import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from pyspark.sql import functions as F

from millrace import (
    Configuration,
    FileSource,
    ParquetSink,
    StreamExecutionEnvironment,
    tumbling,
)
from millrace.runtime.executiongraph import ExecutionState
from millrace.runtime.job_result import JobResultSuccess
from millrace.runtime.minicluster import MiniCluster
from millrace.runtime.sink.sink import SinkWrite
from millrace.runtime.taskexecutor.task_executor import TaskExecutor
from millrace.spark.spark_task_runtime import SparkTaskRuntime
from tests.faults import crash_task_executor
from tests.integration.helpers import (
    JOIN_ORDER,
    assert_rows_equal,
    assert_same_result,
    expected_flight_delays,
    expected_flights_weather,
    load_example,
    read_flights,
    read_output,
)
from tests.waiting import result_within, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.spark]

WAIT = 180.0
flight_delays = load_example("flight_delays")
flights_weather = load_example("flights_weather")


@dataclass(frozen=True)
class HoldingSink:
    """A sink chained after the ParquetSink that stages nothing: the first subtask attempt to
    write to it claims the hold (a marker file created exclusively), names itself in
    ``held-attempt`` and waits until the test creates ``released``. The ParquetSink before it
    in the chain has staged the attempt's output by then, so the test can lose the attempt's
    TaskManager with staged sink files left behind. Every later write passes straight through.
    """

    directory: str

    def describe(self) -> str:
        return f"hold at {self.directory}"

    def initialize_global(self, job_id: str) -> None:
        pass

    def write(
        self, table: Any, job_id: str, subtask: int, sequence: int, attempt_id: str
    ) -> SinkWrite:
        directory = Path(self.directory)
        try:
            os.close(os.open(directory / "claimed", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return SinkWrite(table.num_rows, None)
        (directory / "held-attempt.tmp").write_text(attempt_id)
        (directory / "held-attempt.tmp").rename(directory / "held-attempt")
        released = directory / "released"
        wait_until(released.exists, what="the test to release the held write", timeout=WAIT)
        return SinkWrite(table.num_rows, None)

    def pre_commit(self, job_id: str, checkpoint_id: int, pending: Any) -> None:
        pass

    def commit(self, job_id: str, commit_id: int, pending: Any) -> None:
        pass

    def pending(self, job_id: str, attempt_ids: Any) -> list[str]:
        return []

    def abort(self, job_id: str, keep: Any = ()) -> None:
        pass


def pausing(frame):
    """The join's output unchanged, after a pause of 3 s per Spark partition (``mapInArrow``):
    a keyed stage that runs for seconds, long enough to lose its TaskManager in the middle,
    whatever the number of rows."""

    def pause(batches):
        import time as _time

        _time.sleep(3.0)
        yield from batches

    return frame.mapInArrow(pause, frame.schema)


def running_task_executor(cluster: MiniCluster, prefix: str) -> TaskExecutor | None:
    """A TaskExecutor running a subtask whose name starts with ``prefix`` now, if any."""
    for te in cluster.task_executors:
        for task in list(te._tasks.values()):
            running = task.state is ExecutionState.RUNNING
            if task.tdd.task_name.startswith(prefix) and running:
                return te
    return None


def run_losing_a_task_manager(
    spark, conf: Configuration, env: StreamExecutionEnvironment, prefix: str, caplog
) -> tuple[JobResultSuccess, list[str]]:
    """Run ``env``'s job on a MiniCluster and kill -9 the TaskManager of the first subtask
    named ``prefix...`` seen running, half a second into it; returns the job's (successful)
    result and the messages it logged."""
    graph = env.get_job_graph("batch-region-failover")
    with (
        caplog.at_level(logging.INFO, logger="millrace"),
        MiniCluster(conf, SparkTaskRuntime(conf, given=spark)) as cluster,
    ):
        waiting = cluster.job_client.submit_job_wait(graph)
        victim = None

        def keyed_stage_running() -> bool:
            nonlocal victim
            victim = running_task_executor(cluster, prefix)
            return victim is not None or waiting.done()

        wait_until(keyed_stage_running, what=f"a {prefix} subtask running", timeout=WAIT)
        assert victim is not None and not waiting.done(), "the job ended before the crash"
        time.sleep(0.5)  # fault injection: the crash lands inside its Spark job
        crash_task_executor(victim)
        result = result_within(waiting, WAIT, what="the job's result after the crash")
    assert isinstance(result, JobResultSuccess), result
    return result, [r.getMessage() for r in caplog.records]


def departed_flights(env: StreamExecutionEnvironment, flights_dir: Path) -> Any:
    """The flights with a departure delay (``examples/flight_delays.py``'s source chain)."""
    return env.from_source(
        FileSource.parquet(str(flights_dir)),
        event_time="time_hour",
        max_out_of_orderness="1 h",
        name="flights",
    ).transform(flight_delays.departed, name="departed")


def daily_delays(flights: Any) -> Any:
    """Flights and mean delay per carrier and UTC day (the example's window)."""
    return (
        flights.key_by("carrier")
        .window(tumbling("1 day"))
        .agg(F.count("*").alias("flights"), F.avg("dep_delay").alias("avg_dep_delay"))
    )


def batch_failover_configuration(tmp_path) -> Configuration:
    return Configuration(
        {
            "execution.runtime-mode": "BATCH",
            "parallelism.default": 2,
            "minicluster.number-of-taskmanagers": 3,
            "taskmanager.numberOfTaskSlots": 1,  # each subtask index on its own TaskManager
            "io.tmp.dirs": str(tmp_path / "tmp"),
            "pipeline.side-output.dir": str(tmp_path / "side"),
            "heartbeat.interval": "100 ms",
            "heartbeat.pause": "1 s",
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": 2,
            "restart-strategy.fixed-delay.delay": "100 ms",
        }
    )


def assert_region_failover(
    logs: list[str], result: JobResultSuccess, sources: int, out: Path
) -> None:
    """Only the lost keyed subtask ran again: ``sources`` source subtasks ran once each, no
    global restart; nothing the lost attempt staged in the sink directory ``out`` is left."""
    assert not (out / ".pending").exists(), "the lost attempt's staged output stays"
    source_runs = [m for m in logs if "splits as one Spark job" in m]
    assert len(source_runs) == sources, f"the sources ran again: {source_runs}"
    assert any("region failover" in m for m in logs)
    assert not any("restart 1" in m for m in logs), "a global restart happened"
    assert result.details.restarts >= 1


def run_losing_a_task_manager_after_staging(
    spark, conf: Configuration, env: StreamExecutionEnvironment, hold: Path, out: Path, caplog
) -> tuple[JobResultSuccess, list[str], str]:
    """Run ``env``'s job (whose keyed stage ends in a ParquetSink at ``out`` then a
    ``HoldingSink`` at ``hold``) and kill -9 the TaskManager of the held subtask attempt once
    the ParquetSink has staged that attempt's output; returns the job's (successful) result,
    the messages it logged and the lost attempt's id."""
    graph = env.get_job_graph("batch-region-failover")
    with (
        caplog.at_level(logging.INFO, logger="millrace"),
        MiniCluster(conf, SparkTaskRuntime(conf, given=spark)) as cluster,
    ):
        waiting = cluster.job_client.submit_job_wait(graph)
        held = hold / "held-attempt"
        wait_until(
            lambda: held.exists() or waiting.done(), what="a keyed subtask held", timeout=WAIT
        )
        assert held.exists() and not waiting.done(), "the job ended before the hold"
        attempt = held.read_text()
        victim = next(te for te in cluster.task_executors if attempt in te._tasks)
        staged_dir = out / ".pending" / graph.job_id
        # the positive event: the ParquetSink staged the held attempt's output
        wait_until(
            lambda: staged_dir.exists() and any(staged_dir.glob(f"part-*.{attempt}")),
            what=f"attempt {attempt}'s staged output in {staged_dir}",
            timeout=WAIT,
        )

        def release_once_dead() -> None:
            # after the TaskManager's main thread died (nothing it reports gets out), the held
            # write returns, so that its task thread ends as kill -9 ends it
            wait_until(
                lambda: not victim.rpc_server.main_thread.is_alive(),
                what=f"the main thread of {victim.resource_id} to die",
                timeout=WAIT,
            )
            (hold / "released").touch()

        with ThreadPoolExecutor(1) as releaser:
            released = releaser.submit(release_once_dead)
            crash_task_executor(victim)
            result_within(released, WAIT, what="the held write released")
        result = result_within(waiting, WAIT, what="the job's result after the crash")
    assert isinstance(result, JobResultSuccess), result
    return result, [r.getMessage() for r in caplog.records], attempt


def assert_same_rows(actual: pd.DataFrame, expected: pd.DataFrame) -> None:
    """Multiset equality of the window rows: the same (carrier, window) keys as many times each
    (a duplicated row fails), exact counts and window ends, averages within 1e-9."""
    keys = ["carrier", "window_start"]
    actual = actual.sort_values(keys, ignore_index=True)
    expected = expected.sort_values(keys, ignore_index=True)
    columns = ["carrier", "window_start", "window_end", "flights"]
    assert len(actual) == len(expected), (
        f"{len(actual)} rows, expected {len(expected)}; duplicated keys:\n"
        f"{actual[actual.duplicated(keys, keep=False)].head(10)}"
    )
    rows = list(actual[columns].itertuples(index=False, name=None))
    wanted = list(expected[columns].itertuples(index=False, name=None))
    differ = [(a, e) for a, e in zip(rows, wanted, strict=True) if a != e]
    assert not differ, f"{len(differ)} window rows differ, e.g. {differ[:3]}"
    gap = (actual["avg_dep_delay"] - expected["avg_dep_delay"]).abs().max()
    assert gap <= 1e-9, f"averages differ by {gap}"


def test_a_lost_task_manager_reruns_only_the_keyed_subtask_it_ran(
    spark, flights_dir, tmp_path, caplog
) -> None:
    """The keyed subtask is lost after its ParquetSink staged its output: that attempt's
    staged files stay in the sink's pending directory until the job ends, and the final commit
    takes only the final attempts' files (each window once; the lost attempt's rows are in
    no committed file)."""
    conf = batch_failover_configuration(tmp_path)
    env = StreamExecutionEnvironment(conf, spark)
    out, hold = tmp_path / "out", tmp_path / "hold"
    hold.mkdir()
    delays = daily_delays(departed_flights(env, flights_dir))
    delays.sink_to(ParquetSink(str(out)))
    delays.sink_to(HoldingSink(str(hold)))
    result, logs, lost = run_losing_a_task_manager_after_staging(
        spark, conf, env, hold, out, caplog
    )

    assert_same_rows(read_output(out), expected_flight_delays(read_flights(flights_dir)))
    committed = sorted(p.name for p in out.glob("part-*.parquet"))
    assert not any(f"-{lost[:8]}-" in name for name in committed), committed
    assert_region_failover(logs, result, sources=2, out=out)
    source, window = result.accumulators.values()
    assert source.records_in == 336_776 and source.bundles == 2
    assert window.bundles == 2  # the final attempts: one firing each


def test_a_lost_task_manager_reruns_only_the_join_subtask_it_ran(
    spark, flights_dir, weather_dir, tmp_path, caplog
) -> None:
    conf = batch_failover_configuration(tmp_path)
    env = StreamExecutionEnvironment(conf, spark)
    flights = env.from_source(
        FileSource.parquet(str(flights_dir)), event_time="time_hour", name="flights"
    ).transform(lambda df: df.select(*flights_weather.FLIGHT_COLUMNS), name="flight columns")
    weather = env.from_source(
        FileSource.parquet(str(weather_dir)), event_time="time_hour", name="weather"
    ).transform(lambda df: df.select(*flights_weather.WEATHER_COLUMNS), name="weather columns")
    (
        flights.join(weather)
        .where("origin")
        .equal_to("origin")
        .window(tumbling("1 h"))
        .transform(pausing, name="pausing")
        .sink_to(ParquetSink(str(tmp_path / "out")))
    )
    result, logs = run_losing_a_task_manager(spark, conf, env, "WindowJoin(", caplog)

    expected = expected_flights_weather(flights_dir, weather_dir)
    assert_rows_equal(read_output(tmp_path / "out", tuple(JOIN_ORDER)), expected, JOIN_ORDER)
    assert_region_failover(logs, result, sources=4, out=tmp_path / "out")
    *_, join = result.accumulators.values()
    assert join.bundles == 2  # the final attempts: one join each
    assert join.records_out == len(expected)


def test_a_lost_task_manager_reruns_only_the_source_subtask_it_ran(
    spark, flights_dir, tmp_path, caplog
) -> None:
    """The lost source subtask's splits go back to the enumerator (Flink's addSplitsBack) and
    only that subtask runs again; the other source subtask is not run twice."""
    conf = batch_failover_configuration(tmp_path)
    env = StreamExecutionEnvironment(conf, spark)
    source = departed_flights(env, flights_dir).transform(pausing, name="pausing")  # seconds
    daily_delays(source).sink_to(ParquetSink(str(tmp_path / "out")))
    result, logs = run_losing_a_task_manager(spark, conf, env, "flights", caplog)

    assert_same_result(
        read_output(tmp_path / "out"), expected_flight_delays(read_flights(flights_dir))
    )
    # the surviving subtask once, the lost one's new attempt once (the lost attempt was cut)
    assert_region_failover(logs, result, sources=2, out=tmp_path / "out")
    assert any("splits of subtask" in m and "back to the enumerator" in m for m in logs)
    source, window = result.accumulators.values()
    assert source.records_in == 336_776 and source.bundles == 2  # every flight read once
    assert window.bundles == 2


def test_a_lost_task_manager_reruns_a_keyed_stage_chained_into_its_source(
    spark, flights_dir, tmp_path, caplog
) -> None:
    """At parallelism 1 the window is chained into the source (one vertex, one Spark job,
    ``api/keyed_chaining.py``): losing its TaskManager mid-job hands the splits back and the
    whole chain runs again in a new attempt; nothing the lost attempt staged is committed."""
    conf = batch_failover_configuration(tmp_path)
    conf.set("parallelism.default", 1)
    env = StreamExecutionEnvironment(conf, spark)
    (
        daily_delays(departed_flights(env, flights_dir))
        .transform(pausing, name="pausing")  # seconds, in the one Spark job
        .sink_to(ParquetSink(str(tmp_path / "out")))
    )
    result, logs = run_losing_a_task_manager(spark, conf, env, "flights", caplog)

    assert_same_result(
        read_output(tmp_path / "out"), expected_flight_delays(read_flights(flights_dir))
    )
    assert_region_failover(logs, result, sources=1, out=tmp_path / "out")
    assert any("back to the enumerator" in m for m in logs)
    (chained,) = result.accumulators.values()
    assert chained.records_in == 336_776 and chained.bundles == 1
    assert chained.records_out == len(expected_flight_delays(read_flights(flights_dir)))
