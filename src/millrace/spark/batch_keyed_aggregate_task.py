"""BatchKeyedAggregateTask: a running keyed aggregate (``key_by().agg()``) in BATCH mode.

Deployed once every producer subtask FINISHED (blocking exchange), the subtask reads the
complete exchange files its producers wrote for it (``blocking_exchange``) and runs one Spark
job: partials merged (or records aggregated) per key, the chained transforms, and the sinks
stage one final row per key for the job's final commit (Flink's BATCH GROUP BY emits final
values, no updates). No state files, compaction or checkpoints; the exchange files stay until
the job ends, so a failed subtask can run again from them (region failover).
"""

from __future__ import annotations

import logging
import time

from millrace.api.operators import KeyedAggregateOperator
from millrace.errors import PipelineError
from millrace.spark.blocking_exchange import blocking_input_files, exchange_rows
from millrace.spark.keyed_aggregate_stream_task import KeyedAggregateStreamTask
from millrace.spark.parquet_schema import parquet_spark_schema
from millrace.spark.running_aggregation import emitted_rows

__all__ = ["BatchKeyedAggregateTask"]

logger = logging.getLogger(__name__)


class BatchKeyedAggregateTask(KeyedAggregateStreamTask):
    """Runs a running-aggregate chain over its complete input with one Spark job.

    Threading:
        ``invoke`` on the task thread.
    """

    def invoke(self) -> None:
        env = self.environment
        op = self.operators[0]
        if not isinstance(op, KeyedAggregateOperator) or not self.sinks:
            raise PipelineError(
                "a running-aggregate chain must start with a KeyedAggregateOperator and end "
                "in a sink",
                env.task_name,
            )
        started = time.perf_counter()
        paths = blocking_input_files(env.working_dir, self.tdd)
        if not paths:
            logger.info("%s: no input; no key to emit", env.task_name)
            return
        env.metrics.records_in += exchange_rows(paths)
        # one partition: the input is this subtask's key groups, already partitioned; the
        # aggregation then needs no shuffle (one Spark stage)
        result = emitted_rows(
            self.spark, op, [], paths, parquet_spark_schema(paths[0]), one_partition=True
        )
        table = self.collect(self.apply_transforms(result, self.transforms))
        env.metrics.records_out += self.write_sinks(table, 0)
        env.metrics.bundles += 1
        logger.info(
            "%s: aggregated once over %d exchange files: %d keys in %.3f s",
            env.task_name,
            len(paths),
            table.num_rows,
            time.perf_counter() - started,
        )
        self.report_progress()
