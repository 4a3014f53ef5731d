"""Window assigners for keyed streams (event time).

Windows are aligned to the epoch in UTC, as Flink's ``TumblingEventTimeWindows`` with offset 0:
``tumbling("1 day")`` yields UTC days ``[00:00, 24:00)``.
"""

from __future__ import annotations

from dataclasses import dataclass

from millrace.config import parse_duration

__all__ = ["TumblingEventTimeWindows", "format_duration_ms", "tumbling"]


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

    def window_start_ms(self, timestamp_ms: int) -> int:
        """Start of the window holding ``timestamp_ms`` (Flink's getWindowStartWithOffset)."""
        return timestamp_ms - (timestamp_ms - self.offset_ms) % self.size_ms


def format_duration_ms(duration_ms: int) -> str:
    """``86400000`` -> ``1 d``; the largest unit that divides the duration exactly."""
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if duration_ms and duration_ms % size == 0:
            return f"{duration_ms // size} {unit}"
    return f"{duration_ms} ms"


def tumbling(size: str | float, offset: str | float = 0) -> TumblingEventTimeWindows:
    """Tumbling event-time windows of ``size`` (e.g. ``"1 day"``, ``"10 min"``, or seconds).

    Raises:
        ConfigError: If ``size`` or ``offset`` is not a duration.
        ValueError: If the size is zero or the offset not below the size.
    """
    size_ms = round(parse_duration(size, key="window size") * 1000)
    offset_ms = round(parse_duration(offset, key="window offset") * 1000)
    return TumblingEventTimeWindows(size_ms, offset_ms)
