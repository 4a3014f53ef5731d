"""BatchForwardTask: the sink vertex of a union into sinks, in BATCH mode.

Deployed once every producer subtask of every input of the union FINISHED (blocking exchange,
Flink's BLOCKING result partitions), the subtask stages, in every sink of its chain, each
exchange file its producers wrote for it over their REBALANCE edges (``blocking_exchange``),
read with pyarrow: no Spark job, as the records were processed by the producers' Spark jobs.
Each channel's schema is checked against its input's first file, as in STREAMING. The staged
output is committed by the job's final checkpoint; no checkpoint before. The exchange files
stay until the job ends, so a failed subtask can run again from them (region failover).
"""

from __future__ import annotations

import logging
import time

from millrace.errors import PipelineError
from millrace.spark.blocking_exchange import blocking_channel_files
from millrace.spark.forward_stream_task import ForwardStreamTask
from millrace.spark.input_schemas import InputSchemas

__all__ = ["BatchForwardTask"]

logger = logging.getLogger(__name__)


class BatchForwardTask(ForwardStreamTask):
    """Stages the complete output of its producers in its sinks.

    Raises:
        PipelineError: From ``invoke``, if the chain has no sink, a producer's output is
            missing from the exchange store, or the streams of the union have different
            schemas.

    Threading:
        ``invoke`` on the task thread.
    """

    def invoke(self) -> None:
        env = self.environment
        if not self.sinks:
            raise PipelineError("a forward chain needs a sink", env.task_name)
        started = time.perf_counter()
        schemas = InputSchemas(self.tdd.input_channels, env.task_name)
        sequence = rows = 0
        for channel, files in enumerate(blocking_channel_files(env.working_dir, self.tdd)):
            for path in files:
                rows += self.forward_file(schemas, channel, path, sequence)
                sequence += 1
        logger.info(
            "%s: staged %d exchange files, %d rows, in %.3f s",
            env.task_name,
            sequence,
            rows,
            time.perf_counter() - started,
        )
        self.report_progress()
