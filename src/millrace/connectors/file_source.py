"""FileSource: a bounded source over Parquet, CSV or text files (Flink's FileSource).

Splits: one per file, or one per row group for Parquet files with several row groups. The
JobMaster's FileSplitEnumerator lists the files (fsspec) and reads Parquet footers (pyarrow) for
each split's minimum event time, which bounds the watermarks; subtasks read several splits per
bundle with one Spark read (FileSourceReader). Malformed CSV rows become dead letters with their
reason (see ``file_formats``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from millrace.api.connector.source import Boundedness, SourceReaderContext
from millrace.connectors.file_formats import FileFormat, absolute_local_path
from millrace.connectors.file_source_reader import FileSourceReader
from millrace.connectors.file_split_enumerator import FileSplitEnumerator

__all__ = ["FileSource"]


@dataclass(frozen=True)
class FileSource:
    """Files under ``path`` (a file, a directory, or a glob) in one format, read once.

    Use the constructors ``parquet``, ``csv`` and ``text``.

    Args:
        path: Local path (made absolute here, in the client) or fsspec URL.
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
        _ = self.file_format  # validates

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

    @property
    def file_format(self) -> FileFormat:
        return FileFormat(self.format, self.schema, self.options)

    @property
    def boundedness(self) -> Boundedness:
        return Boundedness.BOUNDED

    def describe(self) -> str:
        return f"{self.format} files at {self.path}"

    def create_enumerator(self, event_time: str | None) -> FileSplitEnumerator:
        """The JobMaster's enumerator: lists the files once, hands splits out in event-time
        order."""
        return FileSplitEnumerator(self.path, self.file_format, event_time)

    def create_reader(self, context: SourceReaderContext) -> FileSourceReader:
        """A subtask's reader."""
        return FileSourceReader(self.file_format, context)
