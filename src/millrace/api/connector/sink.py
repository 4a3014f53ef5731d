"""Sinks with two-phase commit: the contract a sink connector implements.

It is the runtime's (the JobMaster commits through it): defined in
``millrace.runtime.sink.sink`` and offered here with the rest of the connector API.
"""

from millrace.runtime.sink.sink import Sink, SinkWrite

__all__ = ["Sink", "SinkWrite"]
