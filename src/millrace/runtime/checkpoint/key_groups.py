"""Key groups: the unit in which keyed state is partitioned and moved on rescaling (Flink's).

``key_group = murmur3(keys) mod max_parallelism`` (computed by Spark, ``spark/windowing.py``);
subtask ``i`` of ``p`` owns the contiguous range :func:`key_group_range` and a key group goes
to subtask ``key_group * p // max_parallelism``. Restoring at another parallelism hands each new
subtask the state of the key groups in its range, whichever old subtask held them.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["KeyGroupRange", "key_group_range"]


@dataclass(frozen=True)
class KeyGroupRange:
    """Key groups ``start..end``, both inclusive; empty when ``end < start``."""

    start: int
    end: int

    def intersects(self, other: KeyGroupRange) -> bool:
        return self.start <= other.end and other.start <= self.end

    def __contains__(self, key_group: int) -> bool:
        return self.start <= key_group <= self.end


def key_group_range(max_parallelism: int, parallelism: int, subtask_index: int) -> KeyGroupRange:
    """The key groups of subtask ``subtask_index`` (Flink's
    computeKeyGroupRangeForOperatorIndex).

    Raises:
        ValueError: If ``parallelism`` is not in ``1..max_parallelism`` or the index is out of
            range.
    """
    if not 1 <= parallelism <= max_parallelism or not 0 <= subtask_index < parallelism:
        raise ValueError(
            f"subtask {subtask_index} of parallelism {parallelism} with max parallelism "
            f"{max_parallelism} is out of range"
        )
    start = (subtask_index * max_parallelism + parallelism - 1) // parallelism
    end = ((subtask_index + 1) * max_parallelism - 1) // parallelism
    return KeyGroupRange(start, end)
