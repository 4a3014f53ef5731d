"""FileSourceReader: reads whole file splits, several to a bundle, as one Spark plan."""

from __future__ import annotations

import time
from collections import deque

from millrace.api.connector.source import WHOLE_INPUT, SourceBundle, SourceReaderContext
from millrace.connectors.file_formats import CORRUPT_COLUMN, FileFormat
from millrace.runtime.io.input_split import InputSplit, SplitState
from millrace.spark.parquet_schema import parquet_spark_schema

__all__ = ["FileSourceReader"]


class FileSourceReader:
    """A SourceReader of file splits (files, Parquet row groups), each read whole.

    A bundle takes queued splits until their row counts (from statistics; unknown counts as a
    full bundle) reach ``max_records``; a split that would overflow waits for the next bundle.
    With ``max_records`` = ``WHOLE_INPUT`` (BATCH mode) a bundle takes every queued split, so
    that the files are read by one Spark scan (a union of one scan per file costs about 40%
    more here, bench/word_count.py).
    A Parquet file's schema comes from its footer (``parquet_spark_schema``) or the first
    bundle's inference, and is reused, so later bundles skip schema inference.

    Args:
        file_format: How the files are parsed.
        context: The task's reader context.

    Threading:
        The source task's thread only.
    """

    def __init__(self, file_format: FileFormat, context: SourceReaderContext) -> None:
        self._format = file_format
        self._spark = context.spark
        self._max_records = context.max_records
        self._queue: deque[InputSplit] = deque()
        self._schema = None

    def _size(self, split: InputSplit) -> int:
        if self._max_records == WHOLE_INPUT:
            return 0  # one bundle of everything: sizes do not matter
        return split.rows if split.rows is not None else self._max_records

    def add_split(self, split: InputSplit, position: int) -> None:
        """Queue a split; file splits are read whole, so ``position`` is 0."""
        self._queue.append(split)

    def wants_splits(self) -> bool:
        return sum(self._size(s) for s in self._queue) < self._max_records

    def poll(self, timeout: float) -> SourceBundle | None:
        """A bundle of the queued splits (None after ``timeout`` s if none is queued)."""
        if not self._queue:
            time.sleep(timeout)
            return None
        splits = [self._queue.popleft()]
        rows = self._size(splits[0])
        while self._queue and rows + self._size(self._queue[0]) <= self._max_records:
            rows += self._size(self._queue[0])
            splits.append(self._queue.popleft())
        if self._schema is None and self._format.name == "parquet":
            self._schema = parquet_spark_schema(splits[0].path)  # None: Spark infers it
        read = self._format.read(self._spark, splits, self._schema)
        if self._schema is None and self._format.name == "parquet":
            self._schema = read.frame.schema
        return SourceBundle(
            read.frame,
            [SplitState(s, 0, finished=True) for s in splits],
            malformed_reason=read.malformed_reason,
            raw_record=read.raw_record,
            full_parse=read.full_parse,
            internal_columns=(CORRUPT_COLUMN,) if read.raw_record is not None else (),
        )

    def snapshot(self) -> list[SplitState]:
        return [SplitState(s, 0) for s in self._queue]

    def is_finished(self) -> bool:
        return not self._queue

    def close(self) -> None:
        self._queue.clear()
