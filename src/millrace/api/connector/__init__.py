"""The connector API: what a source or a sink implements (Flink's FLIP-27 sources, FLIP-143
two-phase-commit sinks), and what the runtime calls where."""

from millrace.api.connector.sink import Sink, SinkWrite
from millrace.api.connector.source import (
    Boundedness,
    Source,
    SourceBundle,
    SourceReader,
    SourceReaderContext,
    SplitEnumerator,
)

__all__ = [
    "Boundedness",
    "Sink",
    "SinkWrite",
    "Source",
    "SourceBundle",
    "SourceReader",
    "SourceReaderContext",
    "SplitEnumerator",
]
