"""Transformations with several inputs: union and the two-input joins (Flink's
UnionTransformation and TwoInputTransformation).

Their ``input`` is None; ``inputs`` holds the upstream transformations. The JobGraph generator
builds them in ``multi_input_graph``.
"""

from __future__ import annotations

from dataclasses import dataclass

from millrace.api.transformations import KeyByTransformation, Transformation
from millrace.api.windows import WindowAssigner

__all__ = [
    "IntervalJoinTransformation",
    "MultiInputTransformation",
    "UnionTransformation",
    "WindowJoinTransformation",
]


@dataclass(eq=False, kw_only=True)
class MultiInputTransformation(Transformation):
    """A transformation reading several streams (``inputs``, in order)."""

    inputs: tuple[Transformation, ...] = ()


@dataclass(eq=False, kw_only=True)
class UnionTransformation(MultiInputTransformation):
    """The records of every input, of one schema (Flink's DataStream.union)."""


@dataclass(eq=False, kw_only=True)
class WindowJoinTransformation(MultiInputTransformation):
    """Inner join per window of ``inputs[0]`` and ``inputs[1]`` on equal keys.

    Args:
        left_keys: Key columns of the first input (``where``).
        right_keys: Key columns of the second input (``equal_to``), as many as ``left_keys``.
        window: The window assigner of both inputs.
        suffix: Appended to a column of the second input whose name the first one already has.
    """

    left_keys: tuple[str, ...]
    right_keys: tuple[str, ...]
    window: WindowAssigner
    suffix: str = "_right"


@dataclass(eq=False, kw_only=True)
class IntervalJoinTransformation(MultiInputTransformation):
    """Event-time interval join of two keyed streams (``inputs`` are their KeyByTransformations).

    Args:
        lower_ms: Lower bound (ms, inclusive): ``b.ts >= a.ts + lower_ms``.
        upper_ms: Upper bound (ms, inclusive): ``b.ts <= a.ts + upper_ms``; >= ``lower_ms``.
        suffix: Appended to a column of the second input whose name the first one already has.
    """

    lower_ms: int
    upper_ms: int
    suffix: str = "_right"

    @property
    def keyed_inputs(self) -> tuple[KeyByTransformation, KeyByTransformation]:
        left, right = self.inputs
        assert isinstance(left, KeyByTransformation) and isinstance(right, KeyByTransformation)
        return left, right
