"""BatchSourceTask: a source subtask in BATCH mode — all of its splits as one Spark plan.

The subtask first takes every split the JobMaster assigns it (RequestNextInputSplit until none
is left), then reads them as one lazy DataFrame and runs the chain over it with one action: one
Spark job per subtask instead of one per bundle (Flink's BATCH mode runs a bounded source to
its end as one stage). A reader that returns several bundles (files of unknown size, a bounded
Kafka range) has them unioned into that one plan. No watermark is emitted and no record is
late: in BATCH every record lands in its window (Flink sorts by key and time instead). The
output goes to the exchange store, one file per consumer subtask, followed by
``EndOfPartition``; consumers start once every producer FINISHED (blocking exchange).
Checkpoints are not taken in BATCH; sinks chained here stage their output for the job's final
commit.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace

from millrace.api.connector.source import WHOLE_INPUT, SourceBundle
from millrace.runtime.io import exchange_store
from millrace.runtime.io.partition_events import MAX_WATERMARK, EndOfPartition
from millrace.spark.source_stream_task import SourceStreamTask

__all__ = ["BatchSourceTask"]

logger = logging.getLogger(__name__)

_SPLIT_WAIT = 0.05  # seconds between two asks while a bounded source still expects splits


class BatchSourceTask(SourceStreamTask):
    """Runs a source chain over its whole input with one Spark job.

    Threading:
        ``invoke`` on the task thread.
    """

    def invoke(self) -> None:
        env = self.environment
        self._open(WHOLE_INPUT)  # no bundle limit: the whole input is one plan
        try:
            self._fetch_share()
            bundle = self._whole_input()
            if bundle is not None:
                started = time.perf_counter()
                self._run_bundle(bundle, 0, None)
                self._finished += [s.split.split_id for s in bundle.progress]
                logger.info(
                    "%s: %d splits as one Spark job in %.3f s",
                    env.task_name,
                    len(bundle.progress),
                    time.perf_counter() - started,
                )
        finally:
            self._reader.close()
        self.report_clock(MAX_WATERMARK, force=True)
        if self.tdd.output_partition is not None:
            # the blocking partition in the exchange store, empty if no record went out
            exchange_store.mark_partition(
                exchange_store.partition_directory(
                    env.working_dir, self.tdd.vertex_id, self.tdd.attempt_id
                )
            )
            env.broadcast(EndOfPartition())

    def _fetch_share(self) -> None:
        """Ask for splits (RequestNextInputSplit) until the source is exhausted or this subtask
        holds its share, ``ceil(splits / parallelism)``: a subtask deployed first must not take
        every split, as its whole input runs as one Spark job (balance by split count)."""
        env = self.environment
        taken = 0
        while True:
            env.check_cancelled()
            reply = env.next_input_split(timeout=self.ask_timeout)
            if reply.split is None:
                if not reply.more_expected:
                    return
                with env.io_metrics.idle():  # a bounded source still discovering its splits
                    time.sleep(_SPLIT_WAIT)
                continue
            self._reader.add_split(reply.split, reply.position)
            taken += 1
            share = -(-reply.splits_total // self.tdd.parallelism)
            if share > 0 and taken >= share:
                return

    def _whole_input(self) -> SourceBundle | None:
        """Every bundle the reader has, as one (frames unioned by column name), or None."""
        bundles = []
        while not self._reader.is_finished():
            self.environment.check_cancelled()
            bundle = self._reader.poll(self._max_delay)
            if bundle is not None:
                bundles.append(bundle)
        if not bundles:
            return None
        frame = bundles[0].frame
        for other in bundles[1:]:
            frame = frame.unionByName(other.frame)
        progress = [state for b in bundles for state in b.progress]
        return replace(bundles[0], frame=frame, progress=progress)
