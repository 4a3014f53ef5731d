"""ReplaySource: Parquet files replayed as an event stream at a set rate (the benchmark
workload, BRIEF §5).

The records are ordered by their event time, each delayed by a random amount of event time up to
``max_disorder_ms`` (seeded, so every run replays the same stream: bounded out-of-orderness),
and dealt round-robin into ``stripes`` (splits); each stripe releases its records at
``rate / stripes`` events per second from the moment its reader has it ready. All stripes
cover the whole time range, so subtasks advance through event time together. A stripe's
position is the number of its records released; a restored job continues the replay where its
checkpoint left it, at the same pace.

Records reach Spark without a conversion per bundle: a reader writes each stripe it is given
once, as a Parquet file (row groups of 8,192 records, each record with its position) in the
task's directory of the exchange store, and a bundle is one Spark scan of those files filtered
to the released position ranges; Parquet's row-group statistics skip the rest, and the scan is
vectorized. Handing Spark the Arrow slices instead (``createDataFrame``) took twice as long per
bundle (docs/benchmarks.md). Where Spark would read the file's columns as other types than
``createDataFrame`` gives them, the reader falls back to ``createDataFrame`` per bundle.

``columns`` projects the stream when its files are read (projection pushdown, as a Parquet scan
in Spark prunes the columns a query does not use): a job reading 3 of 19 columns says so.
"""

from __future__ import annotations

import logging
import tempfile
import time
from dataclasses import dataclass
from functools import reduce
from typing import Any

from millrace.api.connector.source import (
    WHOLE_INPUT,
    Boundedness,
    SourceBundle,
    SourceReaderContext,
)
from millrace.connectors.file_formats import FileFormat, absolute_local_path, list_files
from millrace.connectors.file_split_enumerator import FileSplitEnumerator
from millrace.runtime.io import exchange_store
from millrace.runtime.io.input_split import InputSplit, NextInputSplit, SplitState
from millrace.runtime.io.partition_events import MAX_WATERMARK
from millrace.spark.parquet_schema import arrow_spark_schema

__all__ = ["ReplaySource"]

logger = logging.getLogger(__name__)

SPLIT_COLUMN = "__split"
_POSITION = "__position"
_ROW_GROUP_ROWS = 8192  # records per row group of a stripe file: what a scan skips at once


@dataclass(frozen=True)
class ReplaySource:
    """Replays the Parquet files under ``path`` at ``rate`` events per second.

    Args:
        path: File, directory or glob of Parquet files (made absolute here, in the client).
        order_by: The event-time column the replay follows.
        rate: Events per second over all stripes (> 0).
        stripes: Splits the stream is dealt into (>= 1); at most one subtask reads each.
        max_disorder_ms: Largest delay of a record behind its event-time place, in event time
            (ms, >= 0): the stream's out-of-orderness.
        seed: Seed of the delays.
        columns: The columns the records carry, in this order (None: every column of the
            files). ``order_by`` is read for the replay order even when not listed.

    Raises:
        ValueError: For a rate <= 0, stripes < 1, a negative disorder or an empty or repeated
            ``columns``. A column the files lack fails ``stripe`` (the job), naming it and
            the columns there are.
    """

    path: str
    order_by: str
    rate: float
    stripes: int = 4
    max_disorder_ms: int = 0
    seed: int = 0
    columns: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", absolute_local_path(self.path))
        if self.rate <= 0 or self.stripes < 1 or self.max_disorder_ms < 0:
            raise ValueError(
                f"ReplaySource needs rate > 0, stripes >= 1, max_disorder_ms >= 0; got "
                f"{self.rate}, {self.stripes}, {self.max_disorder_ms}"
            )
        if self.columns is not None:
            columns = tuple(self.columns)  # a list is accepted; the source stays hashable
            if not columns or len(set(columns)) != len(columns):
                raise ValueError(
                    f"ReplaySource columns must be distinct column names, at least one; got "
                    f"{list(columns)}"
                )
            object.__setattr__(self, "columns", columns)

    @property
    def boundedness(self) -> Boundedness:
        return Boundedness.BOUNDED

    def describe(self) -> str:
        return f"replay of {self.path} at {self.rate:g} events/s"

    def create_enumerator(self, event_time: str | None) -> FileSplitEnumerator:
        """An event-time ordered enumerator of the stripes (blocking I/O in ``discover``)."""
        return _ReplayEnumerator(self)

    def create_reader(self, context: SourceReaderContext) -> ReplaySourceReader:
        return ReplaySourceReader(self, context)

    def stripe(self, index: int) -> Any:
        """Stripe ``index`` as a ``pyarrow.Table`` in replay order (blocking I/O)."""
        table, order = self.ordered(self.columns)
        return table.take(order[index :: self.stripes])

    def ordered(self, columns: tuple[str, ...] | None) -> tuple[Any, Any]:
        """The files' ``columns`` (None: all) as one ``pyarrow.Table`` and the replay order
        of its rows (a numpy array of row indices; stripe ``i`` is every ``stripes``-th row
        of it from ``i``). Blocking I/O.

        Raises:
            ValueError: If a column (or ``order_by``) is not in the files.
        """
        import numpy as np
        import pyarrow as pa
        import pyarrow.parquet as pq

        urls = list_files(self.path)
        read = None
        if columns is not None:
            self.check_columns(columns, urls)
            read = list(dict.fromkeys((*columns, self.order_by)))
        table = pa.concat_tables(pq.read_table(url, columns=read) for url in urls)
        times = table.column(self.order_by).cast(pa.timestamp("us")).cast(pa.int64()).to_numpy()
        if self.max_disorder_ms:  # each record released up to max_disorder_ms of event time late
            rng = np.random.default_rng(self.seed)
            times = times + rng.integers(0, self.max_disorder_ms * 1000 + 1, len(times))
        order = np.argsort(times, kind="stable")
        return (table if columns is None else table.select(list(columns))), order

    def check_columns(self, columns: tuple[str, ...], urls: list[str]) -> None:
        """Raise ValueError naming the ``columns`` (and ``order_by``) missing from the first of
        ``urls`` and the columns it has (reads its footer)."""
        import pyarrow.parquet as pq

        there = pq.read_schema(urls[0]).names if urls else []
        missing = [c for c in (*columns, self.order_by) if c not in there]
        if missing:
            raise ValueError(
                f"ReplaySource columns {missing} are not in {urls[0]}; its columns: {there}"
            )


