"""HttpSource: records POSTed over HTTP, kept in a source-end message store (seed 001).

For inputs that cannot be replayed. Clients POST JSON lines to the JobManager
(``POST http://<jobmanager>:<http-source.port>/sources/<name>/records`` with the REST API's
bearer token); the answer 202 comes only once the lines are a durable segment of the source's
log (:mod:`millrace.connectors.http_source_log`), each record with an offset. The log's offsets
are the source's checkpointed positions: the one split is the log directory, read from its
offset by the subtask 0 reader (:mod:`millrace.connectors.http_source_reader`); after a failure
the job replays the log from the restored offset; once a checkpoint is committed, the segments
below its offset are deleted (``notify_checkpoint_complete``).

Where things run: the endpoint and the log's writer in the JobManager process (started by the
enumerator, :mod:`millrace.connectors.http_source_server`), which outlives TaskManagers; the
readers on the TaskManagers read the segments from shared storage (the log directory is under
``io.tmp.dirs``, shared by the processes of a cluster, unless ``path`` names another).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from millrace.api.connector.source import Boundedness, SourceReaderContext
from millrace.config import ClusterOptions, Configuration, HttpSourceOptions
from millrace.connectors.file_formats import absolute_local_path
from millrace.connectors.http_source_reader import HttpSourceReader
from millrace.runtime.io.input_split import InputSplit, NextInputSplit
from millrace.runtime.io.partition_events import MAX_WATERMARK, MIN_WATERMARK

__all__ = ["HttpSource", "HttpSplitEnumerator"]

logger = logging.getLogger(__name__)

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True)
class HttpSource:
    """Unbounded JSON-lines records POSTed to the JobManager, schema ``schema``.

    Picklable: it travels to the cluster with the job. Only source subtask 0 reads (the log is
    one split); use parallelism 1 for the source.

    Args:
        schema: The records' Spark schema: a DDL string or a StructType. Fields missing from a
            line are null; a line that is not a JSON object of these types is a dead letter.
        name: The source's name in the URL ``/sources/<name>/records`` (letters, digits,
            ``_.-``, at most 64).
        path: The log directory (local path, made absolute here, or fsspec URL) shared by the
            JobManager and the TaskManagers; None: ``<io.tmp.dirs>/http-sources/<job id>/<name>``.
        token: The bearer token clients must send; None: the REST API's token of the cluster
            secret (``millrace cluster token``).

    Raises:
        ValueError: For an invalid name, or a token shorter than 16 characters.
    """

    schema: Any
    name: str = "http"
    path: str | None = None
    token: str | None = None

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(
                f"an HttpSource name is 1-64 letters, digits, '_', '.' or '-', got {self.name!r}"
            )
        if self.token is not None and len(self.token) < 16:
            raise ValueError("an HttpSource token must have at least 16 characters")
        if self.path is not None:
            object.__setattr__(self, "path", absolute_local_path(self.path))

    @property
    def boundedness(self) -> Boundedness:
        return Boundedness.CONTINUOUS_UNBOUNDED

    def describe(self) -> str:
        return f"JSON lines POSTed to /sources/{self.name}/records"

    def create_enumerator(self, event_time: str | None) -> HttpSplitEnumerator:
        """The JobMaster's enumerator; ``open`` starts the endpoint."""
        return HttpSplitEnumerator(self)

    def create_reader(self, context: SourceReaderContext) -> HttpSourceReader:
        return HttpSourceReader(self.schema, context)


class HttpSplitEnumerator:
    """The log as the source's one split, and the endpoint that writes it.

    Args:
        source: The HttpSource.

    Threading:
        ``open`` and ``discover`` in the JobMaster's I/O executor; ``next_split`` and
        ``notify_checkpoint_complete`` on its main thread (truncation runs on the log's writer
        thread).
    """

    def __init__(self, source: HttpSource) -> None:
        self._source = source
        self._log_url: str | None = None
        self._log: Any = None
        self._queued: list[InputSplit] = []
        self._total = 0
        self._discovered = False

    def open(self, configuration: Configuration, job_id: str, operator_name: str) -> None:
        """Start (or join) this process's endpoint and open the log (blocking I/O).

        Raises:
            ConfigError: If no token is given and the cluster has no secret.
            OSError: If the endpoint cannot listen or the log directory cannot be made.
        """
        from millrace.connectors.http_source_server import ensure_server

        source = self._source
        tmp = absolute_local_path(configuration.get(ClusterOptions.TMP_DIR))
        self._log_url = source.path or f"{tmp}/http-sources/{job_id}/{source.name}"
        server = ensure_server(
            configuration.get(HttpSourceOptions.BIND_ADDRESS),
            configuration.get(HttpSourceOptions.PORT),
            source.token or _cluster_token(configuration),
            configuration.get(HttpSourceOptions.MAX_BODY_BYTES),
        )
        self._log = server.log_for(source.name, self._log_url)
        logger.info(
            "http source %s (%s): log %s from offset %d",
            source.name,
            operator_name,
            self._log_url,
            self._log.next_offset,
        )

    def discover(self) -> list[InputSplit]:
        """The log's split, on the first call only."""
        if self._log_url is None:
            raise RuntimeError("HttpSplitEnumerator.open was not called")
        if self._discovered:
            return []
        self._discovered = True
        return [InputSplit(0, self._log_url)]

    def add_splits(self, splits: Sequence[InputSplit]) -> None:
        self._queued.extend(splits)
        self._total += len(splits)

    def next_split(self, subtask_index: int, parallelism: int) -> NextInputSplit:
        """The log, to subtask 0 only."""
        if subtask_index != 0 or not self._queued:
            return NextInputSplit(None, MAX_WATERMARK, self._total, self.splits_assigned)
        split = self._queued.pop()
        return NextInputSplit(split, MIN_WATERMARK, self._total, self.splits_assigned)

    def notify_checkpoint_complete(self, checkpoint_id: int, positions: Mapping[str, int]) -> None:
        """A committed checkpoint's split positions: delete the segments below them."""
        position = positions.get(self._log_url or "")
        if self._log is None or position is None:
            return
        name = self._source.name

        def truncated(f: Future[int]) -> None:
            if f.exception() is not None:
                failure = f.exception()
                logger.warning("http source %s: truncating below %d: %s", name, position, failure)

        self._log.submit_truncate(position).add_done_callback(truncated)

    @property
    def log(self) -> Any:
        """The source's log writer (``IngestLog``), once ``open`` ran; else None."""
        return self._log

    @property
    def splits_total(self) -> int:
        return self._total

    @property
    def splits_assigned(self) -> int:
        return self._total - len(self._queued)


def _cluster_token(configuration: Configuration) -> str:
    """The REST API's token of the cluster secret.

    Raises:
        ConfigError: If there is no usable cluster secret (it names the key).
    """
    from millrace.rpc.tcp.transport_security import TransportSecurity
    from millrace.runtime.dispatcher.rest_endpoint import rest_token

    return rest_token(TransportSecurity.from_configuration(configuration).secret)
