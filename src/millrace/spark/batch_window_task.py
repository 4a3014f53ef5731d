"""BatchWindowTask: a keyed window subtask in BATCH mode — one aggregation over its whole input.

Deployed once every producer subtask FINISHED (blocking exchange, Flink's BLOCKING result
partitions), the subtask reads the complete exchange files its producers wrote for it — found
in the exchange store under each producer attempt named by its input channels, not pulled from
the producers' TaskManagers, so they outlive a lost TaskManager — and runs one Spark job:
merge the partials (or aggregate the records) per key and window, the chained transforms, and
the sinks stage the result for the job's final commit. Every window fires once, at the end; no
watermark, no compaction, no intermediate firing, no checkpoint. The exchange files stay until
the job ends, so that a failed subtask can run again from them (region failover,
``runtime/failover/region_failover.py``).
"""

from __future__ import annotations

import logging
import time

from millrace.api.operators import WindowAggregateOperator
from millrace.errors import PipelineError
from millrace.spark.blocking_exchange import blocking_input_files, exchange_rows
from millrace.spark.parquet_schema import parquet_spark_schema
from millrace.spark.window_firing import fired_once
from millrace.spark.window_stream_task import WindowStreamTask

__all__ = ["BatchWindowTask"]

logger = logging.getLogger(__name__)


class BatchWindowTask(WindowStreamTask):
    """Runs a keyed window chain over its complete input with one Spark job.

    Threading:
        ``invoke`` on the task thread.
    """

    def invoke(self) -> None:
        env = self.environment
        op = self.operators[0]
        if not isinstance(op, WindowAggregateOperator) or not self.sinks:
            raise PipelineError(
                "a window chain must start with a WindowAggregateOperator and end in a sink",
                env.task_name,
            )
        self._op = op
        started = time.perf_counter()
        paths = blocking_input_files(env.working_dir, self.tdd)
        if not paths:
            logger.info("%s: no input; nothing to fire", env.task_name)
            return
        env.metrics.records_in += exchange_rows(paths)
        schema = parquet_spark_schema(paths[0])  # the producers' Arrow schema from Spark
        reader = self.spark.read if schema is None else self.spark.read.schema(schema)
        # one partition: the input is this subtask's key groups, already partitioned; the
        # aggregation then needs no shuffle (one Spark stage)
        frame = reader.parquet(*paths).coalesce(1)
        result = fired_once(frame, op)  # every window fires once, at the end
        table = self.collect(self.apply_transforms(result, self.transforms))
        env.metrics.records_out += self.write_sinks(table, 0)
        env.metrics.bundles += 1
        logger.info(
            "%s: fired once over %d exchange files: %d rows in %.3f s",
            env.task_name,
            len(paths),
            table.num_rows,
            time.perf_counter() - started,
        )
        self.report_progress()