class _ReplayEnumerator(FileSplitEnumerator):
    """The stripes as splits, each with its first event time (so watermarks stay bounded);
    stripe ``i`` goes to subtask ``i % parallelism``, so the replay spreads evenly."""

    def __init__(self, source: ReplaySource) -> None:
        super().__init__(source.path, FileFormat("parquet"), source.order_by)
        self._source = source

    def next_split(self, subtask_index: int = 0, parallelism: int = 1) -> NextInputSplit:
        mine = [s for s in self._unassigned if s.split_number % parallelism == subtask_index]
        if not mine:
            return NextInputSplit(None, MAX_WATERMARK, self.splits_total, self.splits_assigned)
        bound = self._bound()
        self._unassigned.remove(mine[0])
        return NextInputSplit(mine[0], bound, self.splits_total, self.splits_assigned)

    def discover(self) -> list[InputSplit]:
        if self._discovered:
            return []
        self._discovered = True
        source = self._source
        if source.columns is not None:  # fail the job at its start, not in every task attempt
            source.check_columns(source.columns, list_files(source.path))
        times, order = source.ordered((source.order_by,))  # one read of one column
        splits = []
        for index in range(source.stripes):
            stripe = times.take(order[index :: source.stripes])
            first = _first_ms(stripe.column(source.order_by)) if stripe.num_rows else None
            splits.append(
                InputSplit(
                    index,
                    f"replay:{self._source.path}#stripe{index}of{self._source.stripes}",
                    min_event_time_ms=first,
                    rows=stripe.num_rows,
                    end_position=stripe.num_rows,
                )
            )
        return splits


def _first_ms(column: Any) -> int | None:
    import pyarrow.compute as pc

    low = pc.min(column).cast("timestamp[ms]").cast("int64").as_py()
    return None if low is None else int(low)


@dataclass
class _Stripe:
    split: InputSplit
    table: Any  # the records (pyarrow.Table) while Spark gets them as Arrow, else None
    rows: int
    position: int
    started: float = 0.0  # monotonic time at which the stripe's record 0 was released
    file: str | None = None  # the stripe as Parquet for Spark to scan, None: not written


