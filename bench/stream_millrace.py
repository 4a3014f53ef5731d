"""The Millrace side of bench/stream_flight_delays.py: the flight-delays job on one embedded
cluster (MiniCluster) sharing the benchmark's SparkSession.

Pipeline (as examples/flight_delays.py): source -> ``where(dep_delay is not null)`` ->
``key_by(carrier)`` -> 1-day tumbling event-time windows -> count and avg -> ParquetSink
(exactly once: files are staged at each write and renamed into place when a checkpoint
completes, or at the end of a bounded job). Emit times come from the committed files: the
modification time is when the rows were written (staged), the status-change time (ctime, set
by the rename) when they were committed, i.e. became visible.

``TimedReplaySource`` is ReplaySource with a note of the wall time at which each stripe starts
releasing records; it lives in this module (imported by name, so it travels to the in-process
TaskManagers by reference and fills this module's ``STRIPE_STARTS``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
from stream_metrics import (
    RunResult,
    TaskLogProfile,
    Workload,
    check_output,
    close_times_striped,
    window_end_ms,
)

from millrace import (
    Configuration,
    FileSource,
    ParquetSink,
    ReplaySource,
    StreamExecutionEnvironment,
    tumbling,
)
from millrace.api.connector.source import SourceReaderContext
from millrace.connectors.replay_source import ReplaySourceReader
from millrace.runtime.job_result import JobResultSuccess
from millrace.runtime.minicluster import MiniCluster
from millrace.spark.spark_task_runtime import SparkTaskRuntime

STRIPE_STARTS: dict[int, float] = {}  # stripe index -> wall time its first record was due
INPUT_DONE: list[float] = []  # per reader: wall time its last bundle had been processed
FIRST_BUNDLE: list[float] = []  # per reader: wall time it returned its first bundle


@dataclass(frozen=True)
class TimedReplaySource(ReplaySource):
    """ReplaySource noting when each stripe starts (bench only)."""

    def create_reader(self, context: SourceReaderContext) -> ReplaySourceReader:
        return _TimedReplayReader(self, context)


class _TimedReplayReader(ReplaySourceReader):
    _reading = False  # has stripes not yet noted as done
    _polled = False  # has returned a bundle

    def add_split(self, split: Any, position: int) -> None:
        super().add_split(split, position)
        self._reading = True
        started = self._stripes[-1].started  # monotonic; ReplaySource paces from it
        index = int(split.path.rsplit("#stripe", 1)[1].split("of")[0])
        STRIPE_STARTS[index] = time.time() - (time.monotonic() - started)

    def poll(self, timeout: float) -> Any:
        bundle = super().poll(timeout)
        if bundle is not None and not self._polled:
            self._polled = True
            FIRST_BUNDLE.append(time.time())
        return bundle

    def is_finished(self) -> bool:
        # The source task asks this after processing each bundle: the first True after the
        # last record was released marks the end of this reader's input processing.
        finished = super().is_finished()
        if finished and self._reading:
            self._reading = False
            INPUT_DONE.append(time.time())
        return finished


class MillraceContender:
    """Runs the Millrace job, one run at a time, on one MiniCluster.

    Args:
        spark: The shared SparkSession.
        workload: The stream and the expected result.
        input_dir: The monthly Parquet files.
        work: Scratch directory (io.tmp.dirs, outputs).
        out_of_orderness: Millrace duration of the watermark delay, e.g. ``"1 h"``.
        disorder_ms: The replay's largest event-time delay (ReplaySource.max_disorder_ms).
        stripes: ReplaySource stripes.
        timeout: Seconds a job may take.
        profile: Collects the task logs' timings.

    Threading:
        One thread.
    """

    def __init__(
        self,
        spark: Any,
        workload: Workload,
        input_dir: str,
        work: Path,
        *,
        out_of_orderness: str,
        disorder_ms: int,
        stripes: int,
        timeout: float,
        profile: TaskLogProfile,
    ) -> None:
        self.spark = spark
        self.workload = workload
        self.input_dir = input_dir
        self.work = work
        self.out_of_orderness = out_of_orderness
        self.disorder_ms = disorder_ms
        self.stripes = stripes
        self.timeout = timeout
        self.profile = profile
        self.base = {
            "io.tmp.dirs": str(work / "millrace-tmp"),
            "pipeline.side-output.dir": str(work / "millrace-side-outputs"),
        }
        self._runs = 0
        self.cluster = MiniCluster(
            Configuration(self.base), SparkTaskRuntime(Configuration(self.base), given=spark)
        ).start()

    def close(self) -> None:
        self.cluster.close()

    def run_files(
        self, label: str, parallelism: int, max_records: int, checkpoint_interval: float
    ) -> RunResult:
        """FileSource over the monthly files at ``parallelism``, bundles of up to
        ``max_records`` rows.

        Time: from submission to the last window row committed.
        """
        started = time.time()
        source = FileSource.parquet(self.input_dir)
        out = self._run(source, parallelism, max_records, checkpoint_interval)
        frame = read_committed(out)
        last = float(frame["_committed"].max()) if len(frame) else float("nan")
        seconds = last - started
        return RunResult(
            label,
            seconds,
            self.workload.events / seconds,
            check_output(frame, self.workload.expected) if len(frame) else "no output",
            profile=self.profile.take(),
            frame=frame,
        )

    def run_rate(
        self,
        label: str,
        parallelism: int,
        rate: float,
        checkpoint_interval: float,
        columns: tuple[str, ...] | None = None,
    ) -> RunResult:
        """TimedReplaySource at ``rate`` events/s over ``stripes`` stripes, at ``parallelism``
        (default bundles: whatever was released since the last bundle, up to
        execution.bundle.max-records).

        Time: from the first stripe's start to the last window row committed.
        """
        STRIPE_STARTS.clear()
        INPUT_DONE.clear()
        FIRST_BUNDLE.clear()
        source = TimedReplaySource(
            self.input_dir,
            "time_hour",
            rate=rate,
            stripes=self.stripes,
            max_disorder_ms=self.disorder_ms,
            columns=columns,
        )
        out = self._run(source, parallelism, None, checkpoint_interval)
        frame = read_committed(out)
        profile = self.profile.take()
        label = f"{label} @ {rate:,.0f}/s"
        if len(frame) == 0 or len(STRIPE_STARTS) != self.stripes:
            return RunResult(label, float("nan"), float("nan"), "no output", profile=profile)
        stripe_rate = rate / self.stripes
        rows = self.workload.events
        ends = {
            i: s + len(range(i, rows, self.stripes)) / stripe_rate for i, s in STRIPE_STARTS.items()
        }
        first, replay_end = min(STRIPE_STARTS.values()), max(ends.values())
        # the reader loads each stripe (reads and sorts every file) before it starts it, and
        # takes all its stripes before its first poll: the replay's clock runs meanwhile
        profile["replay start-up s"] = [max(FIRST_BUNDLE) - first] if FIRST_BUNDLE else []
        last = float(frame["_committed"].max())
        closes = close_times_striped(
            window_end_ms(frame), self.workload, STRIPE_STARTS, stripe_rate
        )
        return RunResult(
            label,
            last - first,
            rows / (last - first),
            check_output(frame, self.workload.expected),
            lag=last - replay_end,
            input_lag=max(INPUT_DONE) - replay_end if INPUT_DONE else float("nan"),
            latency={
                "commit": frame["_committed"].to_numpy() - closes,
                "write": frame["_written"].to_numpy() - closes,
            },
            profile=profile,
            frame=frame,
            closes=closes,
            replay=(first, replay_end),
        )

    def _run(
        self, source: Any, parallelism: int, max_records: int | None, checkpoint_interval: float
    ) -> Path:
        from pyspark.sql import functions as F

        self._runs += 1
        out = self.work / f"millrace-{self._runs:03d}-out"
        settings: dict[str, object] = {
            **self.base,
            "parallelism.default": parallelism,
            "execution.checkpointing.interval": checkpoint_interval,
        }
        if max_records is not None:
            settings["execution.bundle.max-records"] = max_records
        env = StreamExecutionEnvironment(Configuration(settings), self.spark)
        (
            env.from_source(
                source, event_time="time_hour", max_out_of_orderness=self.out_of_orderness
            )
            .transform(
                lambda df: df.where(F.col("dep_delay").isNotNull()).select(
                    "carrier", "time_hour", "dep_delay"
                ),
                name="departed",
            )
            .key_by("carrier")
            .window(tumbling("1 day"))
            .agg(F.count("*").alias("flights"), F.avg("dep_delay").alias("avg_dep_delay"))
            .sink_to(ParquetSink(str(out)))
        )
        graph = env.get_job_graph(f"stream-flight-delays-{self._runs}")
        result = self.cluster.job_client.submit_job_wait(graph).result(self.timeout)
        if not isinstance(result, JobResultSuccess):
            raise RuntimeError(f"Millrace job failed: {result}")
        return out


def read_committed(directory: Path) -> pd.DataFrame:
    """The committed ``part-*.parquet`` rows with ``_written`` (mtime) and ``_committed``
    (ctime: the commit's rename) as epoch seconds."""
    frames = []
    for path in sorted(directory.glob("part-*.parquet")):
        stat = path.stat()
        frame = pq.read_table(path).to_pandas()
        frame["_written"] = stat.st_mtime
        frame["_committed"] = stat.st_ctime
        frames.append(frame)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
