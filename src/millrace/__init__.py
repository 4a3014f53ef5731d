"""Millrace: Flink's runtime rebuilt in Python, with every data pipeline running on Spark.

Build a pipeline with :class:`StreamExecutionEnvironment` and PySpark DataFrame code; run it
with ``millrace run job.py`` or ``env.execute()``.
"""

from millrace.api.data_stream import DataStream, KeyedStream, WindowedStream
from millrace.api.stream_execution_environment import (
    JobExecutionResult,
    StreamExecutionEnvironment,
)
from millrace.api.windows import (
    EventTimeSessionWindows,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
    session,
    sliding,
    tumbling,
)
from millrace.config import Configuration, RuntimeExecutionMode
from millrace.connectors import (
    DirectorySource,
    FileSource,
    HttpSource,
    KafkaSource,
    ParquetSink,
    PostgresSink,
    ReplaySource,
)

__all__ = [
    "Configuration",
    "DataStream",
    "DirectorySource",
    "EventTimeSessionWindows",
    "FileSource",
    "HttpSource",
    "JobExecutionResult",
    "KafkaSource",
    "KeyedStream",
    "ParquetSink",
    "PostgresSink",
    "ReplaySource",
    "RuntimeExecutionMode",
    "SlidingEventTimeWindows",
    "StreamExecutionEnvironment",
    "TumblingEventTimeWindows",
    "WindowedStream",
    "session",
    "sliding",
    "tumbling",
]
