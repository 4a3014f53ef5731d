"""PrometheusReporter: a process's ``/metrics`` endpoint for Prometheus (Flink's reporter).

Started by every cluster process when ``metrics.reporters`` names ``prom`` (the default): it
binds ``metrics.reporter.prom.host`` on the first free port of ``metrics.reporter.prom.port``
(a port such as ``9249``, Flink's default, or a range such as ``9250-9260`` so that several
processes on one host each take the next free one; ``0`` takes any free port). When no port of
the range is free the process logs a warning naming the key and runs without the reporter, as
Flink does. Metrics are read at scrape time by the process's collectors
(:mod:`~millrace.runtime.metrics.flink_collectors`) from immutable snapshots or gateway calls,
on the HTTP server's thread; no endpoint state is touched there.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.registry import Collector

from millrace.config import Configuration, MetricOptions, metric_reporters, parse_port_range

__all__ = ["PrometheusReporter", "start_prometheus_reporter"]

logger = logging.getLogger(__name__)


class PrometheusReporter:
    """A running ``/metrics`` HTTP server.

    Args:
        server: The WSGI server (prometheus_client's).
        thread: Its serving thread.
        host: The interface it listens on.

    Attributes:
        port: The port it took.
        url: ``http://host:port/metrics``.

    Threading:
        ``close`` from any thread, once.
    """

    def __init__(self, server: Any, thread: threading.Thread, host: str) -> None:
        self._server = server
        self._thread = thread
        self.port: int = server.server_port
        self.url = f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        """Stop serving and release the port."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5.0)


def start_prometheus_reporter(
    conf: Configuration, collectors: Iterable[Collector], process: str
) -> PrometheusReporter | None:
    """Start the Prometheus reporter of this process, if ``metrics.reporters`` enables it.

    Args:
        conf: The process's configuration (``metrics.*``).
        collectors: What to expose (read at every scrape).
        process: ``jobmanager`` or ``taskmanager``, for the log.

    Returns:
        The reporter, or None when disabled or when no port of the range is free (logged as
        a warning naming ``metrics.reporter.prom.port``).

    Raises:
        ConfigError: For an invalid ``metrics.reporter.prom.port`` or ``metrics.reporters``.
    """
    if "prom" not in metric_reporters(conf):
        return None
    key = MetricOptions.PROM_PORT.key
    ports = parse_port_range(conf.get(MetricOptions.PROM_PORT), key=key)
    host = conf.get(MetricOptions.PROM_HOST)
    registry = CollectorRegistry(auto_describe=False)
    for collector in collectors:
        registry.register(collector)
    for port in ports:
        try:
            server, thread = start_http_server(port, addr=host, registry=registry)
        except OSError as error:
            logger.debug("metrics port %s:%d: %s", host, port, error)
            continue
        reporter = PrometheusReporter(server, thread, host)
        logger.info("%s metrics for Prometheus at %s", process, reporter.url)
        return reporter
    logger.warning(
        "no port of %s=%s is free on %s: the %s runs without its Prometheus reporter "
        "(give each process on a host its own port, e.g. a range such as 9250-9260)",
        key,
        conf.get(MetricOptions.PROM_PORT),
        host,
        process,
    )
    return None
