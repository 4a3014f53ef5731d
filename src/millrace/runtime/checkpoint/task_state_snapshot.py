"""What a task acknowledges at a checkpoint barrier, and what it is restored from.

Handles, not data: keyed state lies in files under the checkpoint directory, written by the
task itself; the acknowledgement carries their paths with key-group ranges, the positions of a
source's splits, and the sink data staged since the previous barrier (pre-committed, to be
committed by the JobMaster once the checkpoint is complete).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from millrace.runtime.io.input_split import SplitState
from millrace.runtime.io.partition_events import MIN_WATERMARK

__all__ = ["ChainedKeyedState", "KeyedStateHandle", "TaskStateSnapshot"]


@dataclass(frozen=True)
class KeyedStateHandle:
    """One file of keyed state (Parquet with a ``__kg`` key-group column).

    Attributes:
        path: File path or fsspec URL.
        key_group_start: First key group it may hold.
        key_group_end: Last key group it may hold (inclusive).
        rows: Rows in the file.
        size_bytes: Bytes of the file.
    """

    path: str
    key_group_start: int
    key_group_end: int
    rows: int
    size_bytes: int = 0


@dataclass(frozen=True)
class ChainedKeyedState:
    """The part of a chained task's state that is its chained keyed vertex's
    (``KeyedChainStreamTask``).

    Attributes:
        keyed_state: The keyed stage's state files.
        watermark_ms: Its watermark: a window's fired watermark, a running aggregate's
            source watermark.
    """

    keyed_state: tuple[KeyedStateHandle, ...] = ()
    watermark_ms: int = MIN_WATERMARK


@dataclass(frozen=True)
class TaskStateSnapshot:
    """A task's state at a barrier (Flink's TaskStateSnapshot), or what it restores from.

    Attributes:
        keyed_state: Keyed state files (window operators).
        split_states: Positions (and own watermarks) of the source splits assigned and not
            finished.
        finished_splits: Ids of the splits this source subtask read to the end since it
            started (or restored).
        sink_pending: Chain position of each sink operator -> handles of the data it staged
            since the previous barrier (``Sink.write``), committed with the checkpoint.
        watermark_ms: The task's watermark at the barrier (source: emitted; window: fired).
        chained: The state of the keyed vertex chained into this source vertex, or None. Only
            between a chained task and the JobMaster: a checkpoint stores it as the keyed
            vertex's own (``chained_state``).
    """

    keyed_state: tuple[KeyedStateHandle, ...] = ()
    split_states: tuple[SplitState, ...] = ()
    finished_splits: tuple[str, ...] = ()
    sink_pending: dict[int, tuple[str, ...]] = field(default_factory=dict)
    watermark_ms: int = MIN_WATERMARK
    chained: ChainedKeyedState | None = None

    @property
    def state_size_bytes(self) -> int:
        """Bytes of the keyed state files, a chained keyed vertex's included."""
        chained = self.chained.keyed_state if self.chained is not None else ()
        return sum(h.size_bytes for h in (*self.keyed_state, *chained))
