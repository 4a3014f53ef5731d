"""Helpers of the end-to-end tests: run jobs on a MiniCluster, compute expectations in pandas."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from tests.rows import assert_same_rows

ROOT = Path(__file__).resolve().parents[2]


def load_example(name: str) -> ModuleType:
    """Import ``examples/<name>.py`` as a module."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read_output(
    directory: Path, order: tuple[str, ...] = ("carrier", "window_start")
) -> pd.DataFrame:
    """The committed ``part-*.parquet`` files of a ParquetSink, sorted by ``order``."""
    files = sorted(directory.glob("part-*.parquet"))
    assert files, f"no committed output under {directory}"
    frame = pd.concat([pq.read_table(f).to_pandas() for f in files], ignore_index=True)
    return frame.sort_values(list(order), ignore_index=True)


def expected_flight_delays(flights: pd.DataFrame) -> pd.DataFrame:
    """The flight-delays job in pandas: departed flights per carrier and UTC day."""
    departed = flights[flights["dep_delay"].notna()].copy()
    departed["window_start"] = departed["time_hour"].dt.floor("D")
    out = departed.groupby(["carrier", "window_start"], as_index=False).agg(
        flights=("dep_delay", "size"), avg_dep_delay=("dep_delay", "mean")
    )
    out["window_end"] = out["window_start"] + pd.Timedelta(days=1)
    return out.sort_values(["carrier", "window_start"], ignore_index=True)


def read_flights(directory: Path) -> pd.DataFrame:
    return pd.concat(
        [pq.read_table(f).to_pandas() for f in sorted(directory.glob("*.parquet"))],
        ignore_index=True,
    )


def assert_same_result(actual: pd.DataFrame, expected: pd.DataFrame) -> None:
    """The flight-delays output: its columns in order, and exactly the expected rows as a
    multiset (``tests.rows.assert_same_rows``: exact counts and window ends, averages within
    1e-9; a duplicated window fails)."""
    assert list(actual.columns) == [
        "carrier",
        "window_start",
        "window_end",
        "flights",
        "avg_dep_delay",
    ]
    assert_same_rows(actual, expected)


JOIN_ORDER = ["time_hour", "carrier", "flight", "origin", "tailnum"]
"""Columns that order the rows of the flights-weather join (one row per flight)."""


def expected_flights_weather(flights_dir: Path, weather_dir: Path) -> pd.DataFrame:
    """``examples/flights_weather.py`` in pandas: each flight with the weather of its origin
    in its hour (1-hour tumbling windows), with the example's columns."""
    example = load_example("flights_weather")
    f = read_flights(flights_dir)[list(example.FLIGHT_COLUMNS)]
    w = read_flights(weather_dir)[list(example.WEATHER_COLUMNS)]
    w = w.assign(time_hour_right=w["time_hour"], window_start=w["time_hour"].dt.floor("h"))
    f = f.assign(window_start=f["time_hour"].dt.floor("h"))
    out = f.merge(w.drop(columns="time_hour"), on=["origin", "window_start"])
    out["window_end"] = out["window_start"] + pd.Timedelta(hours=1)
    columns = [*example.FLIGHT_COLUMNS, "time_hour_right"]
    columns += [c for c in example.WEATHER_COLUMNS if c not in ("origin", "time_hour")]
    return out[[*columns, "window_start", "window_end"]]


def assert_rows_equal(actual: pd.DataFrame, expected: pd.DataFrame, order: list[str]) -> None:
    """``actual`` (sorted by ``order``) has ``expected``'s rows and columns, in that order."""
    expected = expected.sort_values(order, ignore_index=True)
    assert list(actual.columns) == list(expected.columns)
    pd.testing.assert_frame_equal(actual, expected[actual.columns], check_dtype=False)


@dataclass(frozen=True)
class CliResult:
    """Outcome of one ``millrace`` process.

    Attributes:
        leftover: ``ps`` lines of the processes of its group that outlived it (e.g. Spark's
            JVM), empty if none did.
    """

    returncode: int
    stdout: str
    stderr: str
    leftover: str


