"""Input splits and the JobMaster's reply to RequestNextInputSplit (seed 000).

Sources enumerate splits on the JobMaster (files, or row groups of Parquet files) and subtasks
pull them one at a time, so fast subtasks take more work (Flink's InputSplitAssigner).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["InputSplit", "NextInputSplit"]


@dataclass(frozen=True)
class InputSplit:
    """A unit of source input.

    Attributes:
        split_number: Position in the source's enumeration.
        path: File path or URL.
        row_group: Parquet row group index, or None for the whole file.
        min_event_time_ms: Smallest event time in the split from file statistics (epoch ms), or
            None when unknown.
        rows: Row count from statistics, or None.
    """

    split_number: int
    path: str
    row_group: int | None = None
    min_event_time_ms: int | None = None
    rows: int | None = None

    def describe(self) -> str:
        return self.path if self.row_group is None else f"{self.path}#rg{self.row_group}"


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
    """

    split: InputSplit | None
    watermark_bound_ms: int
    splits_total: int = 0
    splits_assigned: int = 0
