"""Input splits, their read positions, and the JobMaster's reply to RequestNextInputSplit.

Sources enumerate splits on the JobMaster (files, row groups of Parquet files, Kafka
partitions) and subtasks pull them one at a time, so fast subtasks take more work (seed 000;
Flink's InputSplitAssigner). A split's read position travels in checkpoints (``SplitState``),
so a restored job resumes every split where the checkpoint left it (Flink's FLIP-27 split
state).
"""

from __future__ import annotations

from dataclasses import dataclass

from millrace.runtime.io.partition_events import MIN_WATERMARK

__all__ = ["InputSplit", "NextInputSplit", "SplitState"]


@dataclass(frozen=True)
class InputSplit:
    """A unit of source input.

    Attributes:
        split_number: Position in the source's enumeration.
        path: File path or URL.
        row_group: Parquet row group index, or None for the whole file.
        min_event_time_ms: Smallest event time in the split from file statistics (epoch ms), or
            None when unknown; known only where the statistics say the event-time column has
            no null (``SourceBundle.rows_from_statistics`` relies on this).
        rows: Row count from statistics, or None.
        end_position: Where a bounded split ends (exclusive, in the source's positions, e.g.
            the Kafka offset to read up to), fixed when the split is discovered; None: to the
            end of the file, or never (unbounded).
        start_position: Where reading starts unless a restored checkpoint says otherwise (in
            the source's positions, e.g. the latest Kafka offset when the partition was
            discovered), fixed at discovery; None: the reader's default start.
    """

    split_number: int
    path: str
    row_group: int | None = None
    min_event_time_ms: int | None = None
    rows: int | None = None
    end_position: int | None = None
    start_position: int | None = None

    def describe(self) -> str:
        return self.path if self.row_group is None else f"{self.path}#rg{self.row_group}"

    @property
    def split_id(self) -> str:
        """Stable identity of the split across enumerations and restarts (``describe()``)."""
        return self.describe()


@dataclass(frozen=True)
class SplitState:
    """How far a split has been read: part of a source subtask's checkpointed state.

    Attributes:
        split: The split.
        position: Source-defined offset of the next record to read: a Kafka offset, a row index
            within a file or replay stripe; 0 before any record.
        finished: True once the split has been read to its end (bounded splits).
        watermark_ms: The split's own watermark when the state was taken (the largest event
            time read from it minus the out-of-orderness minus 1 ms; the minimum before any
            record), epoch ms. Restored with the split, so that a split with nothing new to
            read does not hold its subtask's watermark below where it stood (a rescaled or
            restored job fires its windows as the failure-free run would).
    """

    split: InputSplit
    position: int = 0
    finished: bool = False
    watermark_ms: int = MIN_WATERMARK


@dataclass(frozen=True)
class NextInputSplit:
    """Reply to RequestNextInputSplit.

    Attributes:
        split: The next split, or None when the source is exhausted.
        watermark_bound_ms: No split this subtask may still receive, including ``split``, holds
            an event time below ``watermark_bound_ms + 1``: the smallest known minimum event time
            of the splits not yet finished by assignment, minus 1; MIN_WATERMARK if any such
            split's minimum is unknown; MAX_WATERMARK when exhausted.
        splits_total: Number of splits of the source.
        splits_assigned: Splits assigned so far (including this one).
        position: Where to start reading ``split`` (a restored checkpoint's position, else 0).
        split_watermark_ms: The restored split's own watermark (``SplitState.watermark_ms``);
            the minimum for a split read from its start.
        more_expected: With ``split`` None: True if splits may still come (an unbounded source
            discovering them): ask again later; False if the source is exhausted.
    """

    split: InputSplit | None
    watermark_bound_ms: int
    splits_total: int = 0
    splits_assigned: int = 0
    position: int = 0
    more_expected: bool = False
    split_watermark_ms: int = MIN_WATERMARK
