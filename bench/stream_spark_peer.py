"""The peer of bench/stream_flight_delays.py: the flight-delays aggregation in Spark Structured
Streaming, in the benchmark's own SparkSession.

A Parquet file-stream source on a watched directory, ``withWatermark("time_hour", ooo)``,
``groupBy(carrier, window(time_hour, "1 day"))`` with count and avg, append output mode into a
``foreachBatch`` sink that collects each micro-batch's rows as Arrow and writes them with
pyarrow (as Millrace's ParquetSink does), noting when each batch's rows were written. Spark
commits its offset and state checkpoint after every micro-batch (its fault tolerance, always on).

The file source has no end: a last file holds one departed flight of a dummy carrier a day
after the last window (``stream_metrics.sentinel_table``), which moves the watermark past every
window of the data as the end of Millrace's bounded source does; the run ends when the rows of
the last window are out.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from stream_metrics import (
    RunResult,
    Workload,
    check_output,
    close_times_chunked,
    sentinel_table,
    window_end_ms,
)

_WAITING = "Waiting for data to arrive"


class SparkStreamingPeer:
    """Runs the peer query, one run at a time.

    Args:
        spark: The shared SparkSession (``spark.sql.shuffle.partitions`` = cores).
        workload: The stream and the expected result.
        input_dir: The monthly Parquet files.
        work: Scratch directory (watched directories, checkpoints, output).
        out_of_orderness: Spark interval string of the watermark delay, e.g. ``"1 hour"``.
        timeout: Seconds a run may take before it is reported as unfinished.

    Threading:
        One thread runs the query at a time; Spark calls the sink on its own thread.
    """

    def __init__(
        self,
        spark: Any,
        workload: Workload,
        input_dir: str,
        work: Path,
        out_of_orderness: str,
        timeout: float,
    ) -> None:
        self.spark = spark
        self.workload = workload
        self.input_dir = Path(input_dir)
        self.work = work
        self.out_of_orderness = out_of_orderness
        self.timeout = timeout
        self._runs = 0
        self._last_end_ms = int(window_end_ms(workload.expected).max())
        # keep every micro-batch's progress report of a run (default: the last 100)
        spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", "10000")

    # As fast as possible -------------------------------------------------------------------

    def run_files(self, label: str, max_files_per_trigger: int | None) -> RunResult:
        """The 12 monthly files (and the end-of-stream file) all in the directory at start.

        Time: from ``start()`` of the query to the last window row written.
        """
        watch = self._fresh("in")
        months = sorted(self.input_dir.glob("*.parquet"))
        base = time.time() - 100
        for i, month in enumerate(months):  # the file source takes the oldest files first
            shutil.copyfile(month, watch / month.name)
            os.utime(watch / month.name, (base + i, base + i))
        end = watch / "zz-end-of-stream.parquet"
        pq.write_table(sentinel_table(self.workload), end)
        os.utime(end, (base + len(months), base + len(months)))
        started = time.time()
        batches, progress = self._run_query(watch, max_files_per_trigger, None)
        return self._result(label, started, batches, progress, released=None)

    # Replay at a rate ----------------------------------------------------------------------

    def run_rate(self, rate: float, chunk_interval: float) -> RunResult:
        """The replay order cut into files of ``rate * chunk_interval`` events, file k moved
        (atomic rename) into the watched directory at ``start + (k + 1) * chunk_interval``
        (when its last event is due); no maxFilesPerTrigger, so each micro-batch takes every
        file that arrived. Files are written before the clock starts.

        Time: from the start of the replay to the last window row written.
        """
        stage, watch = self._fresh("stage"), self._fresh("in")
        table = self.workload.table
        rows = max(1, round(rate * chunk_interval))
        paths = []
        for k, offset in enumerate(range(0, table.num_rows, rows)):
            chunk = table.slice(offset, rows)
            if offset + rows >= table.num_rows:
                chunk = pa.concat_tables([chunk, sentinel_table(self.workload)])
            paths.append(stage / f"chunk-{k:06d}.parquet")
            pq.write_table(chunk, paths[-1])
        released: list[float] = []
        timing: dict[str, float] = {}

        def produce() -> None:
            timing["start"] = start = time.time()
            for k, path in enumerate(paths):
                time.sleep(max(0.0, start + (k + 1) * chunk_interval - time.time()))
                os.rename(path, watch / path.name)
                released.append(time.time())

        producer = threading.Thread(target=produce, name="spark-peer-producer", daemon=True)
        batches, progress = self._run_query(watch, None, producer.start)
        producer.join()
        result = self._result(
            f"Spark SS @ {rate:,.0f}/s", timing["start"], batches, progress, released
        )
        if result.frame is None or not len(result.frame):
            return result
        ends = window_end_ms(result.frame)
        closes = close_times_chunked(ends, self.workload, rows, released)
        result.latency["emit"] = result.frame["_emitted"].to_numpy() - closes
        result.closes = closes
        result.replay = (timing["start"], released[-1])
        return result

    # The query -----------------------------------------------------------------------------

    def _fresh(self, kind: str) -> Path:
        path = self.work / f"spark-{self._runs:03d}-{kind}"
        path.mkdir(parents=True)
        return path

    def _run_query(
        self, watch: Path, max_files_per_trigger: int | None, when_ready: Any
    ) -> tuple[list[tuple[int, float, pa.Table]], list[Any]]:
        """Start the query on ``watch``; call ``when_ready`` once it waits for data; return the
        batches written (time, rows) and the query's progress reports once the last day's
        windows are out (or after the timeout)."""
        from pyspark.sql import functions as F

        self._runs += 1
        schema = self.spark.read.parquet(str(next(self.input_dir.glob("*.parquet")))).schema
        reader = self.spark.readStream.schema(schema)
        if max_files_per_trigger is not None:
            reader = reader.option("maxFilesPerTrigger", max_files_per_trigger)
        windowed = (
            reader.parquet(str(watch))
            .withWatermark("time_hour", self.out_of_orderness)
            .where(F.col("dep_delay").isNotNull())
            .groupBy("carrier", F.window("time_hour", "1 day").alias("w"))
            .agg(F.count("*").alias("flights"), F.avg("dep_delay").alias("avg_dep_delay"))
            .select(
                "carrier",
                F.col("w.start").alias("window_start"),
                F.col("w.end").alias("window_end"),
                "flights",
                "avg_dep_delay",
            )
        )
        out = self.work / f"spark-{self._runs:03d}-out"
        out.mkdir()
        batches: list[tuple[int, float, pa.Table]] = []
        done = threading.Event()
        last_end = self._last_end_ms

        def sink(frame: Any, batch_id: int) -> None:
            table = frame.toArrow()
            if table.num_rows:
                pq.write_table(table, out / f"part-{batch_id:06d}.parquet")
            batches.append((batch_id, time.time(), table))
            ends = table.column("window_end").cast(pa.timestamp("ms", "UTC")).cast(pa.int64())
            if table.num_rows and max(ends.to_pylist()) >= last_end:
                done.set()

        query = (
            windowed.writeStream.outputMode("append")
            .foreachBatch(sink)
            .option("checkpointLocation", str(self.work / f"spark-{self._runs:03d}-checkpoint"))
            .start()
        )
        try:
            if when_ready is not None:  # the first trigger found the directory empty
                deadline = time.time() + 60
                while query.status["message"] != _WAITING and time.time() < deadline:
                    time.sleep(0.01)
                when_ready()
            done.wait(self.timeout)
        finally:
            query.stop()
        return batches, list(query.recentProgress)

    def _result(
        self,
        label: str,
        started: float,
        batches: list[tuple[int, float, pa.Table]],
        progress: list[Any],
        released: list[float] | None,
    ) -> RunResult:
        import pandas as pd

        frames = []
        for _, emitted, table in batches:
            if table.num_rows:
                frame = table.to_pandas()
                frame["_emitted"] = emitted
                frames.append(frame)
        frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
        last = max((t for _, t, table in batches if table.num_rows), default=float("nan"))
        seconds = last - started
        steps = [
            p["durationMs"]["triggerExecution"] / 1000 for p in progress if p["numInputRows"] > 0
        ]
        return RunResult(
            label,
            seconds,
            self.workload.events / seconds,
            check_output(frame, self.workload.expected) if len(frame) else "no output",
            lag=last - released[-1] if released else float("nan"),
            input_lag=_input_done(batches, progress, self.workload.events + 1) - released[-1]
            if released
            else float("nan"),
            steps=steps,
            frame=frame,
        )


def _input_done(
    batches: list[tuple[int, float, pa.Table]], progress: list[Any], total_rows: int
) -> float:
    """When the micro-batch that read the last input row had written its output."""
    written = {batch_id: at for batch_id, at, _ in batches}
    rows = 0
    for report in sorted(progress, key=lambda p: p["batchId"]):
        rows += report["numInputRows"]
        if rows >= total_rows:
            return written.get(report["batchId"], float("nan"))
    return float("nan")
