"""Sources and sinks: files in (Parquet, CSV, text; once, or as they arrive), Kafka topics in,
JSON lines POSTed over HTTP in, replays of Parquet files at a set rate, Parquet and PostgreSQL
out."""

from millrace.connectors.directory_source import DirectorySource
from millrace.connectors.file_source import FileSource
from millrace.connectors.http_source import HttpSource
from millrace.connectors.kafka_source import KafkaSource
from millrace.connectors.parquet_sink import ParquetSink
from millrace.connectors.postgres_sink import PostgresSink
from millrace.connectors.replay_source import ReplaySource

__all__ = [
    "DirectorySource",
    "FileSource",
    "HttpSource",
    "KafkaSource",
    "ParquetSink",
    "PostgresSink",
    "ReplaySource",
]
