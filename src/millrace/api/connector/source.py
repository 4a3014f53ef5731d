"""Sources: split enumeration in the JobMaster, split reading in the tasks (Flink's FLIP-27).

A :class:`Source` is a small, picklable description (it travels to the cluster as user code).
In the JobMaster, its :class:`SplitEnumerator` discovers the splits (files, Parquet row groups,
Kafka partitions, replay stripes) and hands them to the subtasks that ask for one
(RequestNextInputSplit, seed 000). In each source subtask, its :class:`SourceReader` reads the
assigned splits in bundles: each bundle is one lazy Spark DataFrame, which the task runs
together with the whole operator chain as one Spark job. Python handles bundles and positions,
never records one by one.

Checkpoints hold every split's position (``SplitState``): the reader reports them at the
barrier, the JobMaster keeps finished splits out of a restored enumeration and hands the others
out again starting at their positions; sources rewind (Kafka offsets, file rows).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Protocol

from millrace.config import Configuration
from millrace.runtime.io.input_split import InputSplit, SplitState
from millrace.runtime.metrics.operator_metric_group import OperatorMetricGroup
from millrace.runtime.source.split_enumerator import Boundedness, SplitEnumerator

__all__ = [
    "WHOLE_INPUT",
    "Boundedness",
    "Source",
    "SourceBundle",
    "SourceReader",
    "SourceReaderContext",
    "SplitEnumerator",
]


WHOLE_INPUT = sys.maxsize
"""``max_records`` of a reader in BATCH mode: no bundle limit. A reader then puts every split
it holds into one bundle, splits of unknown size included (one Spark scan, not a union of one
scan per split)."""


@dataclass(frozen=True)
class SourceReaderContext:
    """What a reader knows of the task running it.

    Attributes:
        subtask_index: The source subtask, 0-based.
        parallelism: The source's parallelism.
        max_records: Largest bundle, in records (``execution.bundle.max-records``), or
            ``WHOLE_INPUT`` (BATCH mode: every assigned split in one bundle).
        max_delay: Longest wait to fill a bundle of an unbounded source, seconds
            (``execution.bundle.max-delay``): a bundle closes at ``max_records`` or after this.
        configuration: The job's configuration.
        spark: The task's SparkSession (``pyspark.sql.SparkSession``).
        metric_group: The source operator's metric group (Flink's SourceReaderMetricGroup):
            the reader sets its gauges there on the task thread; the task publishes them.
        files_dir: A directory (path or fsspec URL) in the exchange store, this task attempt's
            own, for files the reader hands to Spark (which may read them on other hosts); it
            is removed with the job. None (a reader outside a task): the reader's own
            temporary directory, local.
    """

    subtask_index: int
    parallelism: int
    max_records: int
    max_delay: float
    configuration: Configuration
    spark: Any
    metric_group: OperatorMetricGroup = field(default_factory=OperatorMetricGroup)
    files_dir: str | None = None


@dataclass(frozen=True)
class SourceBundle:
    """One bundle of records, as one lazy Spark plan, and how far it moved each split.

    Attributes:
        frame: The records (``pyspark.sql.DataFrame``); nothing has run yet.
        progress: The new state of every split the bundle read from.
        split_column: Column of ``frame`` holding each record's split id, for per-split
            watermarks; None when every split read is finished by this bundle and the
            enumerator's bounds cover them (bounded file splits).
        malformed_reason: Column (string) saying why a record is malformed, null for good ones;
            None if the format cannot produce malformed records.
        raw_record: Column (string) with a malformed record's original text, or None.
        full_parse: Aggregate column that forces parsing every field (CSV), computed with the
            bundle; None if not needed.
        available_at_ms: Epoch ms at which the bundle's newest record became available to
            Millrace (broker append time, replay time), for end-to-end latency; None if
            unknown.
        internal_columns: Columns of ``frame`` the pipeline does not see (the raw record, the
            split column...): dropped once malformed records are set aside.
        scans_own_files: Whether ``frame`` scans files the reader wrote for Spark
            (``SourceReaderContext.files_dir``): their names mean nothing to users, so side
            outputs name the bundle's splits instead.
    """

    frame: Any
    progress: list[SplitState]
    split_column: str | None = None
    malformed_reason: Any = None
    raw_record: Any = None
    full_parse: Any = None
    available_at_ms: int | None = None
    internal_columns: tuple[str, ...] = ()
    scans_own_files: bool = False

    def rows_from_statistics(self, event_time: str | None) -> int | None:
        """The bundle's record count when file statistics give it and no record can be
        malformed, else None (the records must then be counted as they are read).

        Known when the format cannot produce malformed records, every split is read whole in
        this bundle with its row count in the statistics, the bundle does not name each
        record's split (no per-split watermark to find), and with ``event_time`` every split's
        statistics say that column has no null (``InputSplit.min_event_time_ms`` is known):
        Parquet files and row groups written with statistics.
        """
        if (
            self.malformed_reason is not None
            or self.full_parse is not None
            or self.split_column is not None
        ):
            return None
        splits = [state.split for state in self.progress]
        if any(not state.finished or state.position != 0 for state in self.progress):
            return None
        if any(s.rows is None for s in splits):
            return None
        if event_time is not None and any(s.min_event_time_ms is None for s in splits):
            return None
        return sum(s.rows or 0 for s in splits)


class SourceReader(Protocol):
    """Reads the splits assigned to one source subtask, in bundles.

    Threading:
        The source task's thread only.
    """

    def add_split(self, split: InputSplit, position: int) -> None:
        """A split to read, starting at ``position`` (0, or a restored checkpoint's)."""
        ...

    def wants_splits(self) -> bool:
        """Whether the task should ask the JobMaster for a split now (e.g. nothing assigned
        yet, or less queued than a full bundle)."""
        ...

    def poll(self, timeout: float) -> SourceBundle | None:
        """The next bundle, or None if no record is available within ``timeout`` seconds.

        Raises:
            Exception: A failure reading the source fails the task (the job restarts from
                its last checkpoint).
        """
        ...

    def snapshot(self) -> list[SplitState]:
        """The state of every assigned split not yet finished, as of the last bundle returned
        (what a checkpoint taken now must resume from)."""
        ...

    def is_finished(self) -> bool:
        """True when every assigned split is finished (a bounded source's reader then asks
        for more splits or ends)."""
        ...

    def close(self) -> None:
        """Release connections and files."""
        ...


class Source(Protocol):
    """A source connector.

    Threading:
        Built by the user's script; ``create_enumerator`` is called in the JobMaster's I/O
        executor, ``create_reader`` on a source task's thread.
    """

    @property
    def boundedness(self) -> Boundedness: ...

    def describe(self) -> str:
        """Short human description, e.g. ``parquet files at /data/flights``."""
        ...

    def create_enumerator(self, event_time: str | None) -> SplitEnumerator:
        """The JobMaster-side enumerator.

        Args:
            event_time: The event-time column, if the pipeline has one (bounded file sources
                read minimum event times from file statistics to bound watermarks).
        """
        ...

    def create_reader(self, context: SourceReaderContext) -> SourceReader:
        """The task-side reader of one subtask."""
        ...
