"""DirectorySource: an unbounded source of the files that appear in a directory (Flink's
FileSource in continuous mode).

The JobMaster's enumerator lists the directory every ``source.discovery-interval`` and makes
each file it has not seen a split; subtasks pull them. A file must appear complete (written
elsewhere, then moved in; names starting with ``.`` or ``_`` are ignored until renamed). Every
file has an offset: the rows read so far. Parquet files are read in row groups, up to
``execution.bundle.max-records`` rows per bundle, so a large file spans several bundles and a
restored job resumes inside it; CSV and text files are read whole (offset 0, then finished).
A Parquet file read whole in one bundle (from row 0, at most ``max-records`` rows, a local
path, types Spark reads as given) is handed to Spark as the file itself, a vectorized scan,
with no conversion of its records from Arrow; a file read in parts goes through Arrow.
Watermarks come from the data of each file (per split), and a subtask that has read all it got
holds its watermark where its data left it.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from millrace.api.connector.source import Boundedness, SourceBundle, SourceReaderContext
from millrace.connectors.file_formats import (
    CORRUPT_COLUMN,
    FileFormat,
    absolute_local_path,
    list_files,
)
from millrace.runtime.io.input_split import InputSplit, NextInputSplit, SplitState
from millrace.runtime.io.partition_events import MAX_WATERMARK, MIN_WATERMARK
from millrace.spark.parquet_schema import parquet_spark_schema

__all__ = ["DirectorySource", "DirectorySourceReader", "DirectorySplitEnumerator"]

SPLIT_COLUMN = "__split"


@dataclass(frozen=True)
class DirectorySource:
    """New files under ``path`` in one format, read as they appear, forever.

    Use the constructors ``parquet``, ``csv`` and ``text``.

    Args:
        path: Directory (local path, made absolute here in the client, or fsspec URL).
        format: ``parquet``, ``csv`` or ``text``.
        schema: Spark schema (DDL string or StructType); required for CSV.
        options: Spark reader options (CSV: ``header``, ``sep``...).

    Raises:
        ValueError: For an unknown format, or CSV without a schema.
    """

    path: str
    format: str
    schema: Any = None
    options: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", absolute_local_path(self.path))
        _ = self.file_format

    @classmethod
    def parquet(cls, path: str) -> DirectorySource:
        """Parquet files, read in row groups."""
        return cls(path, "parquet")

    @classmethod
    def csv(
        cls, path: str, schema: Any, header: bool = True, sep: str = ",", **options: str
    ) -> DirectorySource:
        """CSV files with ``schema``; rows that do not fit it become dead letters."""
        return cls(path, "csv", schema, {"header": str(header).lower(), "sep": sep, **options})

    @classmethod
    def text(cls, path: str) -> DirectorySource:
        """Text files; one row per line in a ``value`` column."""
        return cls(path, "text")

    @property
    def file_format(self) -> FileFormat:
        return FileFormat(self.format, self.schema, self.options)

    @property
    def boundedness(self) -> Boundedness:
        return Boundedness.CONTINUOUS_UNBOUNDED

    def describe(self) -> str:
        return f"new {self.format} files in {self.path}"

    def create_enumerator(self, event_time: str | None) -> DirectorySplitEnumerator:
        return DirectorySplitEnumerator(self.path, self.file_format)

    def create_reader(self, context: SourceReaderContext) -> DirectorySourceReader:
        return DirectorySourceReader(self.file_format, context)


class DirectorySplitEnumerator:
    """Lists the directory; every new file is a split, handed out in discovery order.

    Threading:
        ``discover`` in the JobMaster's I/O executor (touches only ``_listed``); the rest on
        its main thread.
    """

    def __init__(self, path: str, file_format: FileFormat) -> None:
        self._path = path
        self._format = file_format
        self._listed: set[str] = set()
        self._next_number = 0
        self._queue: deque[InputSplit] = deque()
        self._total = 0

    def discover(self) -> list[InputSplit]:
        """The files not listed before (blocking I/O)."""
        new = [url for url in list_files(self._path, required=False) if url not in self._listed]
        self._listed.update(new)
        splits = [
            InputSplit(
                self._next_number + i, url, rows=_parquet_rows(url) if self._parquet else None
            )
            for i, url in enumerate(new)
        ]
        self._next_number += len(new)
        return splits

    @property
    def _parquet(self) -> bool:
        return self._format.name == "parquet"

    def add_splits(self, splits: Sequence[InputSplit]) -> None:
        self._queue.extend(splits)
        self._total += len(splits)

    def next_split(self, subtask_index: int = 0, parallelism: int = 1) -> NextInputSplit:
        """The oldest file not yet handed out, or None (ask again later)."""
        if not self._queue:
            return NextInputSplit(None, MAX_WATERMARK, self._total, self._total)
        split = self._queue.popleft()
        # a file's event times are unknown until it is read: no bound (MIN) until then
        return NextInputSplit(split, MIN_WATERMARK, self._total, self._total - len(self._queue))

    @property
    def splits_total(self) -> int:
        return self._total

    @property
    def splits_assigned(self) -> int:
        return self._total - len(self._queue)


class DirectorySourceReader:
    """Reads one file (or, for Parquet, the next row groups of one file) per bundle.

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
        self._queue: deque[SplitState] = deque()

    def add_split(self, split: InputSplit, position: int) -> None:
        self._queue.append(SplitState(split, position))

    def wants_splits(self) -> bool:
        return len(self._queue) < 2

    def poll(self, timeout: float) -> SourceBundle | None:
        """The next bundle, or None after ``timeout`` s when no file is assigned."""
        from pyspark.sql import functions as F

        if not self._queue:
            time.sleep(timeout)
            return None
        state = self._queue[0]
        split = state.split
        scan = self._whole_file_scan(state)
        if scan is not None:
            frame = scan.withColumn(SPLIT_COLUMN, F.lit(split.split_id))
            position, done, read = split.rows or 0, True, None
        elif self._format.name == "parquet":
            table, position, total = _read_parquet_rows(
                split.path, state.position, self._max_records
            )
            table = table.append_column(SPLIT_COLUMN, _repeat(split.split_id, table.num_rows))
            frame = self._spark.createDataFrame(table)
            done = position >= total
            read = None
        else:
            read = self._format.read(self._spark, [split])
            frame = read.frame.withColumn(SPLIT_COLUMN, F.lit(split.split_id))
            position, done = 0, True
        self._queue.popleft()
        if not done:
            self._queue.appendleft(SplitState(split, position))
        internal = (
            (SPLIT_COLUMN, CORRUPT_COLUMN)
            if read and read.raw_record is not None
            else (SPLIT_COLUMN,)
        )
        return SourceBundle(
            frame,
            [SplitState(split, position, finished=done)],
            split_column=SPLIT_COLUMN,
            malformed_reason=read.malformed_reason if read else None,
            raw_record=read.raw_record if read else None,
            full_parse=read.full_parse if read else None,
            available_at_ms=round(time.time() * 1000),
            internal_columns=internal,
        )

    def _whole_file_scan(self, state: SplitState) -> Any:
        """A Spark scan of the split's Parquet file (lazy), when this bundle reads it whole
        and Spark reads it as ``createDataFrame`` would give its records, else None. Reads the
        file's footer."""
        split = state.split
        url = split.path
        if (
            self._format.name != "parquet"
            or state.position != 0
            or split.rows is None
            or split.rows > self._max_records
            or not (url.startswith("file://") or "://" not in url)
        ):
            return None
        schema = parquet_spark_schema(url)  # given: no schema inference (a Spark job) per file
        return None if schema is None else self._spark.read.schema(schema).parquet(url)

    def snapshot(self) -> list[SplitState]:
        return list(self._queue)

    def is_finished(self) -> bool:
        return not self._queue

    def close(self) -> None:
        self._queue.clear()


