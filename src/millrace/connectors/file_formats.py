"""File formats of the file connectors: listing files, cutting them into splits, reading splits.

Parquet files split per row group when they have several (min event times and row counts come
from the footers, read with pyarrow); CSV and text files are one split each. A bundle's splits
are read as one lazy Spark DataFrame. Malformed input never fails a job: a CSV row whose fields
do not parse (PERMISSIVE mode with a ``_corrupt_record`` column) becomes a dead letter with the
reason, computed by Spark.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from millrace.runtime.io.input_split import InputSplit

__all__ = [
    "CORRUPT_COLUMN",
    "FORMATS",
    "FileFormat",
    "SplitRead",
    "absolute_local_path",
    "list_files",
]

FORMATS = ("parquet", "csv", "text")
CORRUPT_COLUMN = "_corrupt_record"


@dataclass(frozen=True)
class SplitRead:
    """Splits read by Spark.

    Attributes:
        frame: The rows (``pyspark.sql.DataFrame``), with ``_corrupt_record`` for CSV.
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
class FileFormat:
    """How files are parsed.

    Args:
        name: ``parquet``, ``csv`` or ``text``.
        schema: Spark schema (DDL string or StructType); required for CSV.
        options: Spark reader options (CSV: ``header``, ``sep``...).

    Raises:
        ValueError: For an unknown format, or CSV without a schema.
    """

    name: str
    schema: Any = None
    options: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.name not in FORMATS:
            raise ValueError(f"format must be one of {FORMATS}, got {self.name!r}")
        if self.name == "csv" and self.schema is None:
            raise ValueError(
                "a CSV source needs a schema (DDL string or StructType), so that malformed "
                "rows can be detected"
            )

    def splits(
        self, urls: Sequence[str], event_time: str | None, start: int = 0
    ) -> list[InputSplit]:
        """Splits of the files ``urls`` (blocking I/O: Parquet footers are read).

        Args:
            urls: Files, as ``list_files`` returns them.
            event_time: Event-time column, whose Parquet statistics give each split's
                minimum event time.
            start: Number of the first split.
        """
        import fsspec

        splits: list[InputSplit] = []
        for url in urls:
            if self.name == "parquet":
                fs, path = fsspec.core.url_to_fs(url)
                splits += _parquet_splits(fs, path, url, event_time, start + len(splits))
            else:
                splits.append(InputSplit(start + len(splits), url))
        return splits

    def read(self, spark: Any, splits: Sequence[InputSplit], schema: Any = None) -> SplitRead:
        """Read ``splits`` as one DataFrame (lazy: a plan, nothing runs).

        Args:
            spark: The SparkSession.
            splits: One or more splits.
            schema: Schema of an earlier bundle's frame, to skip schema inference (Parquet), or
                None.

        Raises:
            ValueError: If ``splits`` is empty.
        """
        from pyspark.sql import functions as F

        if not splits:
            raise ValueError("read() needs at least one split")
        files = [s.path for s in splits if s.row_group is None]
        if self.name == "parquet":
            frames = []
            if files:
                reader = spark.read if schema is None else spark.read.schema(schema)
                frames.append(reader.parquet(*files))
            groups = [s for s in splits if s.row_group is not None]
            if groups:
                frames.append(spark.createDataFrame(_read_row_groups(groups)))
            frame = frames[0] if len(frames) == 1 else frames[0].unionByName(frames[1])
            return SplitRead(frame, None, None)
        if self.name == "text":
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


def list_files(path: str, *, required: bool = True) -> list[str]:
    """The files under ``path`` (a file, a directory, or a glob), sorted, as URLs; names
    starting with ``.`` or ``_`` are skipped (pending and hidden files). Blocking I/O.

    Raises:
        FileNotFoundError: If ``required`` and nothing matches.
    """
    import fsspec

    fs, root = fsspec.core.url_to_fs(path)
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    if fs.isdir(root):
        paths = [p for p in fs.find(root) if not _hidden(p, root)]
    else:
        paths = (
            sorted(fs.glob(root))
            if any(c in root for c in "*?[")
            else ([root] if fs.exists(root) else [])
        )
    if not paths and required:
        raise FileNotFoundError(f"no input files at {path!r}")
    return [p if protocol in ("file", "local") else f"{protocol}://{p}" for p in sorted(paths)]


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


def _parquet_splits(
    fs: Any, path: str, url: str, event_time: str | None, start: int
) -> list[InputSplit]:
    import pyarrow.parquet as pq

    with fs.open(path, "rb") as f:
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