class ReplaySourceReader:
    """Releases the records of its stripes at the replay's pace.

    Threading:
        The source task's thread only.
    """

    def __init__(self, source: ReplaySource, context: SourceReaderContext) -> None:
        self._source = source
        self._spark = context.spark
        self._max_records = context.max_records
        self._max_delay = context.max_delay
        self._rate = source.rate / source.stripes
        self._stripes: list[_Stripe] = []
        self._files_dir = context.files_dir
        self._own_dir: str | None = None  # a local temporary directory, made when needed
        self._schema: Any = None  # Spark's schema of the stripe files

    def add_split(self, split: InputSplit, position: int) -> None:
        """Take stripe ``split`` from ``position`` on; the stripe is written for Spark once
        (blocking I/O), unless Spark would read it back as other types (``arrow_spark_schema``).

        Raises:
            OSError: If the stripe's file cannot be written.
        """
        import pyarrow as pa

        index = int(split.path.rsplit("#stripe", 1)[1].split("of")[0])
        table = self._source.stripe(index)
        stripe = _Stripe(split, table, table.num_rows, position)
        if self._schema is None:  # Spark's schema of the files: no inference per bundle
            self._schema = arrow_spark_schema(
                table.schema.append(pa.field(SPLIT_COLUMN, pa.string())).append(
                    pa.field(_POSITION, pa.int64())
                )
            )
        if self._schema is not None:
            stripe.file = self._write_stripe(stripe, index)
            stripe.table = None  # Spark reads the file: the records need not stay in memory
        stripe.started = time.monotonic() - position / self._rate  # resume at the same pace
        self._stripes.append(stripe)

    def _write_stripe(self, stripe: _Stripe, index: int) -> str:
        """Write ``stripe`` whole, each record with its split id and position, as a Parquet
        file for Spark to scan; returns its path."""
        import numpy as np
        import pyarrow as pa

        rows = stripe.rows
        table = stripe.table.append_column(
            SPLIT_COLUMN, pa.repeat(stripe.split.split_id, rows)
        ).append_column(_POSITION, pa.array(np.arange(rows, dtype=np.int64)))
        if self._files_dir is None and self._own_dir is None:
            self._own_dir = tempfile.mkdtemp(prefix="millrace-replay-")
        directory = self._files_dir or self._own_dir
        assert directory is not None
        path = exchange_store.join(directory, f"stripe-{index}.parquet")
        size = exchange_store.write_parquet(table, path, row_group_size=_ROW_GROUP_ROWS)
        logger.info("replay stripe %d: %d records for Spark to scan, %d bytes", index, rows, size)
        return path

    def wants_splits(self) -> bool:
        return True  # every stripe it may get: they all run at once

    def poll(self, timeout: float) -> SourceBundle | None:
        """Records released since the last bundle, up to ``max_records`` (waits for the next
        release, at most ``timeout`` s). With ``max_records`` = ``WHOLE_INPUT`` (BATCH mode:
        a bounded input read to its end as one stage) every record is due at once: the rate
        paces a stream, and a batch job has none to pace."""
        now = time.monotonic()
        whole = self._max_records == WHOLE_INPUT
        due = [(s, self._released(s, now, whole) - s.position) for s in self._stripes]
        if not any(n > 0 for _, n in due):
            waits = [
                s.started + (s.position + 1) / self._rate - now
                for s in self._stripes
                if s.position < s.rows
            ]
            time.sleep(max(0.0, min([timeout, *waits])))
            return None
        share = max(1, self._max_records // max(1, sum(n > 0 for _, n in due)))
        ranges, progress, newest = [], [], 0.0
        for stripe, count in due:
            take = min(count, share)
            if take <= 0:
                continue
            ranges.append((stripe, stripe.position, stripe.position + take))
            stripe.position += take
            newest = max(newest, stripe.started + stripe.position / self._rate)
            done = stripe.position >= stripe.rows
            progress.append(SplitState(stripe.split, stripe.position, finished=done))
        self._stripes = [s for s in self._stripes if s.position < s.rows]
        frame = self._frame(ranges)
        wall = time.time() - (time.monotonic() - newest)
        return SourceBundle(
            frame,
            progress,
            split_column=SPLIT_COLUMN,
            available_at_ms=round(wall * 1000),
            internal_columns=(SPLIT_COLUMN,),
            scans_own_files=bool(ranges) and ranges[0][0].file is not None,
        )

    def _frame(self, ranges: list[tuple[_Stripe, int, int]]) -> Any:
        """The records of every ``(stripe, start, end)`` position range, with their split ids,
        as one lazy DataFrame: a scan of the stripe files where every stripe has one, else the
        Arrow slices handed to Spark."""
        import pyarrow as pa
        from pyspark.sql import functions as F

        if all(stripe.file is not None for stripe, _, _ in ranges):
            wanted = reduce(
                lambda a, b: a | b,
                (
                    (F.col(SPLIT_COLUMN) == F.lit(stripe.split.split_id))
                    & F.col(_POSITION).between(start, end - 1)
                    for stripe, start, end in ranges
                ),
            )
            files = [stripe.file for stripe, _, _ in ranges]
            scan = self._spark.read.schema(self._schema).parquet(*files)
            return scan.where(wanted).drop(_POSITION)
        parts = [
            stripe.table.slice(start, end - start).append_column(
                SPLIT_COLUMN, pa.repeat(stripe.split.split_id, end - start)
            )
            for stripe, start, end in ranges
        ]
        return self._spark.createDataFrame(pa.concat_tables(parts))

    def _released(self, stripe: _Stripe, now: float, whole: bool) -> int:
        """Records of ``stripe`` released by ``now`` (monotonic s): all of them if ``whole``."""
        if whole:
            return stripe.rows
        return min(stripe.rows, int((now - stripe.started) * self._rate))

    def snapshot(self) -> list[SplitState]:
        return [SplitState(s.split, s.position) for s in self._stripes]

    def is_finished(self) -> bool:
        return not self._stripes

    def close(self) -> None:
        """Drop the stripes and remove their files (never raises)."""
        self._stripes.clear()
        for directory in (self._files_dir, self._own_dir):
            if directory is not None:
                exchange_store.remove_tree(directory)
