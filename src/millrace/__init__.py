"""Millrace: Flink's runtime rebuilt in Python, with every data pipeline running on Spark.

Build a pipeline with :class:`StreamExecutionEnvironment` and PySpark DataFrame code; run it
with ``millrace run job.py`` or ``env.execute()``.
"""

from millrace.api.data_stream import DataStream, KeyedStream, WindowedStream
from millrace.api.stream_execution_environment import (
    JobExecutionResult,
    StreamExecutionEnvironment,
)
from millrace.api.windows import TumblingEventTimeWindows, tumbling
from millrace.config import Configuration, RuntimeExecutionMode
from millrace.connectors import (
    DirectorySource,
    FileSource,
    KafkaSource,
    ParquetSink,
    PostgresSink,
    ReplaySource,
)

__all__ = [
    "Configuration",
    "DataStream",
    "DirectorySource",
    "FileSource",
    "JobExecutionResult",
    "KafkaSource",
    "KeyedStream",
    "ParquetSink",
    "PostgresSink",
    "ReplaySource",
    "RuntimeExecutionMode",
    "StreamExecutionEnvironment",
    "TumblingEventTimeWindows",
    "WindowedStream",
    "tumbling",
]
