"""InputSplitAssigner: hands a source's splits to its subtasks on request (seed 000).

Splits go out in event-time order (smallest known minimum event time first, unknown last, ties
by enumeration), so sources advance their watermarks together. With each split the assigner
returns a watermark bound: the smallest minimum event time among the split it returns and the
splits still unassigned, minus 1 ms. A subtask's watermark never passes that bound, so a split
read later can never hold records that are already late, whatever order files are listed in.
"""

from __future__ import annotations

from collections import deque

from millrace.runtime.io.input_split import InputSplit, NextInputSplit
from millrace.runtime.io.partition_events import MAX_WATERMARK, MIN_WATERMARK

__all__ = ["InputSplitAssigner"]


class InputSplitAssigner:
    """Event-time ordered split assignment for one source vertex.

    Args:
        splits: Every split of the source.

    Threading:
        JobMaster main thread only.
    """

    def __init__(self, splits: list[InputSplit]) -> None:
        ordered = sorted(
            splits,
            key=lambda s: (s.min_event_time_ms is None, s.min_event_time_ms or 0, s.split_number),
        )
        self._unassigned = deque(ordered)
        self.total = len(splits)

    @property
    def assigned(self) -> int:
        return self.total - len(self._unassigned)

    def next_split(self) -> NextInputSplit:
        """The next split and the watermark bound; split None when none is left."""
        if not self._unassigned:
            return NextInputSplit(None, MAX_WATERMARK, self.total, self.total)
        bound = self._bound()
        split = self._unassigned.popleft()
        return NextInputSplit(split, bound, self.total, self.assigned)

    def _bound(self) -> int:
        lowest = MAX_WATERMARK
        for split in self._unassigned:
            if split.min_event_time_ms is None:
                return MIN_WATERMARK
            lowest = min(lowest, split.min_event_time_ms - 1)
        return lowest
