"""Window assigners for keyed streams (event time), with Flink's semantics.

Windows are aligned to the epoch in UTC, as Flink's assigners with offset 0:
``tumbling("1 day")`` yields UTC days ``[00:00, 24:00)``; ``sliding("1 day", "6 h")`` yields
1-day windows starting every 6 hours; ``session("3 h")`` gives each record the window
``[t, t + 3 h)`` and merges a key's overlapping (or touching) windows into sessions.

The assigner protocol (``WindowAssigner``) is what the data plane needs of an assigner, in plain
Python (``millrace.spark.windowing`` turns it into Spark columns): the windows of a timestamp
(Flink's ``assignWindows``), whether windows merge (Flink's ``MergingWindowAssigner``), and the
earliest end a window not yet fired at a watermark can have (when the next firing can be due).
A window ``[start, end)`` fires when the watermark reaches ``end - 1`` (its ``maxTimestamp``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from millrace.config import parse_duration

__all__ = [
    "EventTimeSessionWindows",
    "SlidingEventTimeWindows",
    "TumblingEventTimeWindows",
    "WindowAssigner",
    "format_duration_ms",
    "session",
    "sliding",
    "tumbling",
]


@runtime_checkable
class WindowAssigner(Protocol):
    """What the window operator needs of an event-time window assigner.

    Attributes:
        size_ms: Length of the window a single record is assigned (ms): the window size, or
            for sessions the gap.
        is_merging: Whether a key's overlapping windows merge (sessions).
    """

    @property
    def size_ms(self) -> int: ...

    @property
    def is_merging(self) -> bool: ...

    def assign_windows_ms(self, timestamp_ms: int) -> list[tuple[int, int]]:
        """The windows ``(start, end)`` (epoch ms, end exclusive) of a record at
        ``timestamp_ms``, before any merging (Flink's ``assignWindows``)."""
        ...

    def next_unfired_end_ms(self, watermark_ms: int) -> int:
        """The smallest end (epoch ms) a window can have that has not fired at watermark
        ``watermark_ms``: every window ending sooner has ``end - 1 <= watermark_ms``."""
        ...


@dataclass(frozen=True)
class TumblingEventTimeWindows:
    """Fixed-size, non-overlapping event-time windows ``[start, start + size)``.

    Args:
        size_ms: Window length in milliseconds (> 0).
        offset_ms: Shift of the window starts from the epoch, milliseconds, ``0 <= offset < size``.
    """

    size_ms: int
    offset_ms: int = 0

    def __post_init__(self) -> None:
        if self.size_ms <= 0:
            raise ValueError(f"window size must be > 0 ms, got {self.size_ms}")
        if not 0 <= self.offset_ms < self.size_ms:
            raise ValueError(f"window offset must be in [0, size), got {self.offset_ms}")

    def __str__(self) -> str:
        offset = f", offset {format_duration_ms(self.offset_ms)}" if self.offset_ms else ""
        return f"TumblingEventTimeWindows({format_duration_ms(self.size_ms)}{offset})"

    @property
    def slide_ms(self) -> int:
        return self.size_ms

    @property
    def is_merging(self) -> bool:
        return False

    def window_start_ms(self, timestamp_ms: int) -> int:
        """Start of the window holding ``timestamp_ms`` (Flink's getWindowStartWithOffset)."""
        return timestamp_ms - (timestamp_ms - self.offset_ms) % self.size_ms

    def assign_windows_ms(self, timestamp_ms: int) -> list[tuple[int, int]]:
        start = self.window_start_ms(timestamp_ms)
        return [(start, start + self.size_ms)]

    def next_unfired_end_ms(self, watermark_ms: int) -> int:
        return self.window_start_ms(watermark_ms + 1) + self.size_ms


@dataclass(frozen=True)
class SlidingEventTimeWindows:
    """Windows of ``size`` starting every ``slide`` (Flink's SlidingEventTimeWindows).

    A record belongs to every window ``[start, start + size)`` that holds it, whose start lies
    on the grid ``offset + k * slide``: ``ceil(size / slide)`` windows, or none when
    ``size < slide`` and it falls between two windows.

    Args:
        size_ms: Window length in milliseconds (> 0).
        slide_ms: Distance between two window starts in milliseconds (> 0).
        offset_ms: Shift of the window starts from the epoch, ms, ``0 <= offset < slide``.
    """

    size_ms: int
    slide_ms: int
    offset_ms: int = 0

    def __post_init__(self) -> None:
        if self.size_ms <= 0 or self.slide_ms <= 0:
            raise ValueError(
                f"window size and slide must be > 0 ms, got {self.size_ms} and {self.slide_ms}"
            )
        if not 0 <= self.offset_ms < self.slide_ms:
            raise ValueError(f"window offset must be in [0, slide), got {self.offset_ms}")

    def __str__(self) -> str:
        offset = f", offset {format_duration_ms(self.offset_ms)}" if self.offset_ms else ""
        return (
            f"SlidingEventTimeWindows({format_duration_ms(self.size_ms)}, "
            f"{format_duration_ms(self.slide_ms)}{offset})"
        )

    @property
    def is_merging(self) -> bool:
        return False

    @property
    def windows_per_record(self) -> int:
        """The most windows a record belongs to: ``ceil(size / slide)``."""
        return -(-self.size_ms // self.slide_ms)

    def last_start_ms(self, timestamp_ms: int) -> int:
        """The latest window start at or before ``timestamp_ms`` on the slide grid."""
        return timestamp_ms - (timestamp_ms - self.offset_ms) % self.slide_ms

    def assign_windows_ms(self, timestamp_ms: int) -> list[tuple[int, int]]:
        last = self.last_start_ms(timestamp_ms)
        starts = (last - k * self.slide_ms for k in range(self.windows_per_record))
        return [(s, s + self.size_ms) for s in starts if s > timestamp_ms - self.size_ms]

    def next_unfired_end_ms(self, watermark_ms: int) -> int:
        # the smallest start on the grid with start + size - 1 > watermark
        earliest = watermark_ms + 2 - self.size_ms
        return earliest + (self.offset_ms - earliest) % self.slide_ms + self.size_ms


@dataclass(frozen=True)
class EventTimeSessionWindows:
    """Session windows: a key's records closer than ``gap`` apart form one window (Flink's
    EventTimeSessionWindows, a merging assigner).

    Each record gets the window ``[t, t + gap)``; a key's windows that overlap or touch
    (Flink's ``TimeWindow.intersects``) merge into one ``[min start, max end)``. A session
    fires when the watermark reaches its end - 1, i.e. ``gap`` after its last record.

    Args:
        gap_ms: The session gap in milliseconds (> 0).
    """

    gap_ms: int

    def __post_init__(self) -> None:
        if self.gap_ms <= 0:
            raise ValueError(f"session gap must be > 0 ms, got {self.gap_ms}")

    def __str__(self) -> str:
        return f"EventTimeSessionWindows({format_duration_ms(self.gap_ms)})"

    @property
    def size_ms(self) -> int:
        return self.gap_ms

    @property
    def is_merging(self) -> bool:
        return True

    def assign_windows_ms(self, timestamp_ms: int) -> list[tuple[int, int]]:
        return [(timestamp_ms, timestamp_ms + self.gap_ms)]

    def next_unfired_end_ms(self, watermark_ms: int) -> int:
        return watermark_ms + 2

    @staticmethod
    def merge_windows_ms(windows: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """Merge overlapping or touching windows (Flink's ``mergeWindows``), sorted by start."""
        merged: list[tuple[int, int]] = []
        for start, end in sorted(windows):
            if merged and start <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], end))
            else:
                merged.append((start, end))
        return merged


