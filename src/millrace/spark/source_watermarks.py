"""Per-split watermark tracking of a source subtask (Flink's per-split watermarks, FLIP-27).

Each open split's watermark is the largest event time read from it minus the allowed
out-of-orderness minus 1 ms (before any record: the bound it was assigned with, or the
watermark it had when it was checkpointed, if later). The subtask's
watermark is the minimum over its open splits and the JobMaster's bound for the splits it may
still receive, and never goes backwards. Files read in any order therefore never make good
records late: a split's records are only late relative to that split's own progress.

An unbounded source cannot bound the splits it will discover later (its bound is MAX with more
expected): then the data read so far stands in for the bound, so a subtask whose splits are all
read holds its watermark where its data left it instead of jumping to the end of time.
"""

from __future__ import annotations

from millrace.runtime.io.partition_events import MAX_WATERMARK, MIN_WATERMARK

__all__ = ["SplitWatermarkTracker"]


class SplitWatermarkTracker:
    """Watermark of one source subtask.

    Args:
        max_out_of_orderness_ms: Allowed disorder within a split (ms, >= 0).

    Threading:
        The source task's thread only.
    """

    def __init__(self, max_out_of_orderness_ms: int) -> None:
        if max_out_of_orderness_ms < 0:
            raise ValueError(f"out-of-orderness must be >= 0 ms, got {max_out_of_orderness_ms}")
        self._ooo = max_out_of_orderness_ms
        self._open: dict[str, int] = {}
        self._pending_bound = MIN_WATERMARK
        self._more_expected = False
        self._read = MIN_WATERMARK  # watermark of the data read so far, over all splits
        self._emitted = MIN_WATERMARK

    def set_pending_bound(self, bound_ms: int, more_expected: bool = False) -> None:
        """Bound for splits not yet assigned to this subtask (NextInputSplit); with
        ``more_expected`` and MAX (an unbounded source), the data read so far bounds them."""
        self._pending_bound = bound_ms
        self._more_expected = more_expected

    def open_split(self, split_id: str, bound_ms: int, restored_ms: int = MIN_WATERMARK) -> None:
        """A split starts; until records are seen its watermark is ``bound_ms``, or the
        watermark it had when it was checkpointed (``restored_ms``) if that is later: data
        read before the checkpoint, which bounds splits still to come as data read now does."""
        self._open[split_id] = max(bound_ms, restored_ms)
        self._read = max(self._read, restored_ms)

    def split_watermark(self, split_id: str) -> int:
        """The open split's own watermark (MIN if it is not open): checkpointed with it."""
        return self._open.get(split_id, MIN_WATERMARK)

    def on_records(self, split_id: str, max_event_time_ms: int | None) -> None:
        """Records of ``split_id`` were read, the largest event time being ``max...``."""
        if max_event_time_ms is None:
            return
        candidate = max_event_time_ms - self._ooo - 1
        self._open[split_id] = max(self._open.get(split_id, MIN_WATERMARK), candidate)
        self._read = max(self._read, candidate)

    def close_split(self, split_id: str, max_event_time_ms: int | None = None) -> None:
        """The split is fully read (its last records' largest event time given, if known): it
        no longer holds the watermark back."""
        if max_event_time_ms is not None:
            self._read = max(self._read, max_event_time_ms - self._ooo - 1)
        self._open.pop(split_id, None)

    def restore(self, watermark_ms: int) -> None:
        """Resume from a checkpoint: the watermark emitted before it stays the floor."""
        self._emitted = max(self._emitted, watermark_ms)

    def current(self) -> int:
        """min(open splits' watermarks, pending bound), monotonic; MAX when all is read."""
        pending = self._pending_bound
        if self._more_expected and pending == MAX_WATERMARK:
            pending = self._read
        value = min([*self._open.values(), pending])
        return max(value, self._emitted)

    def advance(self) -> int | None:
        """The new watermark if it moved past the last one returned, else None."""
        value = self.current()
        if value > self._emitted:
            self._emitted = value
            return value
        return None

    @property
    def emitted(self) -> int:
        """The last watermark returned by ``advance`` (MIN before any)."""
        return self._emitted

    @staticmethod
    def end_of_input() -> int:
        return MAX_WATERMARK
