"""Sources and sinks: bounded files in (Parquet, CSV, text), Parquet out."""

from millrace.connectors.directory_source import DirectorySource
from millrace.connectors.file_source import FileSource
from millrace.connectors.parquet_sink import ParquetSink

__all__ = ["DirectorySource", "FileSource", "ParquetSink"]