def live_group_members(pgid: int) -> str:
    """``ps`` lines of the live (not zombie) processes of process group ``pgid``."""
    table = subprocess.run(
        ["ps", "-eo", "pid=,pgid=,stat=,args="],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    rows = [line.split(None, 3) for line in table.splitlines()]
    return "\n".join(
        " ".join(r) for r in rows if len(r) >= 3 and r[1] == str(pgid) and not r[2].startswith("Z")
    )


def run_cli(args: list[str], cwd: Path, timeout: float = 600) -> CliResult:
    """Run ``millrace`` in its own process group; kill the group if it overruns or leaves
    processes behind (reported in ``leftover``)."""
    exe = ROOT / ".venv" / "bin" / "millrace"
    process = subprocess.Popen(
        [str(exe), *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={**os.environ, "COLUMNS": "160"},
    )
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate(timeout=30)
    leftover = ""
    for _ in range(20):  # up to 2 s for children to notice their parent is gone
        leftover = live_group_members(process.pid)
        if not leftover:
            break
        time.sleep(0.1)
    if leftover:
        os.killpg(process.pid, signal.SIGKILL)
    return CliResult(process.returncode, out, err, leftover)


def held_at_december(gate: Path) -> Callable[[Any], Any]:
    """A ``transform`` that holds every batch of December's flights until the file ``gate``
    exists (``mapInArrow``; at most 300 s): a failover test's job cannot end before the test
    has crashed its TaskManager, however fast the first eleven months go. The test creates
    ``gate`` after the crash, and the restored job runs to its end. Once it holds, the file
    ``<gate>.held`` holds the PID of the (Spark Python worker) process holding."""
    path = str(gate)

    def transform(frame: Any) -> Any:
        def hold(batches: Any) -> Any:
            import os as _os
            import time as _time

            import pyarrow.compute as pc

            for batch in batches:
                if batch.num_rows and pc.max(batch.column("month")).as_py() == 12:
                    with open(path + ".held", "w") as marker:  # holding now, in this process
                        marker.write(str(_os.getpid()))
                    deadline = _time.monotonic() + 300
                    while not _os.path.exists(path) and _time.monotonic() < deadline:
                        _time.sleep(0.05)
                yield batch

        return frame.mapInArrow(hold, frame.schema)

    return transform


def build_flight_delays_held(env: Any, flights_dir: Path, output_dir: Path, gate: Path) -> None:
    """``examples/flight_delays.py``'s job with December held at the source until ``gate``
    exists (``held_at_december``)."""
    from pyspark.sql import functions as F

    from millrace import FileSource, ParquetSink, tumbling

    example = load_example("flight_delays")
    (
        env.from_source(
            FileSource.parquet(str(flights_dir)),
            event_time="time_hour",
            max_out_of_orderness="1 h",
            name="flights",
        )
        .transform(held_at_december(gate), name="held at december")
        .transform(example.departed, name="departed")
        .key_by("carrier")
        .window(tumbling("1 day"))
        .agg(F.count("*").alias("flights"), F.avg("dep_delay").alias("avg_dep_delay"))
        .sink_to(ParquetSink(str(output_dir)))
    )


def build_replayed_flight_delays(env: Any, flights_dir: Path, output_dir: Path, rate: int) -> None:
    """The flight-delays job over a ReplaySource of ``flights_dir`` at ``rate`` events/s (4
    stripes, up to 1 h of disorder, the job's three columns), 6 h out-of-orderness."""
    from pyspark.sql import functions as F

    from millrace import ParquetSink, ReplaySource, tumbling

    source = ReplaySource(
        str(flights_dir),
        "time_hour",
        rate=rate,
        stripes=4,
        max_disorder_ms=3_600_000,
        columns=("carrier", "time_hour", "dep_delay"),
    )
    (
        env.from_source(source, event_time="time_hour", max_out_of_orderness="6 h")
        .transform(lambda df: df.where(F.col("dep_delay").isNotNull()))
        .key_by("carrier")
        .window(tumbling("1 day"))
        .agg(F.count("*").alias("flights"), F.avg("dep_delay").alias("avg_dep_delay"))
        .sink_to(ParquetSink(str(output_dir)))
    )


def offsets_read(storage: Any, location: str) -> int:
    """Records a checkpoint's source subtasks had read: the sum of their split positions (a
    Kafka partition's next offset). ``storage`` is a CheckpointStorage; raises CheckpointError
    if the checkpoint was subsumed and deleted meanwhile."""
    metadata = storage.read(location)
    return sum(
        s.position
        for vertex in metadata.vertices
        for subtask in vertex.subtasks.values()
        for s in subtask.split_states
    )
