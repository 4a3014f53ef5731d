"""BatchKeyedChainTask: a BATCH source chain with its keyed stage chained in — one Spark job.

When a bounded source and the keyed operator it feeds both run at parallelism 1, the HASH edge
between them sends every record to the one consumer subtask: it is a forward edge in effect,
so the JobGraph chains the keyed operator (a window, or a running aggregate) into the source
vertex (``api/keyed_chaining.py``), as Flink chains operators joined by a forward edge. The
subtask then runs the whole job as one Spark plan and one action: read every split, the
transforms, partial aggregates, Spark's own shuffle to the final aggregates, every window
fired once, the transforms after the window, and the sinks stage the result for the job's
final commit. No exchange files and no second Spark job: the shape of a plain PySpark batch
job. The result is the same as the two-stage BATCH path's (partials then final aggregates, so
the output types are the same at every parallelism).

Failures: the vertex is one region, re-run as a whole from its source (region failover).
"""

from __future__ import annotations

import logging
from typing import Any

from millrace.api.operators import (
    KeyedAggregateOperator,
    KeyedRecordsOperator,
    LocalKeyedAggregateOperator,
    LocalWindowAggregateOperator,
    TransformOperator,
    WindowAggregateOperator,
    WindowAssignOperator,
)
from millrace.errors import PipelineError
from millrace.runtime.taskexecutor.task_environment import TaskEnvironment
from millrace.spark.batch_source_task import BatchSourceTask
from millrace.spark.running_aggregation import aggregated_once
from millrace.spark.window_firing import fired_once
from millrace.spark.windowing import (
    LATEST,
    WINDOW_END,
    WINDOW_START,
    assign_windows,
    marks_latest,
    merge_sessions,
)

__all__ = ["BatchKeyedChainTask"]

logger = logging.getLogger(__name__)


class BatchKeyedChainTask(BatchSourceTask):
    """Runs a source chain, its keyed operator and the keyed operator's chain as one Spark job.

    The chain's operators: ``source, transforms..., partition operator, keyed operator,
    transforms..., sinks..., side outputs...`` (the partition operator is what the source
    vertex would end with before a HASH edge: local partials or records with their windows).

    Raises:
        PipelineError: From the constructor, if the chain has no keyed operator after a
            partition operator, or no sink.

    Threading:
        ``invoke`` on the task thread.
    """

    def __init__(self, environment: TaskEnvironment) -> None:
        super().__init__(environment)
        index = next(
            (
                i
                for i, op in enumerate(self.operators)
                if isinstance(op, WindowAggregateOperator | KeyedAggregateOperator)
            ),
            None,
        )
        partition = (
            LocalWindowAggregateOperator,
            WindowAssignOperator,
            LocalKeyedAggregateOperator,
            KeyedRecordsOperator,
        )
        if index is None or index < 2 or not isinstance(self.operators[index - 1], partition):
            raise PipelineError(
                "a keyed chain must hold a partition operator followed by a window or a "
                "running aggregate",
                environment.task_name,
            )
        if not self.sinks:
            raise PipelineError("a keyed chain must end in a sink", environment.task_name)
        self._keyed_op: WindowAggregateOperator | KeyedAggregateOperator = self.operators[index]
        self._partition_op = self.operators[index - 1]
        # transforms before the key_by run on records; those after it on the keyed output
        self.transforms = [op for op in self.operators[:index] if isinstance(op, TransformOperator)]
        self._keyed_transforms = [
            op for op in self.operators[index + 1 :] if isinstance(op, TransformOperator)
        ]

    def _open(self, max_records: int) -> None:
        super()._open(max_records)
        self._tail = self._partition_op  # the chain goes on past it, in this task

    def _window_output(
        self,
        frame: Any,
        tail: LocalWindowAggregateOperator | WindowAssignOperator,
        watermark: int | None,
        sequence: int,
    ) -> tuple[int, Any]:
        """Every window of the whole input fired once, in the source's Spark job: partials per
        key and window (Spark's shuffle between them and the final aggregates), or records with
        their windows for a pandas function or an aggregate that does not decompose.

        Returns:
            No late record (BATCH), and no windowed records.
        """
        op = self._keyed_op
        assert isinstance(op, WindowAggregateOperator)
        window = tail.window
        assigned = assign_windows(frame, tail.event_time, window)
        if marks_latest(window):  # counting rows once is the exchange's concern
            assigned = assigned.drop(LATEST)
        if isinstance(tail, LocalWindowAggregateOperator):
            bounds = [WINDOW_START, WINDOW_END] if window.is_merging else [WINDOW_START]
            local = merge_sessions(assigned, list(tail.keys)) if window.is_merging else assigned
            # grouped by the window operator's grouping columns: its aggregation needs no
            # second shuffle
            state = local.groupBy(*tail.keys, *bounds).agg(*tail.plan.partial_columns())
        else:
            state = assigned
        self._write_result(fired_once(state, op))
        return 0, None

    def _keyed_output(
        self, frame: Any, tail: LocalKeyedAggregateOperator | KeyedRecordsOperator, sequence: int
    ) -> None:
        """One final row per key of the whole input, in the source's Spark job."""
        op = self._keyed_op
        assert isinstance(op, KeyedAggregateOperator)
        if isinstance(tail, LocalKeyedAggregateOperator):
            frame = frame.groupBy(*tail.keys).agg(*tail.plan.partial_columns())
        self._write_result(aggregated_once(frame, op))

    def _write_result(self, result: Any) -> None:
        """Run the one Spark job: ``result`` through the transforms after the keyed operator,
        staged in every sink for the job's final commit."""
        table = self.collect(self.apply_transforms(result, self._keyed_transforms))
        self.environment.metrics.records_out += self.write_sinks(table, 0)
        logger.info(
            "%s: keyed stage chained into the source: %d rows",
            self.environment.task_name,
            table.num_rows,
        )