def _parquet_rows(url: str) -> int:
    import fsspec
    import pyarrow.parquet as pq

    with fsspec.open(url, "rb") as f:
        return pq.ParquetFile(f).metadata.num_rows


def _read_parquet_rows(url: str, position: int, max_rows: int) -> tuple[Any, int, int]:
    """Row groups of ``url`` from row ``position`` on, until ``max_rows`` are reached (at
    least one group). Returns the ``pyarrow.Table``, the new position and the file's rows."""
    import fsspec
    import pyarrow.parquet as pq

    with fsspec.open(url, "rb") as f:
        parquet = pq.ParquetFile(f)
        metadata = parquet.metadata
        start, rows = 0, 0
        groups: list[int] = []
        for index in range(metadata.num_row_groups):
            size = metadata.row_group(index).num_rows
            if start + size <= position:
                start += size
                continue
            if groups and rows + size > max_rows:
                break
            groups.append(index)
            rows += size
            start += size
        table = parquet.read_row_groups(groups) if groups else parquet.schema_arrow.empty_table()
        skip = max(0, position - (start - rows))  # a position inside a row group: skip its head
        table = table.slice(skip)
        return table, position + table.num_rows, metadata.num_rows


def _repeat(value: str, count: int) -> Any:
    import pyarrow as pa

    return pa.repeat(pa.scalar(value, pa.string()), count)
