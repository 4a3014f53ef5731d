"""The flight-delays job into PostgreSQL, exactly once through a TaskManager loss.

The pipeline of ``examples/flight_delays.py`` writes to two sinks at once, a ParquetSink and a
PostgresSink, on a MiniCluster checkpointing every 200 ms. A busy TaskManager is closed after
two checkpoints completed and rows were committed: the job restores the latest one, the committer
replays its commit (a no-op for the rows already in PostgreSQL) and drops what no checkpoint
covered. The table then holds exactly pandas' result: no duplicate, none missing.

Both tests hold December's flights at the source until their failure has happened (a gate file
the test creates afterwards), so a fast runtime cannot end the job before it.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import psycopg
import pytest

from millrace import Configuration, ParquetSink, PostgresSink, StreamExecutionEnvironment
from millrace.api.windows import tumbling
from millrace.connectors import FileSource
from millrace.errors import JobSubmissionError
from millrace.runtime.dispatcher.dispatcher_gateway import DispatcherGateway
from millrace.runtime.job_result import JobResultSuccess
from millrace.runtime.minicluster import MiniCluster
from millrace.spark.spark_task_runtime import SparkTaskRuntime
from tests.faults import busy_task_executor, crash_task_executor
from tests.integration.helpers import (
    assert_same_result,
    expected_flight_delays,
    held_at_december,
    load_example,
    read_flights,
    read_output,
)
from tests.waiting import result_within, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.spark]

WAIT = 120.0
COLUMNS = ["carrier", "window_start", "window_end", "flights", "avg_dep_delay"]


def configuration(tmp_path) -> Configuration:
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
        }
    )


def build(
    env: StreamExecutionEnvironment, flights_dir, out_dir, postgres: PostgresSink, gate: Path
) -> None:
    """examples/flight_delays.py's pipeline, into Parquet and PostgreSQL, with December held at
    the source until ``gate`` exists (``held_at_december``)."""
    from pyspark.sql import functions as F

    delays = (
        env.from_source(
            FileSource.parquet(str(flights_dir)),
            event_time="time_hour",
            max_out_of_orderness="1 h",
            name="flights",
        )
        .transform(held_at_december(gate), name="held at december")
        .transform(load_example("flight_delays").departed, name="departed")
        .key_by("carrier")
        .window(tumbling("1 day"))
        .agg(F.count("*").alias("flights"), F.avg("dep_delay").alias("avg_dep_delay"))
    )
    delays.sink_to(ParquetSink(str(out_dir)))
    delays.sink_to(postgres)


def committed_rows(conninfo: str) -> int:
    """Rows committed so far (0 before the first commit created the tables)."""
    with psycopg.connect(conninfo) as conn:
        if conn.execute("SELECT to_regclass('delays')").fetchone() == (None,):
            return 0
        return conn.execute("SELECT count(*) FROM delays").fetchone()[0]


def read_table(conninfo: str, like: pd.DataFrame) -> pd.DataFrame:
    """The ``delays`` table as a frame with ``like``'s dtypes, sorted by carrier and window."""
    with psycopg.connect(conninfo) as conn:
        rows = conn.execute(f"SELECT {', '.join(COLUMNS)} FROM delays").fetchall()
    frame = pd.DataFrame(rows, columns=COLUMNS)
    for column in ("window_start", "window_end"):
        frame[column] = pd.to_datetime(frame[column], utc=True).astype(like[column].dtype)
    frame["flights"] = frame["flights"].astype("int64")
    return frame.sort_values(["carrier", "window_start"], ignore_index=True)


