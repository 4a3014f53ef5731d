"""An unbounded job over a directory that files keep arriving in: windows fire as event time
advances, output becomes visible checkpoint by checkpoint, a lost TaskManager costs nothing,
and a savepoint carries the job over to a new run at another parallelism (from the chained
source and window of parallelism 1 to two vertices of parallelism 3).
"""

from __future__ import annotations

import pandas as pd
import pytest

from millrace import Configuration, StreamExecutionEnvironment
from millrace.runtime.dispatcher.dispatcher_gateway import DispatcherGateway
from millrace.runtime.executiongraph import JobStatus
from millrace.runtime.minicluster import MiniCluster
from millrace.spark.spark_task_runtime import SparkTaskRuntime
from tests.faults import busy_task_executor, crash_task_executor
from tests.integration.helpers import expected_flight_delays, read_flights
from tests.integration.streams import (
    arrive,
    assert_exactly,
    build_inbox_delays,
    committed,
    fired_through,
    stream_settings,
    wait_for_rows,
)
from tests.waiting import wait_value

pytestmark = [pytest.mark.slow, pytest.mark.spark]


def test_files_arriving_in_a_directory_stream_through_windows_exactly_once(
    spark, flights_dir, tmp_path
) -> None:
    inbox, out = tmp_path / "inbox", tmp_path / "out"
    inbox.mkdir()
    conf = Configuration(stream_settings(tmp_path))
    env = StreamExecutionEnvironment(conf, spark)
    build_inbox_delays(env, inbox, out)
    graph = env.get_job_graph("inbox-delays")
    flights = read_flights(flights_dir)
    expected = expected_flight_delays(flights)

    with MiniCluster(conf, SparkTaskRuntime(conf, given=spark)) as cluster:
        assert cluster.dispatcher is not None
        dispatcher = cluster.dispatcher.get_self_gateway(DispatcherGateway)
        cluster.job_client.submit_job_detached(graph).result(60)
        for month in (1, 2):
            arrive(flights_dir, inbox, month)
        wait_for_rows(out, len(fired_through(flights, expected, 2)))

        crash_task_executor(busy_task_executor(cluster))
        arrive(flights_dir, inbox, 3)
        wait_for_rows(out, len(fired_through(flights, expected, 3)))
        details = dispatcher.request_job_details(graph.job_id).result(30)
        assert details.status is JobStatus.RUNNING and details.restarts >= 1
        watermarks = dispatcher.request_watermarks(graph.job_id).result(30)
        dispatcher.cancel_job(graph.job_id).result(30)

    assert_exactly(committed(out), fired_through(flights, expected, 3))
    march = pd.Timestamp("2013-03-01", tz="UTC").value // 10**6
    assert watermarks.min_clock_ms >= march  # the global min clock followed the data


def test_a_savepoint_resumes_in_a_new_job_at_another_parallelism(
    spark, flights_dir, tmp_path
) -> None:
    inbox, out = tmp_path / "inbox", tmp_path / "out"
    inbox.mkdir()
    flights = read_flights(flights_dir)
    expected = expected_flight_delays(flights)
    # at parallelism 1 the window is chained into the source: one task, one vertex
    first = Configuration(stream_settings(tmp_path, **{"parallelism.default": 1}))
    env = StreamExecutionEnvironment(first, spark)
    build_inbox_delays(env, inbox, out)
    graph = env.get_job_graph("inbox-delays")
    assert len(graph.vertices) == 1 and graph.vertices[0].chained_keyed is not None
    with MiniCluster(first, SparkTaskRuntime(first, given=spark)) as cluster:
        assert cluster.dispatcher is not None
        dispatcher = cluster.dispatcher.get_self_gateway(DispatcherGateway)
        cluster.job_client.submit_job_detached(graph).result(60)
        for month in (1, 2):
            arrive(flights_dir, inbox, month)
        wait_for_rows(out, len(fired_through(flights, expected, 2)))
        savepoint = dispatcher.trigger_savepoint(graph.job_id, None, True).result(120)
        result = cluster.job_client.request_job_details(graph.job_id).result(30)
    assert (tmp_path / "tmp" / "savepoints").exists() and savepoint.startswith(str(tmp_path))
    assert result.status in (JobStatus.CANCELLING, JobStatus.CANCELED)
    before = committed(out)

    second = Configuration(
        stream_settings(
            tmp_path, **{"parallelism.default": 3, "execution.savepoint.path": savepoint}
        )
    )
    env = StreamExecutionEnvironment(second, spark)
    build_inbox_delays(env, inbox, out)
    resumed = env.get_job_graph("inbox-delays-resumed")
    assert resumed.savepoint_path == savepoint
    unchained = [u.vertex_id for v in graph.vertices for u in v.unchained()[0]]
    assert [v.vertex_id for v in resumed.vertices] == unchained  # two vertices, the same ids
    with MiniCluster(second, SparkTaskRuntime(second, given=spark)) as cluster:
        assert cluster.dispatcher is not None
        dispatcher = cluster.dispatcher.get_self_gateway(DispatcherGateway)
        cluster.job_client.submit_job_detached(resumed).result(60)
        arrive(flights_dir, inbox, 3)
        wait_for_rows(out, len(fired_through(flights, expected, 3)))
        statistics = dispatcher.request_checkpoint_statistics(resumed.job_id).result(30)
        march = int((flights["month"] == 3).sum())
        # Counters reach the JobMaster about once a second, after the rows they produced may
        # have been committed: wait until they settle at March's count (or pass it).
        details = wait_value(
            lambda: dispatcher.request_job_details(resumed.job_id).result(30),
            lambda d: d.vertices[0].metrics.records_in >= march,
            what=f"the sources' records-in to reach {march}",
        )
        dispatcher.cancel_job(resumed.job_id).result(30)

    assert statistics.restored_from  # it restored the savepoint
    assert [v.parallelism for v in details.vertices] == [3, 3]
    assert details.vertices[0].metrics.records_in == march  # March only: no month read again
    assert len(before) >= len(fired_through(flights, expected, 2))
    assert_exactly(committed(out), fired_through(flights, expected, 3))
