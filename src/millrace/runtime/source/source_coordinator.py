"""SourceCoordinator: the JobMaster's side of one source vertex (Flink's SourceCoordinator).

It owns the source's SplitEnumerator, adds what discovery finds (ignoring splits seen before),
and answers RequestNextInputSplit (seed 000). Restored from a checkpoint, it keeps the splits
that were finished out of the enumeration and hands the open ones out again with their read
positions, so sources rewind exactly to the checkpoint (Kafka offsets, file rows).

For a bounded source it remembers which splits each subtask was handed, so that those of a
failed subtask can go back to the enumerator (Flink's ``addSplitsBack``) when the subtask
alone runs again (BATCH region failover, ``runtime/failover/region_failover.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import replace

from millrace.errors import MillraceError, PipelineError, describe
from millrace.runtime.checkpoint.checkpoint_storage import CheckpointMetadata
from millrace.runtime.io.input_split import InputSplit, NextInputSplit, SplitState
from millrace.runtime.io.partition_events import MIN_WATERMARK
from millrace.runtime.source.split_enumerator import (
    Boundedness,
    SplitEnumerator,
    SupportsSplitsBack,
)
from millrace.types import JobVertexId

__all__ = ["SourceCoordinator", "notify_committed"]

logger = logging.getLogger(__name__)


class SourceCoordinator:
    """Split assignment of one source vertex.

    Args:
        name: The source's name (logs).
        enumerator: The source's enumerator.
        boundedness: Whether the source ends; an unbounded one keeps ``more_expected`` set.
        restored_finished: Ids of the splits a restored checkpoint had finished.
        restored_open: Splits a restored checkpoint had begun, with their positions and their
            own watermarks.

    Threading:
        JobMaster main thread only (``enumerator.discover`` is called by the JobMaster in its
        I/O executor; its result comes back through ``add_discovered``).
    """

    def __init__(
        self,
        name: str,
        enumerator: SplitEnumerator,
        boundedness: Boundedness,
        restored_finished: Iterable[str] = (),
        restored_open: Iterable[SplitState] = (),
    ) -> None:
        self.name = name
        self.enumerator = enumerator
        self.bounded = boundedness is Boundedness.BOUNDED
        self._finished = set(restored_finished)
        self._positions = {s.split.split_id: s.position for s in restored_open}
        self._split_watermarks = {s.split.split_id: s.watermark_ms for s in restored_open}
        self._restored_splits = {s.split.split_id: s.split for s in restored_open}
        self._seen: set[str] = set()
        # subtask index -> (split, position) handed to it; bounded sources only (finite)
        self._handed: dict[int, list[tuple[InputSplit, int, int]]] = {}  # split, position, wm

    def add_discovered(self, splits: Iterable[InputSplit]) -> int:
        """Add newly discovered splits; returns how many were new (not seen, not finished)."""
        fresh = []
        for split in splits:
            split_id = split.split_id
            if split_id in self._seen or split_id in self._finished:
                continue
            self._seen.add(split_id)
            # a split begun before the checkpoint keeps its description (e.g. its end offset)
            fresh.append(self._restored_splits.get(split_id, split))
        if fresh:
            self.enumerator.add_splits(fresh)
            logger.info("source %s: %d new splits", self.name, len(fresh))
        return len(fresh)

    def next_split(self, subtask_index: int, parallelism: int) -> NextInputSplit:
        """RequestNextInputSplit of subtask ``subtask_index``.

        Raises:
            PipelineError: If the SplitEnumerator fails (the connector's error is its cause).
        """
        try:
            reply = self.enumerator.next_split(subtask_index, parallelism)
        except MillraceError:
            raise
        except Exception as error:  # the connector's code: translated here, its error chained
            raise PipelineError(
                f"the split enumerator failed: {describe(error)}", self.name
            ) from error
        if reply.split is None:
            return replace(reply, more_expected=not self.bounded)
        split_id = reply.split.split_id
        position = self._positions.pop(split_id, reply.split.start_position or 0)
        watermark = self._split_watermarks.pop(split_id, MIN_WATERMARK)
        if self.bounded:
            self._handed.setdefault(subtask_index, []).append((reply.split, position, watermark))
        return replace(reply, position=position, split_watermark_ms=watermark)

    @property
    def takes_splits_back(self) -> bool:
        """Whether a failed subtask's splits can go out again (a bounded source whose
        enumerator is ``SupportsSplitsBack``)."""
        return self.bounded and isinstance(self.enumerator, SupportsSplitsBack)

    def add_splits_back(self, subtask_index: int) -> int:
        """Give every split handed to subtask ``subtask_index`` back to the enumerator, at the
        position it was handed out with (its failed attempt's reading is discarded); returns
        how many.

        Raises:
            PipelineError: If the source cannot take splits back (``takes_splits_back``).
        """
        enumerator = self.enumerator
        if not self.takes_splits_back or not isinstance(enumerator, SupportsSplitsBack):
            raise PipelineError("the source cannot take splits back", self.name)
        handed = self._handed.pop(subtask_index, [])
        for split, position, watermark in handed:
            self._positions[split.split_id] = position
            self._split_watermarks[split.split_id] = watermark
        enumerator.add_splits_back([split for split, _, _ in handed])
        logger.info(
            "source %s: %d splits of subtask %d back to the enumerator",
            self.name,
            len(handed),
            subtask_index + 1,
        )
        return len(handed)

    def unassigned_restored(self) -> tuple[SplitState, ...]:
        """The restored splits not yet handed out, at their restored positions: part of every
        checkpoint triggered before they are (a subtask snapshotting before it asks for them
        does not name them)."""
        return tuple(
            SplitState(
                self._restored_splits[split_id],
                position,
                watermark_ms=self._split_watermarks.get(split_id, MIN_WATERMARK),
            )
            for split_id, position in self._positions.items()
        )

    def split_ids(self) -> frozenset[str]:
        """Ids of every split known: discovered, or finished before the restore."""
        return frozenset(self._seen | self._finished)

    @property
    def splits_total(self) -> int:
        return self.enumerator.splits_total + len(self._finished)

    @property
    def splits_assigned(self) -> int:
        return self.enumerator.splits_assigned + len(self._finished)


def notify_committed(
    sources: Mapping[JobVertexId, SourceCoordinator], metadata: CheckpointMetadata
) -> None:
    """Tell every enumerator that has ``notify_checkpoint_complete(checkpoint_id, positions)``
    (Flink's ``SplitEnumerator.notifyCheckpointComplete``) that ``metadata`` is committed, with
    its source's split positions (split id -> position) in it: an HttpSource then truncates its
    log below them. A failing enumerator is logged, never fails the job.

    Threading:
        The JobMaster's main thread (must not block: enumerators hand I/O to their threads).
    """
    for vertex_id, coordinator in sources.items():
        notify = getattr(coordinator.enumerator, "notify_checkpoint_complete", None)
        vertex = metadata.vertex(vertex_id)
        if notify is None or vertex is None:
            continue
        states = [*vertex.unassigned_splits]
        states += [x for s in vertex.subtasks.values() for x in s.split_states]
        try:
            notify(metadata.checkpoint_id, {x.split.split_id: x.position for x in states})
        except Exception:
            logger.exception("source %s: notify_checkpoint_complete failed", coordinator.name)
