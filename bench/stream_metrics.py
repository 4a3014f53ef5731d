"""Shared measures of the streaming flight-delays benchmark (bench/stream_flight_delays.py).

The workload, the moment each window could close, end-to-end latency, the check against pandas,
and the profile read from Millrace's task logs. Both contenders are measured with these same
functions; nothing here imports Spark.
"""

from __future__ import annotations

import logging
import re
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # tests.integration.helpers holds the pandas reference
    sys.path.insert(0, str(ROOT))

from tests.integration.helpers import (  # noqa: E402
    assert_same_result,
    expected_flight_delays,
    read_flights,
)

DAY_MS = 86_400_000
END_CARRIER = "~end-of-stream"  # the peer's end-of-stream row (see sentinel_table)


@dataclass(frozen=True)
class Workload:
    """The replayed stream: the flights in release order and what closes each window.

    Attributes:
        table: Every flight, in the order the replay releases them (event time plus a seeded
            delay of up to ``disorder_ms``; ReplaySource with one stripe).
        event_ms: ``time_hour`` of ``table`` in epoch ms.
        out_of_orderness_ms: Allowed out-of-orderness of both engines' watermarks.
        expected: The pandas result (one row per carrier and day).
    """

    table: pa.Table
    event_ms: np.ndarray
    out_of_orderness_ms: int
    expected: pd.DataFrame

    @property
    def events(self) -> int:
        return self.table.num_rows


def load_workload(input_dir: str, disorder_ms: int, out_of_orderness_ms: int) -> Workload:
    """The replay order of ReplaySource (same seed, one stripe) and the expected result."""
    from millrace import ReplaySource

    table = ReplaySource(input_dir, "time_hour", rate=1, stripes=1, max_disorder_ms=disorder_ms)
    ordered = table.stripe(0)
    event_ms = ordered.column("time_hour").cast(pa.timestamp("ms")).cast(pa.int64()).to_numpy()
    expected = expected_flight_delays(read_flights(Path(input_dir)))
    return Workload(ordered, event_ms, out_of_orderness_ms, expected)


