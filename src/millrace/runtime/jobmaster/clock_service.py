"""GlobalClockService: the JobMaster's view of event-time progress (Gearpump's global clock,
seed 001).

Every task reports its min clock — a source the watermark it emitted (MAX while it is idle:
nothing of it is pending), a window task the watermark up to which it fired — when it moves.
The global min clock is the minimum over the job's current tasks and never goes back: every
record with an earlier event time has been processed. REST shows it with every task's clock
(``GET /jobs/{id}/watermarks``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from millrace.runtime.executiongraph import Execution
from millrace.runtime.io.partition_events import MIN_WATERMARK
from millrace.types import ExecutionAttemptId

__all__ = ["GlobalClockService", "TaskClock", "WatermarksInfo"]


@dataclass(frozen=True)
class TaskClock:
    """One task's reported min clock.

    Attributes:
        vertex: The vertex's name.
        subtask_index: The subtask.
        watermark_ms: Its min clock, epoch ms (MIN_WATERMARK before any report).
    """

    vertex: str
    subtask_index: int
    watermark_ms: int


class GlobalClockService:
    """Task clocks of one job and its monotonic global min clock.

    Threading:
        JobMaster main thread only.
    """

    def __init__(self) -> None:
        self._clocks: dict[ExecutionAttemptId, TaskClock] = {}
        self.min_clock = MIN_WATERMARK

    def reset(self, executions: Iterable[Execution]) -> None:
        """The job's current Executions (after a deployment or a restart); their clocks start
        at MIN."""
        self._clocks = {
            e.attempt_id: TaskClock(e.vertex.job_vertex.name, e.vertex.subtask_index, MIN_WATERMARK)
            for e in executions
        }

    def report(self, attempt_id: ExecutionAttemptId, watermark_ms: int) -> None:
        """A task's clock moved (reports of former attempts are ignored). An idle source
        reports MAX_WATERMARK: nothing of it is pending (seed 001's definition of a task's min
        clock); the global min clock still never goes back."""
        clock = self._clocks.get(attempt_id)
        if clock is None or watermark_ms == clock.watermark_ms:
            return
        self._clocks[attempt_id] = TaskClock(clock.vertex, clock.subtask_index, watermark_ms)
        current = min(c.watermark_ms for c in self._clocks.values())
        self.min_clock = max(self.min_clock, current)

    def task_clocks(self) -> list[TaskClock]:
        return sorted(self._clocks.values(), key=lambda c: (c.vertex, c.subtask_index))


@dataclass(frozen=True)
class WatermarksInfo:
    """The global min clock and every task's clock (REST ``/jobs/{id}/watermarks``).

    Attributes:
        min_clock_ms: The global min clock, epoch ms; monotonic.
        tasks: Per task, its reported min clock.
    """

    min_clock_ms: int
    tasks: list[TaskClock]
