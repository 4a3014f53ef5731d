"""FileSplitEnumerator: hands a bounded file source's splits out in event-time order.

Splits go out smallest known minimum event time first (unknown last, ties by enumeration), so
source subtasks advance their watermarks together. With each split the enumerator returns a
watermark bound: the smallest minimum event time among the split it returns and the splits
still unassigned, minus 1 ms. A subtask's watermark never passes that bound, so a split read
later can never hold records that are already late, whatever order the files are listed in.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from millrace.connectors.file_formats import FileFormat, list_files
from millrace.runtime.io.input_split import InputSplit, NextInputSplit
from millrace.runtime.io.partition_events import MAX_WATERMARK, MIN_WATERMARK

__all__ = ["FileSplitEnumerator"]


class FileSplitEnumerator:
    """Event-time ordered split assignment for one bounded file source.

    Args:
        path: The source's files (a file, a directory, or a glob).
        file_format: How to cut them into splits.
        event_time: The event-time column (for minimum event times from Parquet statistics).

    Threading:
        ``discover`` in the JobMaster's I/O executor; the rest on its main thread.
    """

    def __init__(self, path: str, file_format: FileFormat, event_time: str | None) -> None:
        self._path = path
        self._format = file_format
        self._event_time = event_time
        self._unassigned: deque[InputSplit] = deque()
        self._total = 0
        self._discovered = False

    def discover(self) -> list[InputSplit]:
        """Every split, on the first call (the files are listed once); none afterwards.

        Raises:
            FileNotFoundError: If no file matches the path.
        """
        if self._discovered:
            return []
        self._discovered = True
        return self._format.splits(list_files(self._path), self._event_time)

    def add_splits(self, splits: Sequence[InputSplit]) -> None:
        self.add_splits_back(splits)
        self._total += len(splits)

    def add_splits_back(self, splits: Sequence[InputSplit]) -> None:
        """Queue ``splits`` again, in event-time order with the rest (``SupportsSplitsBack``)."""
        ordered = sorted(
            [*self._unassigned, *splits],
            key=lambda s: (s.min_event_time_ms is None, s.min_event_time_ms or 0, s.split_number),
        )
        self._unassigned = deque(ordered)

    @property
    def splits_total(self) -> int:
        return self._total

    @property
    def splits_assigned(self) -> int:
        return self._total - len(self._unassigned)

    def next_split(self, subtask_index: int = 0, parallelism: int = 1) -> NextInputSplit:
        """The next split and the watermark bound; split None once none is left."""
        if not self._unassigned:
            return NextInputSplit(None, MAX_WATERMARK, self._total, self._total)
        bound = self._bound()
        split = self._unassigned.popleft()
        return NextInputSplit(split, bound, self._total, self.splits_assigned)

    def _bound(self) -> int:
        lowest = MAX_WATERMARK
        for split in self._unassigned:
            if split.min_event_time_ms is None:
                return MIN_WATERMARK
            lowest = min(lowest, split.min_event_time_ms - 1)
        return lowest
