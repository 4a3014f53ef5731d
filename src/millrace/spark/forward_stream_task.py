"""ForwardStreamTask: the sink vertex of a union that feeds sinks directly.

Every producer (each input of the union, its transforms chained in) sends each bundle as one
exchange file over a REBALANCE edge; this task stages each file it receives in every sink of
its chain, read with pyarrow (no Spark job: the records were processed by the producers' Spark
jobs), then deletes the file (so the exchange store holds only what is in flight). Its sinks
are written by this vertex alone, so their two-phase commit is that of a single-input job: at
an aligned barrier (over the channels of every input) the task pre-commits what it staged and
acknowledges.
"""

from __future__ import annotations

import logging

from millrace.config import ExecutionOptions
from millrace.errors import CheckpointDeclinedError, PipelineError, TaskCancelledError
from millrace.runtime.checkpoint.task_state_snapshot import TaskStateSnapshot
from millrace.runtime.io import exchange_store
from millrace.runtime.io.partition_events import CheckpointBarrier, DataBundle
from millrace.spark.input_schemas import InputSchemas
from millrace.spark.keyed_state_files import remove_file
from millrace.spark.stream_task import SparkStreamTask

__all__ = ["ForwardStreamTask"]

logger = logging.getLogger(__name__)


class ForwardStreamTask(SparkStreamTask):
    """Stages the bundles of its inputs in its sinks.

    Threading:
        ``invoke`` on the task thread.
    """

    def invoke(self) -> None:
        env = self.environment
        gate = env.input_gate
        if gate is None or not self.sinks:
            raise PipelineError("a forward chain needs an input gate and a sink", env.task_name)
        schemas = InputSchemas(self.tdd.input_channels, env.task_name)
        poll_timeout = env.configuration.get(ExecutionOptions.PARTITION_POLL_TIMEOUT)
        sequence = 0
        while not gate.finished:
            env.check_cancelled()
            for channel, event in self.poll_input(gate, poll_timeout):
                if isinstance(event, DataBundle):
                    self.forward_file(schemas, channel, event.path, sequence)
                    sequence += 1
                elif isinstance(event, CheckpointBarrier):
                    self._checkpoint(event)
            self.report_clock(gate.watermark)
            self.report_progress()
        self.report_clock(gate.watermark, force=True)
        gate.close()

    def forward_file(self, schemas: InputSchemas, channel: int, path: str, sequence: int) -> int:
        """Stage the exchange file ``path``, arrived on ``channel``, in every sink (pyarrow,
        no Spark job) as the subtask's ``sequence``-th part; returns its rows.

        Raises:
            PipelineError: If the file's schema differs from its input's first file.

        Threading:
            The task thread.
        """
        env = self.environment
        schemas.check(channel, path)
        table = exchange_store.read_parquet(path)
        env.metrics.records_in += table.num_rows
        rows = int(self.write_sinks(table, sequence))
        remove_file(path)  # staged in the sinks; a restore replays from the sources
        env.metrics.records_out += rows
        env.metrics.bundles += 1
        return rows

    def _checkpoint(self, barrier: CheckpointBarrier) -> None:
        """Pre-commit the sinks and acknowledge (decline if a pre-commit failed)."""
        env = self.environment
        try:
            sink_pending = self.pre_commit(barrier.checkpoint_id)
        except TaskCancelledError:
            raise
        except CheckpointDeclinedError as declined:
            logger.warning("%s: %s", env.task_name, declined)
            env.checkpoint_responder.decline_checkpoint(barrier.checkpoint_id, declined.reason)
            return
        env.checkpoint_responder.acknowledge_checkpoint(
            barrier.checkpoint_id, TaskStateSnapshot(sink_pending=sink_pending)
        )
