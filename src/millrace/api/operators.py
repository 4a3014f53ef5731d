"""Descriptors of the stream operators that a JobVertex chains.

The JobGraph generator turns the user's transformations into these; ``millrace.spark`` executes
them, one Spark job per bundle for the whole chain. They hold user objects (functions, Spark
columns) and are opaque to the control plane.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from millrace.api.windows import WindowAssigner

__all__ = [
    "KeyedAggregateOperator",
    "KeyedRecordsOperator",
    "LocalKeyedAggregateOperator",
    "LocalWindowAggregateOperator",
    "PandasWindowFunction",
    "SinkOperator",
    "SourceOperator",
    "TransformOperator",
    "WindowAggregateOperator",
    "WindowAssignOperator",
]


@dataclass(frozen=True)
class SourceOperator:
    """Reads input splits of ``source``; assigns event time from column ``event_time``.

    Args:
        source: A source connector (``millrace.sources``).
        event_time: Timestamp column holding each record's event time, or None.
        max_out_of_orderness_ms: Bounded disorder within a split (ms) for its watermark.
        name: Operator name shown in the UI.
        idle_timeout_ms: A subtask that read no record for this long (ms) goes idle, or None
            to stay active while it has splits (Flink's ``withIdleness``).
    """

    source: Any
    event_time: str | None
    max_out_of_orderness_ms: int
    name: str
    idle_timeout_ms: int | None = None


@dataclass(frozen=True)
class TransformOperator:
    """Applies ``fn``: pyspark DataFrame -> DataFrame to each bundle."""

    fn: Callable[[Any], Any]
    name: str


@dataclass(frozen=True)
class WindowAssignOperator:
    """Adds the window start of each record (buffered windows: non-decomposable aggregates,
    pandas window functions); records are then partitioned by the key group of ``keys``.
    Records whose window is past ``lateness_ms`` at the source's watermark go to the late
    side output."""

    keys: tuple[str, ...]
    window: WindowAssigner
    event_time: str
    lateness_ms: int = 0


@dataclass(frozen=True)
class LocalWindowAggregateOperator:
    """Pre-aggregates each bundle per (key, window) before the exchange (local-global);
    session windows of a key are merged within the bundle."""

    keys: tuple[str, ...]
    window: WindowAssigner
    event_time: str
    plan: Any  # millrace.spark.aggregation.AggregatePlan
    lateness_ms: int = 0


@dataclass(frozen=True)
class PandasWindowFunction:
    """A pandas function over each fired (key, window)'s rows (Flink's ProcessWindowFunction),
    run by Spark's ``groupBy(keys, window).applyInPandas(fn, schema)``.

    Args:
        fn: ``pandas.DataFrame -> pandas.DataFrame`` (or ``(key, pdf) -> pdf``, as
            applyInPandas takes).
        schema: The output rows' schema: a DDL string or a ``StructType``.
    """

    fn: Callable[..., Any]
    schema: Any


@dataclass(frozen=True)
class WindowAggregateOperator:
    """Keyed window operator: keeps state per (key, window); fires when the watermark passes.

    ``plan.decomposable`` tells whether its input holds partial aggregates (merged on firing) or
    raw records with a window start (aggregated by Spark on firing); with ``function`` (and
    no plan) the records are buffered and the pandas function runs on firing. A window fires
    when the watermark reaches its end - 1 and stays in state ``lateness_ms`` longer: records
    arriving for it meanwhile fire it again (Flink's allowedLateness).
    """

    keys: tuple[str, ...]
    window: WindowAssigner
    plan: Any  # millrace.spark.aggregation.AggregatePlan, or None with ``function``
    name: str
    lateness_ms: int = 0
    function: PandasWindowFunction | None = None


@dataclass(frozen=True)
class LocalKeyedAggregateOperator:
    """Pre-aggregates each bundle per key before the exchange (local-global, no window)."""

    keys: tuple[str, ...]
    plan: Any  # millrace.spark.aggregation.AggregatePlan


@dataclass(frozen=True)
class KeyedRecordsOperator:
    """Partitions records by the key group of ``keys`` (a running aggregate that does not
    decompose: the keyed side keeps the records)."""

    keys: tuple[str, ...]


@dataclass(frozen=True)
class KeyedAggregateOperator:
    """Running keyed aggregate: keeps partial aggregates (or records) per key in keyed state.

    Attributes:
        keys: Key columns.
        plan: ``millrace.spark.aggregation.AggregatePlan``; ``plan.decomposable`` tells whether
            the input holds partials or records.
        name: Operator name.
        bounded: Every source of the job is bounded: emit one final row per key at the end of
            input only. Otherwise emit the changed keys at every checkpoint barrier (and, with
            checkpointing off, after every batch of input).
    """

    keys: tuple[str, ...]
    plan: Any
    name: str
    bounded: bool


@dataclass(frozen=True)
class SinkOperator:
    """Writes each bundle to ``sink`` (``millrace.connectors``).

    Attributes:
        sink: The connector (``millrace.api.connector.sink.Sink``).
        name: Operator name.
        side_output: For a source's side-output sink, which one (``dead-letters`` or
            ``late``; ``millrace.spark.side_outputs``); None for the chain's own output.
    """

    sink: Any
    name: str
    side_output: str | None = None