def test_task_manager_lost_mid_job_leaves_exactly_the_pandas_rows_in_postgres(
    spark, flights_dir, postgres_conninfo, tmp_path
) -> None:
    conf = configuration(tmp_path)
    env = StreamExecutionEnvironment(conf, spark)
    sink = PostgresSink(postgres_conninfo, "delays", staging=str(tmp_path / "staging"))
    gate = tmp_path / "december"
    build(env, flights_dir, tmp_path / "out", sink, gate)
    graph = env.get_job_graph("flight-delays-postgres")
    with MiniCluster(conf, SparkTaskRuntime(conf, given=spark)) as cluster:
        assert cluster.dispatcher is not None
        dispatcher = cluster.dispatcher.get_self_gateway(DispatcherGateway)
        waiting = cluster.job_client.submit_job_wait(graph)

        def progress() -> tuple[int, int]:
            try:
                statistics = dispatcher.request_checkpoint_statistics(graph.job_id).result(30)
                details = dispatcher.request_job_details(graph.job_id).result(30)
                return statistics.completed, details.splits_assigned
            except JobSubmissionError:  # not submitted yet
                return 0, 0

        def mid_job() -> bool:
            done = progress()
            return (done[0] >= 2 and done[1] >= 5 and committed_rows(postgres_conninfo) > 0) or (
                waiting.done()
            )

        wait_until(mid_job, what="a commit with rows, 2 checkpoints", seen=progress, timeout=WAIT)
        assert not waiting.done(), "the job ended before the TaskManager was lost"
        committed_before = committed_rows(postgres_conninfo)
        crash_task_executor(busy_task_executor(cluster))
        gate.touch()  # December may go on: the restored job runs to its end
        result = result_within(waiting, WAIT, what="the job's result after the crash")

    assert isinstance(result, JobResultSuccess), result
    assert result.details.restarts >= 1
    expected = expected_flight_delays(read_flights(flights_dir))
    actual = read_table(postgres_conninfo, expected)
    assert not actual.duplicated(["carrier", "window_start"]).any()
    assert_same_result(actual, expected)
    assert_same_result(read_output(tmp_path / "out"), expected)
    with psycopg.connect(postgres_conninfo) as conn:
        commits, rows = conn.execute(
            "SELECT count(*), sum(rows) FROM millrace_sink_commits WHERE job_id = %s",
            (graph.job_id,),
        ).fetchone()
    assert commits >= 2 and rows == len(expected) and 0 < committed_before < rows
    assert not [p for p in (tmp_path / "staging").rglob("*") if p.is_file()]


def test_a_database_outage_at_the_final_commit_is_retried_and_nothing_is_lost(
    spark, flights_dir, private_postgres_server, tmp_path, caplog
) -> None:
    """No checkpoints: everything is committed when the bounded job ends. PostgreSQL is down
    then; the commit is retried under the restart strategy until it is back."""
    conninfo = private_postgres_server.create_database()
    conf = Configuration(
        {
            "parallelism.default": 2,
            "io.tmp.dirs": str(tmp_path / "tmp"),
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": 30,
            "restart-strategy.fixed-delay.delay": "500 ms",
        }
    )
    env = StreamExecutionEnvironment(conf, spark)
    sink = PostgresSink(conninfo, "delays", staging=str(tmp_path / "staging"), connect_timeout=2)
    gate = tmp_path / "december"
    build(env, flights_dir, tmp_path / "out", sink, gate)
    graph = env.get_job_graph("flight-delays-outage")
    caplog.set_level("WARNING", logger="millrace.runtime.jobmaster.job_master")
    with MiniCluster(conf, SparkTaskRuntime(conf, given=spark)) as cluster:
        assert cluster.dispatcher is not None
        dispatcher = cluster.dispatcher.get_self_gateway(DispatcherGateway)
        waiting = cluster.job_client.submit_job_wait(graph)

        def splits_assigned() -> int:
            try:
                return dispatcher.request_job_details(graph.job_id).result(30).splits_assigned
            except JobSubmissionError:  # not submitted yet
                return 0

        wait_until(  # prepared: the sinks are initialized
            lambda: splits_assigned() > 0 or waiting.done(), what="a split assigned", timeout=WAIT
        )
        private_postgres_server.stop()
        gate.touch()  # December may go on: the job ends, and commits, while PostgreSQL is down
        wait_until(
            lambda: "retrying the commit" in caplog.text or waiting.done(),
            what="a retried commit",
            timeout=WAIT,
        )
        assert not waiting.done(), f"the job ended without a retried commit: {waiting.result(0)}"
        private_postgres_server.start()
        result = result_within(waiting, WAIT, what="the job's result")

    assert isinstance(result, JobResultSuccess), result
    assert "cannot connect to PostgreSQL" in caplog.text
    expected = expected_flight_delays(read_flights(flights_dir))
    assert_same_result(read_table(conninfo, expected), expected)
    assert_same_result(read_output(tmp_path / "out"), expected)
    assert not [p for p in (tmp_path / "staging").rglob("*") if p.is_file()]
