"""The JobMaster's side of a source (Flink's FLIP-27): whether it ends, and its
SplitEnumerator. The runtime owns this contract (its SourceCoordinator drives it); the connector
API (``millrace.api.connector.source``) offers it with the task side, the SourceReader.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from millrace.runtime.io.input_split import InputSplit, NextInputSplit

__all__ = ["Boundedness", "SplitEnumerator", "SupportsSplitsBack"]


class Boundedness(enum.Enum):
    """Whether a source ends (Flink's Boundedness)."""

    BOUNDED = "BOUNDED"
    CONTINUOUS_UNBOUNDED = "CONTINUOUS_UNBOUNDED"


class SplitEnumerator(Protocol):
    """Discovers a source's splits and assigns them to subtasks, in the JobMaster.

    Threading:
        ``discover`` runs in the JobMaster's I/O executor and may block (list files, fetch
        metadata); every other method runs on the JobMaster's main thread and must not block.
    """

    def discover(self) -> list[InputSplit]:
        """Splits found since the last call (all of them on the first call).

        A bounded source's enumerator is asked once; an unbounded one again every
        ``source.discovery-interval``. Splits with an id seen before are ignored by the caller.

        Raises:
            Exception: Whatever listing raises; the job fails (first call) or the discovery is
                retried at the next interval (later calls).
        """
        ...

    def add_splits(self, splits: Sequence[InputSplit]) -> None:
        """Splits to hand out (new from ``discover``, or back from a restore)."""
        ...

    def next_split(self, subtask_index: int, parallelism: int) -> NextInputSplit:
        """The next split for subtask ``subtask_index``; split None when none is left for it
        now (``more_expected`` tells whether to ask again later).

        The reply's ``watermark_bound_ms`` bounds the event times of the splits this subtask
        may still receive (see NextInputSplit); an unbounded source that cannot know returns
        MAX_WATERMARK, so undiscovered splits do not hold the watermark back.
        """
        ...

    @property
    def splits_total(self) -> int:
        """Splits known so far (progress)."""
        ...

    @property
    def splits_assigned(self) -> int:
        """Splits handed out so far (progress)."""
        ...


@runtime_checkable
class SupportsSplitsBack(Protocol):
    """A SplitEnumerator that takes splits back (Flink's ``SplitEnumerator.addSplitsBack``):
    the splits a failed source subtask of a BATCH job was handed go out again, so that subtask
    alone runs again (region failover) instead of the whole job.

    Threading:
        The JobMaster's main thread.
    """

    def add_splits_back(self, splits: Sequence[InputSplit]) -> None:
        """Hand ``splits`` out again; they were counted when first added, so ``splits_total``
        does not change and ``splits_assigned`` goes down by their number."""
        ...
