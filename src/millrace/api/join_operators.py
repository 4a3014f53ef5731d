"""Descriptors of the operators of multi-input vertices: the two joins and the forward
(rebalance) exchange of a union that feeds sinks directly.

Like ``millrace.api.operators``, they hold user objects and are opaque to the control plane;
``millrace.spark`` executes them.
"""

from __future__ import annotations

from dataclasses import dataclass

from millrace.api.windows import TumblingEventTimeWindows, WindowAssigner

__all__ = [
    "INTERVAL_ASSIGNER",
    "IntervalJoinOperator",
    "RebalanceOperator",
    "WindowJoinOperator",
]

INTERVAL_ASSIGNER = TumblingEventTimeWindows(1)
"""1-ms windows: the producer side of an interval join tags each row with its event time in
ms (``__ws``), its key group and target, and judges lateness as Flink does (ts <= watermark)."""


@dataclass(frozen=True)
class WindowJoinOperator:
    """Keyed window join: both inputs' rows buffered per window, joined when it fires.

    Args:
        left_keys: Key columns of input 0.
        right_keys: Key columns of input 1 (same count, same types).
        window: The window assigner.
        suffix: Appended to a clashing column name of input 1.
        name: Operator name.
    """

    left_keys: tuple[str, ...]
    right_keys: tuple[str, ...]
    window: WindowAssigner
    suffix: str
    name: str


@dataclass(frozen=True)
class IntervalJoinOperator:
    """Keyed event-time interval join: ``b.ts`` in ``[a.ts + lower_ms, a.ts + upper_ms]``.

    Args:
        left_keys: Key columns of input 0.
        right_keys: Key columns of input 1.
        lower_ms: Inclusive lower bound (ms).
        upper_ms: Inclusive upper bound (ms).
        suffix: Appended to a clashing column name of input 1.
        name: Operator name.
    """

    left_keys: tuple[str, ...]
    right_keys: tuple[str, ...]
    lower_ms: int
    upper_ms: int
    suffix: str
    name: str


@dataclass(frozen=True)
class RebalanceOperator:
    """Ends a source chain of a union that feeds sinks: each bundle goes to consumer subtask
    ``subtask_index % consumers`` (Flink's RebalancePartitioner, per bundle)."""

    name: str = "rebalance"
