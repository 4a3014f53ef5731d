"""Keyed window state through compaction, many bundles and a restore, for decomposable
aggregates (partials merged per key and window) and non-decomposable ones (records buffered in
keyed state and aggregated by Spark when the window fires).

Windows of 120 days over the whole year of flights, one month per bundle and
``state.compaction.max-files`` at its minimum (2): each window task receives several bundles
between two firings and compacts its state files again and again. A TaskManager is crashed
after a checkpoint that followed a compaction, so the job restores compacted state; December's
flights are held at the source until then, so the job cannot end before the crash. The
committed output must equal the same aggregates computed by plain PySpark batch code over the
same files (Spark's own ``window`` function, not Millrace's windowing).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest

from millrace import Configuration, FileSource, ParquetSink, StreamExecutionEnvironment, tumbling
from millrace.errors import JobSubmissionError
from millrace.runtime.dispatcher.dispatcher_gateway import DispatcherGateway
from millrace.runtime.job_result import JobResultSuccess
from millrace.runtime.minicluster import MiniCluster
from millrace.spark.spark_task_runtime import SparkTaskRuntime
from tests.faults import busy_task_executor, crash_task_executor
from tests.integration.helpers import held_at_december
from tests.waiting import WAIT, result_within, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.spark]

WINDOW = "120 days"
COMPACTED = "compacted"


def selected(df: Any) -> Any:
    """Departed flights, with only the columns the aggregates read."""
    from pyspark.sql import functions as F

    return df.where(F.col("dep_delay").isNotNull()).select(
        "carrier", "time_hour", "dep_delay", "distance", "origin", "tailnum"
    )


def decomposable() -> list[Any]:
    from pyspark.sql import functions as F

    return [
        F.count("*").alias("flights"),
        F.sum("distance").alias("distance"),
        F.avg("dep_delay").alias("avg_dep_delay"),
        F.min("dep_delay").alias("min_dep_delay"),
        F.max("dep_delay").alias("max_dep_delay"),
    ]


def non_decomposable() -> list[Any]:
    from pyspark.sql import functions as F

    return [
        F.count("*").alias("flights"),
        # accuracy far above the rows of a group: the exact median, whatever the row order
        F.percentile_approx("dep_delay", 0.5, 1_000_000).alias("median_dep_delay"),
        F.sort_array(F.collect_list("origin")).alias("origins"),
        F.count_distinct("tailnum").alias("planes"),
    ]


def batch_answer(spark: Any, flights_dir: Path, aggregates: list[Any]) -> pd.DataFrame:
    """The job as plain PySpark batch code: one groupBy over every file."""
    from pyspark.sql import functions as F

    frame = selected(spark.read.parquet(str(flights_dir / "*.parquet")))
    windowed = frame.groupBy("carrier", F.window("time_hour", WINDOW).alias("w")).agg(*aggregates)
    result = windowed.select(
        "carrier",
        F.col("w.start").alias("window_start"),
        F.col("w.end").alias("window_end"),
        *[c for c in windowed.columns if c not in ("carrier", "w")],
    )
    return _sorted(result.toPandas())


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    for column in ("window_start", "window_end"):
        frame[column] = pd.to_datetime(frame[column], utc=True).astype("datetime64[ns, UTC]")
    return frame.sort_values(["carrier", "window_start"], ignore_index=True)


def read_committed(out: Path) -> pd.DataFrame:
    files = sorted(out.glob("part-*.parquet"))
    assert files, f"no committed output under {out}"
    return _sorted(pd.concat([pq.read_table(f).to_pandas() for f in files], ignore_index=True))


def assert_equal_rows(actual: pd.DataFrame, expected: pd.DataFrame) -> None:
    """Same (carrier, window) rows and columns; doubles within 1e-9, everything else exact."""
    assert list(actual.columns) == list(expected.columns)
    assert actual[["carrier", "window_start", "window_end"]].equals(
        expected[["carrier", "window_start", "window_end"]]
    ), f"windows differ:\n{actual.head()}\n{expected.head()}"
    for column in actual.columns[3:]:
        mine, theirs = actual[column], expected[column]
        if pd.api.types.is_float_dtype(theirs):
            assert (mine - theirs).abs().max() <= 1e-9, column
        else:
            assert [_plain(v) for v in mine] == [_plain(v) for v in theirs], column


def _plain(value: Any) -> Any:
    return list(value) if hasattr(value, "__len__") and not isinstance(value, str) else value


@pytest.mark.parametrize(
    "aggregates",
    [decomposable, non_decomposable],
    ids=["decomposable", "non-decomposable"],
)
def test_compacted_state_restored_after_a_crash_gives_the_batch_answer(
    spark, flights_dir, tmp_path: Path, caplog, aggregates: Callable[[], list[Any]]
) -> None:
    conf = Configuration(
        {
            "parallelism.default": 2,
            "minicluster.number-of-taskmanagers": 3,
            "io.tmp.dirs": str(tmp_path / "tmp"),
            "execution.bundle.max-records": 30_000,  # one month per bundle
            "state.compaction.max-files": 2,
            "execution.checkpointing.interval": "200 ms",
            "heartbeat.interval": "100 ms",
            "heartbeat.pause": "1 s",
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": 3,
            "restart-strategy.fixed-delay.delay": "100 ms",
        }
    )
    env = StreamExecutionEnvironment(conf, spark)
    gate = tmp_path / "december"
    (
        env.from_source(FileSource.parquet(str(flights_dir)), event_time="time_hour")
        .transform(held_at_december(gate), name="held at december")
        .transform(selected)
        .key_by("carrier")
        .window(tumbling(WINDOW))
        .agg(*aggregates())
        .sink_to(ParquetSink(str(tmp_path / "out")))
    )
    graph = env.get_job_graph(f"keyed-state-{aggregates.__name__}")
    expected = batch_answer(spark, flights_dir, aggregates())
    caplog.set_level("INFO", logger="millrace.spark.window_stream_task")

    def compactions() -> int:
        return sum(COMPACTED in r.getMessage() for r in caplog.records)

    with MiniCluster(conf, SparkTaskRuntime(conf, given=spark)) as cluster:
        assert cluster.dispatcher is not None
        dispatcher = cluster.dispatcher.get_self_gateway(DispatcherGateway)
        waiting = cluster.job_client.submit_job_wait(graph)

        def completed() -> int:
            try:
                return dispatcher.request_checkpoint_statistics(graph.job_id).result(30).completed
            except JobSubmissionError:  # not submitted yet
                return 0

        wait_until(lambda: compactions() >= 1 or waiting.done(), what="a compaction")
        after_compaction = completed()
        wait_until(
            lambda: (compactions() >= 2 and completed() > after_compaction) or waiting.done(),
            what="2 compactions and a checkpoint after the first",
            seen=lambda: (compactions(), completed(), after_compaction),
        )
        assert not waiting.done(), "the job ended before the TaskManager was lost"
        crash_task_executor(busy_task_executor(cluster))
        gate.touch()  # December may go on: the restored job runs to its end
        result = result_within(waiting, WAIT, what="the job's result after the crash")

    assert isinstance(result, JobResultSuccess), result
    assert result.details.restarts >= 1
    assert compactions() >= 3, "too few compactions to test them"
    assert_equal_rows(read_committed(tmp_path / "out"), expected)
