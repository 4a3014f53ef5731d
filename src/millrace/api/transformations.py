"""Transformations: the logical plan a user builds with DataStream calls (Flink's Transformation).

Each DataStream call adds one Transformation; ``StreamExecutionEnvironment.execute`` turns the
list into a JobGraph (``job_graph_generator``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from millrace.api.windows import WindowAssigner

__all__ = [
    "KeyByTransformation",
    "KeyedAggregateTransformation",
    "SinkTransformation",
    "SourceTransformation",
    "TransformTransformation",
    "Transformation",
    "WindowAggregateTransformation",
]

_ids = itertools.count(1)


@dataclass(eq=False)
class Transformation:
    """A node of the logical plan.

    Args:
        name: Operator name.
        input: The upstream transformation (None for sources).
        parallelism: Explicit parallelism, or None for the environment's default.
    """

    name: str
    input: Transformation | None
    parallelism: int | None = None
    id: int = field(default_factory=lambda: next(_ids))


@dataclass(eq=False)
class SourceTransformation(Transformation):
    source: Any = None
    event_time: str | None = None
    max_out_of_orderness_ms: int = 0
    idle_timeout_ms: int | None = None


@dataclass(eq=False, kw_only=True)
class TransformTransformation(Transformation):
    fn: Callable[[Any], Any]


@dataclass(eq=False)
class KeyByTransformation(Transformation):
    keys: tuple[str, ...] = ()


@dataclass(eq=False, kw_only=True)
class WindowAggregateTransformation(Transformation):
    keys: tuple[str, ...] = ()
    window: WindowAssigner
    aggregates: tuple[Any, ...] = ()
    lateness_ms: int = 0
    pandas_function: tuple[Callable[..., Any], Any] | None = None  # (fn, schema)


@dataclass(eq=False)
class KeyedAggregateTransformation(Transformation):
    """A running aggregate per key, no window (Flink's ``keyBy().sum/reduce``, SQL's GROUP BY
    over a stream)."""

    keys: tuple[str, ...] = ()
    aggregates: tuple[Any, ...] = ()


@dataclass(eq=False)
class SinkTransformation(Transformation):
    sink: Any = None