def sentinel_table(workload: Workload) -> pa.Table:
    """One departed flight of carrier END_CARRIER a day after the last window's end: it moves
    the peer's watermark past every window of the data, as the end of a bounded Millrace source
    does; its own window never closes, so it never reaches the output."""
    schema = workload.table.schema
    last_end = pd.to_datetime(workload.expected["window_end"], utc=True).max()
    values = {
        "carrier": [END_CARRIER],
        "dep_delay": [0.0],
        "time_hour": [last_end + pd.Timedelta(days=1)],
    }
    arrays = [
        pa.array(values[f.name], f.type) if f.name in values else pa.nulls(1, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(arrays, schema=schema)


def close_thresholds(window_end_ms: np.ndarray, workload: Workload) -> np.ndarray:
    """Event time whose arrival lets a window close: its end plus the out-of-orderness (the
    watermark, max event time minus out-of-orderness, then reaches the window's end; the events
    are on whole hours, so Millrace's ``end - 1 ms`` and Spark's ``end`` rule agree)."""
    return window_end_ms + workload.out_of_orderness_ms


def close_times_chunked(
    window_end_ms: np.ndarray, workload: Workload, chunk_rows: int, released_at: list[float]
) -> np.ndarray:
    """Wall time (s) at which each window could close when the stream is released in chunks
    of ``chunk_rows`` events, chunk k at ``released_at[k]`` (the peer's files): the release of
    the chunk holding the first event at or past the window's threshold, else of the last."""
    running = np.maximum.accumulate(workload.event_ms)
    first = np.searchsorted(running, close_thresholds(window_end_ms, workload), side="left")
    chunk = np.minimum(first // chunk_rows, len(released_at) - 1)
    return np.asarray(released_at)[chunk]


def close_times_striped(
    window_end_ms: np.ndarray, workload: Workload, starts: dict[int, float], stripe_rate: float
) -> np.ndarray:
    """Wall time (s) at which each window could close under ReplaySource's pacing: stripe i
    (rows i, i+S, ... of the release order) releases its record k at
    ``starts[i] + (k + 1) / stripe_rate``; the watermark is the minimum over the stripes
    (per-split watermarks), so a window closes once every stripe has released an event at or
    past its threshold, or has ended."""
    stripes = len(starts)
    thresholds = close_thresholds(window_end_ms, workload)
    latest = np.full(len(window_end_ms), -np.inf)
    for index, started in starts.items():
        running = np.maximum.accumulate(workload.event_ms[index::stripes])
        first = np.searchsorted(running, thresholds, side="left")
        released = started + np.minimum(first + 1, len(running)) / stripe_rate
        latest = np.maximum(latest, released)
    return latest


def window_end_ms(frame: pd.DataFrame) -> np.ndarray:
    """``window_end`` of an output frame as epoch ms."""
    ends = pd.to_datetime(frame["window_end"], utc=True)
    return ((ends - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(milliseconds=1)).to_numpy()


def percentiles(values: np.ndarray) -> tuple[float, float]:
    """(p50, p99) of ``values``; NaNs if empty."""
    if len(values) == 0:
        return float("nan"), float("nan")
    return float(np.percentile(values, 50)), float(np.percentile(values, 99))


def check_output(actual: pd.DataFrame, expected: pd.DataFrame) -> str:
    """'ok' if ``actual`` holds exactly pandas' rows (5,430), else what differs."""
    columns = ["carrier", "window_start", "window_end", "flights", "avg_dep_delay"]
    try:
        frame = actual[columns].sort_values(["carrier", "window_start"], ignore_index=True)
        for name in ("window_start", "window_end"):
            frame[name] = pd.to_datetime(frame[name], utc=True).astype(expected[name].dtype)
        assert_same_result(frame, expected)
    except AssertionError as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else "mismatch"
        return f"{len(actual)} rows, expected {len(expected)}: {first[:80]}"
    return "ok"


@dataclass
class RunResult:
    """One run of one contender.

    Attributes:
        contender: Row label.
        seconds: Time from the start of the stream to its last window row visible.
        events_per_s: Events / seconds.
        check: 'ok' or what differs from pandas.
        lag: Seconds from the release of the last event to the last window row visible.
        input_lag: Seconds from the release of the last event until every event had been
            processed (the peer's micro-batch holding it written; Millrace's last source
            bundle done); replays only.
        latency: Name -> per-window latencies (s), e.g. 'commit', 'write'.
        steps: Durations (s) of the engine's units of work (micro-batches, bundles).
        profile: Free-form timings (Millrace: bundles, firings, checkpoints from its logs).
        frame: The output rows with the times they were emitted (``_emitted``, ...).
        closes: Per output row, when the window could close (wall time, s); replays only.
        replay: (start, end) wall times of the replay; replays only.
    """

    contender: str
    seconds: float
    events_per_s: float
    check: str
    lag: float = float("nan")
    input_lag: float = float("nan")
    latency: dict[str, np.ndarray] = field(default_factory=dict)
    steps: list[float] = field(default_factory=list)
    profile: dict[str, list[float]] = field(default_factory=dict)
    frame: pd.DataFrame | None = None
    closes: np.ndarray | None = None
    replay: tuple[float, float] | None = None

    def latency_growth(self, name: str) -> float:
        """Median ``name`` latency of the windows that close in the last third of the replay
        minus that of the windows closing in its first third (s): about 0 for an engine that
        keeps up, (R / capacity - 1) x 2/3 of the replay's duration for one that does not.
        Windows closed only by the end of the stream are left out."""
        if self.closes is None or self.replay is None or name not in self.latency:
            return float("nan")
        start, end = self.replay
        third = (end - start) / 3
        values = self.latency[name]
        early = values[self.closes < start + third]
        late = values[(self.closes >= end - third) & (self.closes < end)]
        if len(early) == 0 or len(late) == 0:
            return float("nan")
        return float(np.median(late) - np.median(early))


def median(values: list[float]) -> float:
    clean = [v for v in values if v == v]
    return statistics.median(clean) if clean else float("nan")


# Millrace's task logs ------------------------------------------------------------------------

_PATTERNS = {
    "source bundle s": re.compile(r": bundle \d+ \(\d+ splits\) in ([0-9.]+) s"),
    "window firing s": re.compile(r": fired at watermark -?\d+: .* files in ([0-9.]+) s"),
    "state snapshot s": re.compile(r": checkpoint \d+: \d+ rows of state in ([0-9.]+) s"),
    "checkpoint complete s": re.compile(r"checkpoint \d+ complete in (\d+) ms"),
}


class TaskLogProfile(logging.Handler):
    """Collects the per-bundle, per-firing and per-checkpoint times Millrace's tasks log at
    INFO (the same lines its log files under ``<io.tmp.dirs>/log`` hold)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.times: dict[str, list[float]] = {name: [] for name in _PATTERNS}

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        for name, pattern in _PATTERNS.items():
            match = pattern.search(message)
            if match:
                value = float(match.group(1))
                self.times[name].append(value / 1000 if name.endswith("complete s") else value)

    def take(self) -> dict[str, list[float]]:
        taken, self.times = self.times, {name: [] for name in _PATTERNS}
        return taken
