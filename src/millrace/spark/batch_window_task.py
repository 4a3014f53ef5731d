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
from pathlib import Path

from millrace.errors import PipelineError
from millrace.spark.parquet_schema import parquet_spark_schema
from millrace.spark.window_stream_task import WindowStreamTask

__all__ = ["BatchWindowTask", "blocking_input_files"]

logger = logging.getLogger(__name__)


class BatchWindowTask(WindowStreamTask):
    """Runs a keyed window chain over its complete input with one Spark job.

    Threading:
        ``invoke`` on the task thread.
    """

    def invoke(self) -> None:
        env = self.environment
        self.open_chain()
        started = time.perf_counter()
        paths = blocking_input_files(
            env.working_dir / "exchange",
            [channel.partition_id for channel in self.tdd.input_channels],
            self.tdd.subtask_index,
        )
        if not paths:
            logger.info("%s: no input; nothing to fire", env.task_name)
            return
        env.metrics.records_in += _rows(paths)
        schema = parquet_spark_schema(paths[0])  # the producers' Arrow schema from Spark
        reader = self.spark.read if schema is None else self.spark.read.schema(schema)
        # one partition: the input is this subtask's key groups, already partitioned; the
        # aggregation then needs no shuffle (one Spark stage)
        frame = reader.parquet(*paths).coalesce(1)
        table = self.collect(self.window_result(frame))
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


def blocking_input_files(exchange: Path, producers: list[str], subtask_index: int) -> list[str]:
    """The exchange files the producer attempts ``producers`` wrote for consumer subtask
    ``subtask_index``, sorted.

    Args:
        exchange: The job's exchange store (``<working dir>/exchange``; every producer writes
            under ``<vertex>/<attempt>/``).
        producers: The producers' attempt ids (their result partition ids).
        subtask_index: The consumer subtask, 0-based.

    Raises:
        PipelineError: If a producer attempt has no directory in the store (it did not run
            here, or the store was cleaned).
    """
    files: list[str] = []
    for attempt in producers:
        directories = list(exchange.glob(f"*/{attempt}"))
        if not directories:
            raise PipelineError(
                f"the exchange store {exchange} holds no output of producer attempt {attempt}"
            )
        for directory in directories:
            files += [str(p) for p in directory.glob(f"*-to{subtask_index:03d}.parquet")]
    return sorted(files)


def _rows(paths: list[str]) -> int:
    """Rows of the Parquet files ``paths``, from their footers (no Spark job)."""
    import pyarrow.parquet as pq

    return sum(pq.read_metadata(path).num_rows for path in paths)
