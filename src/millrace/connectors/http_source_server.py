"""The HttpSource's endpoint: ``POST /sources/{name}/records`` in the JobManager process.

Clients POST JSON lines (one record a line, blank lines ignored) with the REST API's bearer
token (``Authorization: Bearer <token>``; ``millrace cluster token`` prints it). The answer is
``202 {"first_offset": a, "next_offset": b, "records": n}`` once the lines are a durable
segment of the source's log (:mod:`millrace.connectors.http_source_log`); 401 without the
token, 404 for a source name no running job has, 413 for a body over
``http-source.max-body-bytes``, 400 for a body that is not UTF-8 or holds no record, 503 if the
log cannot be written (nothing is stored then). Lines are not parsed here: a line that is not
JSON of the source's schema is stored and becomes a dead letter when read (never a failed POST
once accepted).

The server runs in the JobManager process, so it outlives TaskManager failures; one server per
``http-source.port`` in a process, shared by every HttpSource of every job there (sources are
told apart by name). It is started by the first enumerator of a source that needs it, and a
restarted job's new enumerator registers its log again on the same server, whose log writer
(and so its offsets) carries on. It stops with the process (``stop_servers`` in tests).

Threading:
    The app runs on uvicorn's event loop in its own thread; appends on each log's writer
    thread. The process-wide table of servers is guarded by one lock (it is not an endpoint's
    state: JobMasters' I/O executors register sources from their own threads).
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import threading
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse

from millrace.connectors.http_source_log import IngestLog
from millrace.errors import PipelineError
from millrace.runtime.dispatcher.rest_guard import RestGuard

__all__ = ["HttpIngestServer", "ensure_server", "stop_servers"]

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_servers: dict[int, HttpIngestServer] = {}


class _IngestGuard(RestGuard):
    """RestGuard with the ingest body cap: every request needs the token but ``GET``."""

    def __init__(self, app: Any, token: str, max_body_bytes: int) -> None:
        super().__init__(app, token, max_body_bytes)
        self._cap = max_body_bytes

    def body_limit(self, method: str, path: str) -> int:
        return self._cap


class HttpIngestServer:
    """One uvicorn server with the ingest route, and the logs of the sources it serves.

    Args:
        host: Interface (``http-source.bind-address``).
        port: Port (``http-source.port``; 0: a free one, see ``port`` after start).
        token: The bearer token clients send.
        max_body_bytes: Largest request body.

    Raises:
        OSError: If the port cannot be bound.

    Threading:
        See the module docstring.
    """

    def __init__(self, host: str, port: int, token: str, max_body_bytes: int) -> None:
        from millrace.runtime.dispatcher.rest_endpoint import DispatcherRestEndpoint

        self.logs: dict[str, IngestLog] = {}
        app = self._app()
        app.add_middleware(_IngestGuard, token=token, max_body_bytes=max_body_bytes)
        self._endpoint = DispatcherRestEndpoint(app, host, port).start()
        self.token = token
        self.port = self._endpoint.port
        self.url = self._endpoint.url
        logger.info("http source records at %s/sources/{name}/records", self.url)

    def log_for(self, name: str, url: str) -> IngestLog:
        """The log of source ``name`` at ``url``: the running writer if it is registered with
        the same directory, else a new one continuing the directory (blocking I/O)."""
        with _lock:  # I/O executor threads of several JobMasters
            log = self.logs.get(name)
            if log is None or log.url != url.rstrip("/"):
                if log is not None:  # a source of another job (or path) took the name over
                    logger.warning(
                        "http source %s: now writing %s instead of %s", name, url, log.url
                    )
                    log.close()  # its writer thread and directory lock
                log = IngestLog(url)
                self.logs = {**self.logs, name: log}  # replaced, never mutated: read unlocked
            return log

    def _app(self) -> FastAPI:
        app = FastAPI(title="Millrace HttpSource", docs_url=None, redoc_url=None)

        @app.exception_handler(HTTPException)
        async def flink_errors(_: Request, error: HTTPException) -> JSONResponse:
            return JSONResponse({"errors": [str(error.detail)]}, status_code=error.status_code)

        @app.get("/sources")
        async def sources() -> dict[str, Any]:
            return {
                "sources": [
                    {"name": n, "next_offset": log.next_offset} for n, log in self.logs.items()
                ]
            }

        @app.post("/sources/{name}/records", status_code=202)
        async def records(name: str, request: Request) -> dict[str, int]:
            log = self.logs.get(name)
            if log is None:
                raise HTTPException(404, f"no HttpSource named {name!r} runs here")
            body = await request.body()  # capped by the guard
            try:
                body.decode("utf-8")
            except UnicodeDecodeError as error:
                raise HTTPException(400, f"the body is not UTF-8: {error}") from None
            lines = [line for line in body.splitlines() if line.strip()]
            if not lines:
                raise HTTPException(400, "the body holds no record (one JSON object a line)")
            data = b"\n".join(lines) + b"\n"
            try:
                first, end = await asyncio.wrap_future(log.submit_append(data, len(lines)))
            except OSError as error:
                logger.warning("http source %s: append failed: %s", name, error)
                raise HTTPException(503, f"the log could not be written: {error}") from None
            return {"first_offset": first, "next_offset": end, "records": end - first}

        return app

    def close(self) -> None:
        """Stop serving and the log writers."""
        self._endpoint.close()
        for log in self.logs.values():
            log.close()


def ensure_server(host: str, port: int, token: str, max_body_bytes: int) -> HttpIngestServer:
    """The server of this process on ``port``, started if needed.

    Raises:
        OSError: If it cannot listen.
        PipelineError: If the server on ``port`` checks another token (HttpSources with
            different tokens need different ``http-source.port``s).
    """
    with _lock:
        server = _servers.get(port)
        if server is not None and not hmac.compare_digest(server.token, token):
            raise PipelineError(
                f"the HttpSource endpoint on port {port} checks another token; give this "
                "source another http-source.port, or the same token"
            )
        if server is None:
            server = HttpIngestServer(host, port, token, max_body_bytes)
            _servers[port] = server
            if port == 0:
                _servers[server.port] = server
        return server


def stop_servers() -> None:
    """Stop every server of this process (tests; a JobManager's servers end with it)."""
    with _lock:
        servers = set(_servers.values())
        _servers.clear()
    for server in servers:
        server.close()
