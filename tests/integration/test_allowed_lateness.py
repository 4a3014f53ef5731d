"""Allowed lateness (Flink's ``allowedLateness``): a window fires when the watermark reaches
its end - 1, stays in state ``lateness`` longer, and fires again with its full, updated result
for every record that arrives for it meanwhile; a record later than that goes to the late side
output.

An unbounded directory source, one subtask per vertex, so each file is one bundle judged
against the watermark before it. Windows of one hour, out-of-orderness 10 minutes, lateness 30
minutes:

- ``early``: 00:10, 00:50, 01:10 -> watermark 00:59:59.999: [00:00, 01:00) fires with 2;
- ``second``: 00:40 (within lateness), 01:30 -> [00:00, 01:00) fires again with 3;
- ``third``: 00:20 (still within: 01:29:59.999 > 01:19:59.999), 01:45 -> again with 4; the
  watermark 01:34:59.999 passes the window's lateness, which leaves the state;
- ``fourth``: 00:30 (past the lateness: late output), 03:00 -> [01:00, 02:00) fires with 3.

The tumbling case runs again with a TaskManager killed after the first late firing was
committed: the restored state still holds the fired window for its lateness, so the next
record fires it again with all four flights, and no firing is lost or written twice.

The same with session windows (gap 20 minutes, lateness 1 hour): a late record bridging two
fired sessions fires the merged session.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from millrace import (
    Configuration,
    DirectorySource,
    ParquetSink,
    StreamExecutionEnvironment,
    session,
    tumbling,
)
from millrace.runtime.minicluster import MiniCluster
from millrace.spark.spark_task_runtime import SparkTaskRuntime
from tests.faults import busy_task_executor, crash_task_executor
from tests.integration.streams import committed, stream_settings, wait_for_rows
from tests.integration.test_late_records import drop, flights_at, side_output
from tests.waiting import wait_value

pytestmark = [pytest.mark.slow, pytest.mark.spark]


def run_arrivals(
    spark: Any,
    tmp_path: Path,
    window: Any,
    lateness: str,
    files: list[tuple[list[str], int]],
    late: int,
    crash_after: int | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Run the job while ``files`` arrive one by one, each once the previous one's firings
    were committed (``files``: the event times and the output rows expected after it); with
    ``crash_after``, a TaskManager running the job is killed once that file's firings were
    committed (so a checkpoint holds the fired windows kept for their lateness)."""
    from pyspark.sql import functions as F

    inbox, out, side = tmp_path / "inbox", tmp_path / "out", tmp_path / "side"
    inbox.mkdir()
    conf = Configuration(
        stream_settings(
            tmp_path, **{"parallelism.default": 1, "pipeline.side-output.dir": str(side)}
        )
    )
    env = StreamExecutionEnvironment(conf, spark)
    (
        env.from_source(
            DirectorySource.parquet(str(inbox)),
            event_time="time_hour",
            max_out_of_orderness="10 min",
        )
        .key_by("carrier")
        .window(window)
        .allowed_lateness(lateness)
        .agg(F.count("*").alias("flights"), F.sort_array(F.collect_list("flight")).alias("ids"))
        .sink_to(ParquetSink(str(out)))
    )
    graph = env.get_job_graph("allowed-lateness")
    late_dir = side / "allowed-lateness" / "late"
    with MiniCluster(conf, SparkTaskRuntime(conf, given=spark)) as cluster:
        assert cluster.dispatcher is not None
        cluster.job_client.submit_job_detached(graph).result(60)
        first = 1
        for index, (times, rows) in enumerate(files):
            drop(inbox, f"{index:02d}.parquet", flights_at(times, first))
            first += len(times)
            wait_for_rows(out, rows)
            if index == crash_after:
                crash_task_executor(busy_task_executor(cluster))
        if crash_after is not None:
            details = cluster.job_client.request_job_details(graph.job_id).result(30)
            assert details.restarts >= 1
        wait_value(
            lambda: side_output(late_dir),
            lambda rows: len(rows) >= late,
            what="the late records committed to the side output",
        )
        cluster.job_client.cancel_job(graph.job_id).result(30)
    return committed(out), side_output(late_dir)


@pytest.mark.parametrize("crash_after", [None, 1], ids=["no-failure", "crash-after-a-late-firing"])
def test_records_within_the_lateness_fire_the_window_again(
    spark, tmp_path: Path, crash_after: int | None
) -> None:
    files = [
        (["00:10", "00:50", "01:10"], 1),
        (["00:40", "01:30"], 2),
        (["00:20", "01:45"], 3),
        (["00:30", "03:00"], 4),
    ]
    windows, late = run_arrivals(
        spark, tmp_path, tumbling("1 h"), "30 min", files, late=1, crash_after=crash_after
    )

    firings = windows.sort_values(["window_start", "flights"], ignore_index=True)
    assert firings["window_start"].dt.strftime("%H:%M").tolist() == [
        "00:00",
        "00:00",
        "00:00",
        "01:00",
    ]
    assert firings["flights"].tolist() == [2, 3, 4, 3]
    assert [list(ids) for ids in firings["ids"]] == [[1, 2], [1, 2, 4], [1, 2, 4, 6], [3, 5, 7]]
    assert [json.loads(r)["flight"] for r in late["record"]] == [8]
    assert set(late["reason"]).pop().startswith("late: window ending at")


def test_a_file_of_late_records_alone_fires_the_window_again(spark, tmp_path: Path) -> None:
    """The second file holds one record of the fired window and moves no watermark: the
    window fires again all the same (the window is chained into the source at parallelism 1,
    where firing follows the source's watermark, moved or not)."""
    files = [(["00:10", "00:50", "01:10"], 1), (["00:40"], 2)]
    windows, late = run_arrivals(spark, tmp_path, tumbling("1 h"), "30 min", files, late=0)

    assert windows.sort_values("flights")["flights"].tolist() == [2, 3]
    assert len(late) == 0


def test_a_late_record_bridging_two_fired_sessions_fires_the_merged_session(
    spark, tmp_path: Path
) -> None:
    # sessions (gap 20 min, lateness 1 h): [00:00, 00:30) and [00:40, 01:00) fire at
    # watermark 01:09:59.999; 00:25 arrives within their lateness and merges both into
    # [00:00, 01:00), which fires; 02:30 fires [01:20, 01:45) and ends the lateness of
    # [00:00, 01:00), so 00:50 is late; 03:30 fires [02:30, 02:50).
    files = [
        (["00:00", "00:10", "00:40", "01:20"], 2),
        (["00:25", "01:25"], 3),
        (["02:30"], 4),
        (["00:50", "03:30"], 5),
    ]
    sessions, late = run_arrivals(spark, tmp_path, session("20 min"), "1 h", files, late=1)

    rows = sessions.sort_values(["window_start", "window_end"], ignore_index=True)
    bounds = [
        f"{s:%H:%M}-{e:%H:%M}"
        for s, e in zip(rows["window_start"], rows["window_end"], strict=True)
    ]
    assert bounds == ["00:00-00:30", "00:00-01:00", "00:40-01:00", "01:20-01:45", "02:30-02:50"]
    assert rows["flights"].tolist() == [2, 4, 1, 2, 1]
    assert [list(ids) for ids in rows["ids"]] == [[1, 2], [1, 2, 3, 5], [3], [4, 6], [7]]
    assert [json.loads(r)["flight"] for r in late["record"]] == [8]
