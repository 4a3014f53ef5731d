"""FileSource: a bounded source over Parquet, CSV or text files (Flink's FileSource).

Splits: one per file, or one per row group for Parquet files with several row groups. The
JobMaster enumerates splits (listing through fsspec, reading Parquet footers with pyarrow) and
records each split's minimum event time from the footer statistics, which bounds the watermarks
(see ``InputSplitAssigner``). Subtasks read a split with one Spark read.

Malformed input never fails the job: a CSV row whose fields do not parse (PERMISSIVE mode with a
``_corrupt_record`` column) becomes a dead letter with the reason, computed by Spark.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from millrace.runtime.io.input_split import InputSplit

__all__ = ["FileSource", "SplitRead", "absolute_local_path"]

_FORMATS = ("parquet", "csv", "text")
CORRUPT_COLUMN = "_corrupt_record"


@dataclass(frozen=True)
class SplitRead:
    """One split read by Spark.

    Attributes:
        frame: The split's rows (``pyspark.sql.DataFrame``), with ``_corrupt_record`` for CSV.
        malformed_reason: Column (string) giving why a row is malformed, null for good rows;
            None when the format cannot produce malformed rows.
        raw_record: Column (string) holding a malformed row's original text.
        full_parse: An aggregate column over every field, to be computed with the bundle (in
            its Observation), or None. Spark's CSV reader parses only the columns a query
            needs and flags a row corrupt only for those; referencing every field makes a row
            malformed by the whole declared schema.
    """

    frame: Any
    malformed_reason: Any
    raw_record: Any
    full_parse: Any = None


@dataclass(frozen=True)
class FileSource:
    """Files under ``path`` (a file, a directory, or a glob) in one format.

    Use the constructors ``parquet``, ``csv`` and ``text``.

    Args:
        path: Local path (made absolute here, in the client) or fsspec URL.
        format: ``parquet``, ``csv`` or ``text``.
        schema: Spark schema (DDL string or StructType); required for CSV.
        options: Spark reader options (CSV: ``header``, ``sep``...).
    """

    path: str
    format: str
    schema: Any = None
    options: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", absolute_local_path(self.path))
        if self.format not in _FORMATS:
            raise ValueError(f"format must be one of {_FORMATS}, got {self.format!r}")
        if self.format == "csv" and self.schema is None:
            raise ValueError(
                "FileSource.csv needs a schema (DDL string or StructType), so that "
                "malformed rows can be detected"
            )

    @classmethod
    def parquet(cls, path: str) -> FileSource:
        """Parquet files; split per file, or per row group when a file has several."""
        return cls(path, "parquet")

    @classmethod
    def csv(
        cls, path: str, schema: Any, header: bool = True, sep: str = ",", **options: str
    ) -> FileSource:
        """CSV files with ``schema``; rows that do not fit it become dead letters.

        Raises:
            ValueError: If ``schema`` is None.
        """
        opts = {"header": str(header).lower(), "sep": sep, **options}
        return cls(path, "csv", schema, opts)

    @classmethod
    def text(cls, path: str) -> FileSource:
        """Text files; one row per line in a ``value`` column."""
        return cls(path, "text")

    def describe(self) -> str:
        return f"{self.format} files at {self.path}"

    # JobMaster side ----------------------------------------------------------------------------

    def create_input_splits(self, event_time: str | None) -> list[InputSplit]:
        """List the files and make splits (blocking I/O: run in the JobMaster's I/O executor).

        Raises:
            FileNotFoundError: If ``path`` matches no file.
        """
        import fsspec

        fs, root = fsspec.core.url_to_fs(self.path)
        protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
        if fs.isdir(root):
            paths = [p for p in fs.find(root) if not _hidden(p, root)]
        else:
            paths = (
                sorted(fs.glob(root))
                if any(c in root for c in "*?[")
                else ([root] if fs.exists(root) else [])
            )
        if not paths:
            raise FileNotFoundError(f"no input files at {self.path!r}")
        urls = [p if protocol in ("file", "local") else f"{protocol}://{p}" for p in sorted(paths)]
        splits: list[InputSplit] = []
        for url in urls:
            if self.format == "parquet":
                splits += _parquet_splits(fs, url, event_time, len(splits))
            else:
                splits.append(InputSplit(len(splits), url))
        return splits

    # Task side ---------------------------------------------------------------------------------

    def read(self, spark: Any, splits: Sequence[InputSplit], schema: Any = None) -> SplitRead:
        """Read ``splits`` as one DataFrame (lazy: a plan, nothing runs).

        Args:
            spark: The SparkSession.
            splits: One or more splits of this source.
            schema: Schema of an earlier bundle's frame, to skip schema inference (Parquet), or
                None.

        Raises:
            ValueError: If ``splits`` is empty.
        """
        from pyspark.sql import functions as F

        if not splits:
            raise ValueError("read() needs at least one split")
        files = [s.path for s in splits if s.row_group is None]
        if self.format == "parquet":
            frames = []
            if files:
                reader = spark.read if schema is None else spark.read.schema(schema)
                frames.append(reader.parquet(*files))
            groups = [s for s in splits if s.row_group is not None]
            if groups:
                frames.append(spark.createDataFrame(_read_row_groups(groups)))
            frame = frames[0] if len(frames) == 1 else frames[0].unionByName(frames[1])
            return SplitRead(frame, None, None)
        if self.format == "text":
            return SplitRead(spark.read.text(files), None, None)
        schema = _with_corrupt_column(spark, self.schema)
        frame = (
            spark.read.schema(schema)
            .options(**self.options)
            .option("mode", "PERMISSIVE")
            .option("columnNameOfCorruptRecord", CORRUPT_COLUMN)
            .csv(files)
        )
        fields = [F.col(f"`{name}`") for name in schema.fieldNames()]
        return SplitRead(
            frame,
            _csv_reason(schema, self.options.get("sep", ",")),
            F.col(CORRUPT_COLUMN),
            F.max(F.xxhash64(*fields)),
        )


def absolute_local_path(path: str) -> str:
    """``path`` made absolute if it is a local path (no ``scheme://``), so that processes
    started in other directories read and write the files the client meant."""
    return path if "://" in path else os.path.abspath(path)


def _read_row_groups(splits: Sequence[InputSplit]) -> Any:
    """The row groups of ``splits`` as one ``pyarrow.Table`` (read with pyarrow)."""
    import fsspec
    import pyarrow as pa
    import pyarrow.parquet as pq

    tables = []
    for split in splits:
        with fsspec.open(split.path, "rb") as f:
            tables.append(pq.ParquetFile(f).read_row_group(split.row_group))
    return pa.concat_tables(tables)


def _hidden(path: str, root: str) -> bool:
    rel = path[len(root) :].lstrip("/")
    return any(part.startswith((".", "_")) for part in rel.split("/"))


def _parquet_splits(fs: Any, url: str, event_time: str | None, start: int) -> list[InputSplit]:
    import pyarrow.parquet as pq

    with fs.open(url, "rb") as f:
        metadata = pq.ParquetFile(f).metadata
    column = None
    if event_time is not None:
        names = [metadata.schema.column(i).name for i in range(metadata.num_columns)]
        column = names.index(event_time) if event_time in names else None
    splits = []
    groups = metadata.num_row_groups
    for rg in range(groups):
        group = metadata.row_group(rg)
        low = None
        if column is not None:
            stats = group.column(column).statistics
            if stats is not None and stats.has_min_max and stats.null_count == 0:
                low = _epoch_ms(stats.min)
        splits.append(InputSplit(start + rg, url, rg if groups > 1 else None, low, group.num_rows))
    return splits


def _epoch_ms(value: Any) -> int | None:
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        return (
            int(value.timestamp() * 1000)
            if value.microsecond % 1000 == 0
            else (int(value.timestamp() * 1_000_000) // 1000)
        )
    return None


def _with_corrupt_column(spark: Any, schema: Any) -> Any:
    from pyspark.sql.types import StringType, StructField, StructType

    if isinstance(schema, str):
        schema = StructType.fromDDL(schema)
    if CORRUPT_COLUMN in schema.fieldNames():
        return schema
    return StructType([*schema.fields, StructField(CORRUPT_COLUMN, StringType(), True)])


def _csv_reason(schema: Any, sep: str) -> Any:
    """Spark expression: why a CSV row is malformed (null for good rows)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    fields = [f for f in schema.fields if f.name != CORRUPT_COLUMN]
    raw = F.col(CORRUPT_COLUMN)
    tokens = F.split(raw, _regex_quote(sep), -1)
    checks = []
    for i, f in enumerate(fields):
        if isinstance(f.dataType, StringType):
            continue
        token = F.trim(F.get(tokens, i))
        bad = (token != F.lit("")) & token.try_cast(f.dataType).isNull()
        checks.append(
            F.when(
                bad,
                F.format_string(
                    f"field {f.name!r}: cannot parse '%s' as {f.dataType.simpleString()}",
                    F.substring(token, 1, 200),
                ),
            )
        )
    count = F.size(tokens)
    arity = F.when(
        count != F.lit(len(fields)),
        F.format_string(f"expected {len(fields)} fields, found %d", count),
    )
    detail = (
        F.coalesce(
            arity, F.nullif(F.concat_ws("; ", *checks), F.lit("")), F.lit("malformed CSV record")
        )
        if checks
        else F.coalesce(arity, F.lit("malformed CSV record"))
    )
    return F.when(raw.isNotNull(), detail)


def _regex_quote(sep: str) -> str:
    import re

    return re.escape(sep)
