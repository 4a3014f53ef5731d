"""JoinedStreams and IntervalJoin: the two-input join builders (Flink's names).

``a.join(b).where(*keys).equal_to(*keys).window(assigner)`` is Flink's window join (inner);
``a.key_by(k).interval_join(b.key_by(k)).between(lower, upper)`` is Flink's event-time interval
join. Both give a DataStream of joined rows: the first input's columns, then the second's (its
key columns left out where they have the same name as the first input's key at the same
position; any other column whose name the first input has too gets ``suffix``, ``_right`` by
default). Spark executes the joins; see ``millrace.spark.window_join_stream_task`` and
``interval_join_stream_task``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from millrace.api.multi_input_transformations import (
    IntervalJoinTransformation,
    WindowJoinTransformation,
)
from millrace.api.transformations import KeyByTransformation, Transformation
from millrace.api.windows import WindowAssigner, format_duration_ms
from millrace.config import parse_duration
from millrace.errors import PipelineError

if TYPE_CHECKING:
    from millrace.api.data_stream import DataStream
    from millrace.api.stream_execution_environment import StreamExecutionEnvironment

__all__ = ["IntervalJoin", "JoinedStreams"]


def _check_keys(keys: tuple[str, ...], method: str) -> tuple[str, ...]:
    if not keys or not all(isinstance(k, str) and k for k in keys):
        raise ValueError(f"{method}() takes one or more column names")
    return keys


class JoinedStreams:
    """``a.join(b)``: pick the keys of both inputs, then the window.

    Threading:
        Build pipelines on one thread; the objects are not thread-safe.
    """

    def __init__(
        self,
        env: StreamExecutionEnvironment,
        left: Transformation,
        right: Transformation,
        suffix: str,
    ) -> None:
        self._env = env
        self._left = left
        self._right = right
        self._suffix = suffix
        self._left_keys: tuple[str, ...] = ()
        self._right_keys: tuple[str, ...] = ()

    def where(self, *keys: str) -> JoinedStreams:
        """Key columns of the first input.

        Raises:
            ValueError: If no key column is given.
        """
        self._left_keys = _check_keys(keys, "where")
        return self

    def equal_to(self, *keys: str) -> JoinedStreams:
        """Key columns of the second input, matched position by position with ``where``'s.

        Raises:
            ValueError: If no key column is given.
            PipelineError: If ``where()`` was not called first, or the key counts differ.
        """
        self._right_keys = _check_keys(keys, "equal_to")
        if not self._left_keys:
            raise PipelineError("join(): call where(...) before equal_to(...)")
        if len(keys) != len(self._left_keys):
            raise PipelineError(
                f"join(): where() has {len(self._left_keys)} key columns "
                f"{self._left_keys} but equal_to() has {len(keys)} {keys}; give both the "
                "same number of keys"
            )
        return self

    def window(self, assigner: WindowAssigner) -> DataStream:
        """Join the rows of both inputs with equal keys in the same window (inner join), when
        the window fires (the watermark of both inputs passed its end). ``tumbling`` or
        ``sliding`` windows; with sliding windows a pair is output once per window holding
        both rows (Flink's semantics).

        Schema:
            ``(first input's columns..., second input's columns..., window_start: timestamp,
            window_end: timestamp)``, one row per matching pair of rows and window.

        Raises:
            TypeError: If ``assigner`` is not a window assigner from ``millrace.windows``.
            PipelineError: If where()/equal_to() were not called, or ``assigner`` merges
                windows (sessions: not supported by the join yet).
        """
        from millrace.api.data_stream import DataStream

        if not isinstance(assigner, WindowAssigner):
            raise TypeError(
                f"window() takes tumbling(...) or sliding(...) from millrace, got {assigner!r}"
            )
        if assigner.is_merging:
            raise PipelineError(
                f"join().window(): {assigner} merges windows, which the window join does not "
                "support yet; use tumbling(...) or sliding(...)"
            )
        if not self._left_keys or not self._right_keys:
            raise PipelineError("join(): call where(...).equal_to(...) before window(...)")
        name = (
            f"WindowJoin({', '.join(self._left_keys)} = {', '.join(self._right_keys)}, {assigner})"
        )
        t = WindowJoinTransformation(
            name,
            None,
            inputs=(self._left, self._right),
            left_keys=self._left_keys,
            right_keys=self._right_keys,
            window=assigner,
            suffix=self._suffix,
        )
        return DataStream(self._env, t)


class IntervalJoin:
    """``a.key_by(k).interval_join(b.key_by(k))``: give the bounds with ``between``."""

    def __init__(
        self,
        env: StreamExecutionEnvironment,
        left: KeyByTransformation,
        right: KeyByTransformation,
        suffix: str,
    ) -> None:
        if len(left.keys) != len(right.keys):
            raise PipelineError(
                f"interval_join(): the first stream is keyed by {len(left.keys)} columns "
                f"{left.keys} and the second by {len(right.keys)} {right.keys}; key both by the "
                "same number of columns"
            )
        self._env = env
        self._left = left
        self._right = right
        self._suffix = suffix

    def between(self, lower: str | float, upper: str | float) -> DataStream:
        """Join each row ``a`` of the first stream with every row ``b`` of the second with the
        same key and ``a.ts + lower <= b.ts <= a.ts + upper`` (event time, inclusive bounds,
        Flink's default). Durations as ``"-1 h"``, ``"30 min"`` or seconds; ``lower`` may be
        negative. Each pair is emitted once, as soon as both rows arrived; a row's state is
        dropped once the watermark passes the last time it can match.

        Schema:
            ``(first stream's columns..., second stream's columns...)``, one row per pair.

        Raises:
            ConfigError: If a bound is not a duration.
            PipelineError: If ``lower > upper``.
        """
        from millrace.api.data_stream import DataStream

        lower_ms = _signed_ms(lower, "interval_join lower bound")
        upper_ms = _signed_ms(upper, "interval_join upper bound")
        if lower_ms > upper_ms:
            raise PipelineError(
                f"interval_join().between(): lower bound {lower!r} is above upper bound "
                f"{upper!r}; swap them"
            )
        name = (
            f"IntervalJoin({', '.join(self._left.keys)} = {', '.join(self._right.keys)}, "
            f"[{_format_signed(lower_ms)}, {_format_signed(upper_ms)}])"
        )
        t = IntervalJoinTransformation(
            name,
            None,
            inputs=(self._left, self._right),
            lower_ms=lower_ms,
            upper_ms=upper_ms,
            suffix=self._suffix,
        )
        return DataStream(self._env, t)


def _signed_ms(value: str | float, key: str) -> int:
    """A duration that may be negative (``"-1 h"`` or ``-3600``), in ms."""
    if isinstance(value, str) and value.strip().startswith("-"):
        return -round(parse_duration(value.strip()[1:], key=key) * 1000)
    if isinstance(value, int | float) and value < 0:
        return -round(parse_duration(-value, key=key) * 1000)
    return round(parse_duration(value, key=key) * 1000)


def _format_signed(ms: int) -> str:
    return f"-{format_duration_ms(-ms)}" if ms < 0 else format_duration_ms(ms) if ms else "0"
