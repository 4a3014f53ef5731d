"""Sources and sinks: files in (Parquet, CSV, text), Kafka topics in, Parquet and PostgreSQL
out."""

from millrace.connectors.directory_source import DirectorySource
from millrace.connectors.file_source import FileSource
from millrace.connectors.kafka_source import KafkaSource
from millrace.connectors.parquet_sink import ParquetSink
from millrace.connectors.postgres_sink import PostgresSink

__all__ = ["DirectorySource", "FileSource", "KafkaSource", "ParquetSink", "PostgresSink"]