def format_duration_ms(duration_ms: int) -> str:
    """``86400000`` -> ``1 d``; the largest unit that divides the duration exactly."""
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if duration_ms and duration_ms % size == 0:
            return f"{duration_ms // size} {unit}"
    return f"{duration_ms} ms"


def _ms(value: str | float, key: str) -> int:
    return round(parse_duration(value, key=key) * 1000)


def tumbling(size: str | float, offset: str | float = 0) -> TumblingEventTimeWindows:
    """Tumbling event-time windows of ``size`` (e.g. ``"1 day"``, ``"10 min"``, or seconds).

    Raises:
        ConfigError: If ``size`` or ``offset`` is not a duration.
        ValueError: If the size is zero or the offset not below the size.
    """
    return TumblingEventTimeWindows(_ms(size, "window size"), _ms(offset, "window offset"))


def sliding(
    size: str | float, slide: str | float, offset: str | float = 0
) -> SlidingEventTimeWindows:
    """Sliding event-time windows of ``size`` every ``slide`` (e.g. ``"1 day"``, ``"6 h"``).

    Raises:
        ConfigError: If ``size``, ``slide`` or ``offset`` is not a duration.
        ValueError: If the size or slide is zero or the offset not below the slide.
    """
    return SlidingEventTimeWindows(
        _ms(size, "window size"), _ms(slide, "window slide"), _ms(offset, "window offset")
    )


def session(gap: str | float) -> EventTimeSessionWindows:
    """Event-time session windows with ``gap`` (e.g. ``"3 h"``): Flink's
    ``EventTimeSessionWindows.withGap``.

    Raises:
        ConfigError: If ``gap`` is not a duration.
        ValueError: If the gap is zero.
    """
    return EventTimeSessionWindows(_ms(gap, "session gap"))
