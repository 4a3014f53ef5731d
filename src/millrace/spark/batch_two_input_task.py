"""BatchTwoInputTask: a join subtask in BATCH mode — one Spark join over both complete inputs.

Deployed once every producer subtask of both inputs FINISHED (blocking exchange, Flink's
BLOCKING result partitions), the subtask reads the complete exchange files its producers wrote
for it (``blocking_exchange``; each input channel names its input, ``input_index``), checks
each channel's schema against its input's and the key types of the two inputs, as the
streaming task does, and runs the join ONCE: one Spark job joins all rows of the first input
with all rows of the second (the streaming task's own plan, ``pairs``), applies the chained
transforms and stages the result in the sinks for the job's final commit. No watermark, so
nothing is late and no state is dropped; no state files, no checkpoints. The exchange files
stay until the job ends, so a failed subtask can run again from them (region failover,
``runtime/failover/region_failover.py``).

* ``BatchWindowJoinTask``: every pair with equal keys in the same window (the producers gave
  each row its ``__ws``, one row per sliding window), once per window.
* ``BatchIntervalJoinTask``: every pair with equal keys and
  ``a.ts + lower <= b.ts <= a.ts + upper`` (inclusive), once.
"""

from __future__ import annotations

import logging
import time

from millrace.spark.blocking_exchange import blocking_channel_files, exchange_rows
from millrace.spark.interval_join_stream_task import IntervalJoinStreamTask
from millrace.spark.two_input_stream_task import TwoInputStreamTask
from millrace.spark.window_join_stream_task import WindowJoinStreamTask

__all__ = ["BatchIntervalJoinTask", "BatchTwoInputTask", "BatchWindowJoinTask"]

logger = logging.getLogger(__name__)


class BatchTwoInputTask(TwoInputStreamTask):
    """Runs a join chain (join, transforms, sinks) over both complete inputs with one Spark
    job; the join itself is the streaming subclass's ``pairs`` (mixed in after this class).

    Raises:
        PipelineError: From ``invoke``, if the chain does not start with its join operator or
            has no sink, a producer's output is missing from the exchange store, the files
            of one input have different schemas, or the keys of the two inputs have different
            types.

    Threading:
        ``invoke`` on the task thread.
    """

    def invoke(self) -> None:
        env = self.environment
        self.open_inputs()
        started = time.perf_counter()
        paths: tuple[list[str], list[str]] = ([], [])
        for channel, files in enumerate(blocking_channel_files(env.working_dir, self.tdd)):
            if files:
                self.check_input_file(channel, files[0])
                paths[self._inputs[channel]].extend(files)
        env.metrics.records_in += exchange_rows([*paths[0], *paths[1]])
        if not (paths[0] and paths[1]):  # inner: nothing without both inputs
            logger.info("%s: an input is empty; no pair", env.task_name)
            self.report_progress()
            return
        rows = self.emit(self.pairs(self.read(paths[0], 0), self.read(paths[1], 1)))
        logger.info(
            "%s: joined once over %d + %d exchange files: %d pairs in %.3f s",
            env.task_name,
            len(paths[0]),
            len(paths[1]),
            rows,
            time.perf_counter() - started,
        )
        self.report_progress()


class BatchWindowJoinTask(BatchTwoInputTask, WindowJoinStreamTask):
    """A window join (``WindowJoinStreamTask``'s plan) run once over both complete inputs.

    Schema:
        ``(first input's columns..., second input's columns..., window_start: timestamp,
        window_end: timestamp)``, one row per matching pair and window.

    Threading:
        ``invoke`` on the task thread.
    """


class BatchIntervalJoinTask(BatchTwoInputTask, IntervalJoinStreamTask):
    """An interval join (``IntervalJoinStreamTask``'s plan) run once over both complete inputs.

    Schema:
        ``(first input's columns..., second input's columns...)``, one row per pair.

    Threading:
        ``invoke`` on the task thread.
    """
