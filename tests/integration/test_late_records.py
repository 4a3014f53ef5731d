"""Late records: out-of-order input whose window has already fired goes to the late side output
with its reason and is counted in ``late-records``; a record behind the watermark whose window is
still open is not late. Both boundaries are tested to the millisecond: a window fires when the
watermark reaches its end - 1 ms (then its last millisecond is late), and the first
millisecond of the next window is not late.

The source is unbounded (a directory that files arrive in), so a file that arrives after the
watermark passed its events is out of order, as on a real stream. The windows are one hour, the
out-of-orderness 10 minutes, one subtask per vertex; each file is one bundle, judged against
the watermark before it:

- ``early``: 00:10, 00:50, 01:10 -> watermark 00:59:59.999, exactly the end - 1 of window
  [00:00, 01:00), which fires with 2 flights;
- ``straggler``: 00:40 and 00:59:59.999 (fired window: late), 01:00:00.000 (next window: on
  time), 01:30 -> watermark 01:19:59.999;
- ``latecomer``: 01:05 (behind the watermark, but its window is open: on time), 03:00 -> window
  [01:00, 02:00) fires with 4 flights (01:10, 01:00:00.000, 01:30, 01:05).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from millrace import (
    Configuration,
    DirectorySource,
    ParquetSink,
    StreamExecutionEnvironment,
    tumbling,
)
from millrace.runtime.dispatcher.dispatcher_gateway import DispatcherGateway
from millrace.runtime.minicluster import MiniCluster
from millrace.spark.spark_task_runtime import SparkTaskRuntime
from tests.integration.streams import committed, stream_settings, wait_for_rows
from tests.waiting import wait_value

pytestmark = [pytest.mark.slow, pytest.mark.spark]

DAY = "2013-01-01"
EARLY = ["00:10:00", "00:50:00", "01:10:00"]
LATE = ["00:40:00", "00:59:59.999"]
STRAGGLER = [*LATE, "01:00:00", "01:30:00"]
LATECOMER = ["01:05:00", "03:00:00"]


def flights_at(times: list[str], first_flight: int) -> pa.Table:
    stamps = pd.to_datetime([f"{DAY} {t}" for t in times], utc=True, format="ISO8601")
    return pa.table(
        {
            "carrier": ["UA"] * len(times),
            "flight": list(range(first_flight, first_flight + len(times))),
            "time_hour": pa.array(stamps, type=pa.timestamp("us", tz="UTC")),
        }
    )


def drop(inbox: Path, name: str, table: pa.Table) -> None:
    """The file appears at once: written aside, then renamed in."""
    hidden = inbox / f".{name}"
    pq.write_table(table, hidden)
    hidden.rename(inbox / name)


def side_output(directory: Path) -> pd.DataFrame:
    files = sorted(directory.glob("part-*.parquet"))
    if not files:
        return pd.DataFrame(columns=["source", "reason", "record", "subtask"])
    return pd.concat([pq.read_table(f).to_pandas() for f in files], ignore_index=True)


def test_records_of_a_fired_window_are_late_and_those_of_the_next_window_are_not(
    spark, tmp_path: Path
) -> None:
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
        .window(tumbling("1 h"))
        .agg(F.count("*").alias("flights"), F.max("flight").alias("last_flight"))
        .sink_to(ParquetSink(str(out)))
    )
    graph = env.get_job_graph("late-records")
    with MiniCluster(conf, SparkTaskRuntime(conf, given=spark)) as cluster:
        assert cluster.dispatcher is not None
        dispatcher = cluster.dispatcher.get_self_gateway(DispatcherGateway)
        cluster.job_client.submit_job_detached(graph).result(60)
        drop(inbox, "early.parquet", flights_at(EARLY, 1))
        wait_for_rows(out, 1)  # window [00:00, 01:00) fired (and committed) at its end - 1 ms
        drop(inbox, "straggler.parquet", flights_at(STRAGGLER, 10))
        late_dir = side / "late-records" / "late"
        wait_value(
            lambda: side_output(late_dir),
            lambda rows: len(rows) >= len(LATE),
            what="the late records committed to the side output",
        )
        drop(inbox, "latecomer.parquet", flights_at(LATECOMER, 20))
        wait_for_rows(out, 2)  # window [01:00, 02:00)
        metrics = wait_value(  # counters reach the JobMaster about once a second
            lambda: dispatcher.request_job_details(graph.job_id).result(30).vertices[0].metrics,
            lambda m: m.records_in >= len(EARLY) + len(STRAGGLER) + len(LATECOMER),
            what="the source's counters of the three files",
        )
        dispatcher.cancel_job(graph.job_id).result(30)

    windows = committed(out)
    late = side_output(side / "late-records" / "late")
    assert windows["window_start"].dt.strftime("%H:%M").tolist() == ["00:00", "01:00"]
    assert windows["flights"].tolist() == [2, 4]  # 00:10 00:50 | 01:10 01:00:00.000 01:30 01:05
    assert windows["last_flight"].tolist() == [2, 20]  # no late flight in the fired window
    assert metrics.late_records == len(LATE)
    assert len(late) == len(LATE)
    records = sorted(json.loads(r)["flight"] for r in late["record"])
    assert records == [10, 11]  # 00:40 and 00:59:59.999
    window_end = pd.Timestamp(f"{DAY} 01:00", tz="UTC").value // 10**6
    watermark = window_end - 1  # 01:10 - 10 min - 1 ms: the fired window's last millisecond
    assert set(late["reason"]) == {
        f"late: window ending at {window_end} ms already fired at watermark {watermark} ms"
    }
    assert set(late["source"]).pop().endswith("straggler.parquet")
