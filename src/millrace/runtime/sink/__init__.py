"""The sink contract the runtime commits through (two-phase commit, FLIP-143)."""

from millrace.runtime.sink.sink import Sink, SinkWrite

__all__ = ["Sink", "SinkWrite"]
