"""DispatcherRestEndpoint: the cluster's REST API, served by the JobManager process (seed 003).

Flink's paths and JSON field names: ``GET /overview``, ``GET /jobs``, ``GET /jobs/{jobid}``,
``GET /jobs/{jobid}/checkpoints``, ``GET /jobs/{jobid}/watermarks`` (the global min clock and
every task's), ``GET /taskmanagers``, ``POST /jobs`` (a JobGraph), ``PATCH
/jobs/{jobid}?mode=cancel``, ``POST /jobs/{jobid}/savepoints`` (answers a request id) and ``GET
/jobs/{jobid}/savepoints/{requestid}``; the OpenAPI description is served at ``/openapi.json``
(and browsable at ``/docs``). Errors come as ``{"errors": [message]}``. The other job paths
(``/jobs/overview``, ``/jobs/{jobid}`` itself, plan, vertices, subtasks, exceptions,
configuration, checkpoint details, ``POST /jobs/{jobid}/stop``) are the router of
:mod:`~millrace.runtime.dispatcher.rest_job_routes`; ``/taskmanagers`` and ``/jobmanager/*``
that of :mod:`~millrace.runtime.dispatcher.rest_cluster_routes`; ``PATCH
/jobs/{jobid}/rescaling`` and its status that of
:mod:`~millrace.runtime.dispatcher.rest_rescaling_routes` (``docs/rest_api.md``).

Reads are open, like Flink's; writes (submitting user code, cancelling, savepoints) and
savepoint status reads carry ``Authorization: Bearer <token>``, the token being derived from
the cluster secret (:func:`rest_token`), checked before any body is read, and bodies are
capped while they stream (:mod:`~millrace.runtime.dispatcher.rest_guard`). The API listens on
loopback unless ``rest.bind-address`` says otherwise, over HTTPS with
``security.ssl.rest.enabled``. A submitted JobGraph is the control-message codec's msgpack
encoding (``application/x-msgpack``), at most ``rpc.framesize`` bytes. A savepoint's
``target-directory`` must lie under ``state.savepoints.dir`` (or
``state.savepoints.allowed-roots``); a savepoint request can be read by its job's path only
and is forgotten ``rest.async.store-duration`` after it finished.

Threading:
    The app runs on uvicorn's event loop in its own thread; it talks to the Dispatcher and the
    ResourceManager only through their gateways (futures), never touching endpoint state.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import threading
from concurrent.futures import Future
from typing import Any

from fastapi import FastAPI, HTTPException, Query, Request
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse

from millrace.clock import Clock, SystemClock
from millrace.errors import CheckpointError, CodecError, JobSubmissionError
from millrace.rpc.message_codec import MessageCodec
from millrace.runtime.checkpoint.checkpoint_history import CheckpointRecord
from millrace.runtime.checkpoint.savepoint_targets import SavepointTargets
from millrace.runtime.dispatcher.dispatcher_gateway import DispatcherGateway
from millrace.runtime.dispatcher.metrics_rest import create_metrics_router
from millrace.runtime.dispatcher.rest_cluster_routes import cluster_routes
from millrace.runtime.dispatcher.rest_guard import RestGuard, needs_token
from millrace.runtime.dispatcher.rest_job_routes import job_routes
from millrace.runtime.dispatcher.rest_models import (
    CheckpointInfo,
    CheckpointingStatistics,
    JobIdsWithStatus,
    JobIdWithStatus,
    JobSubmitResponse,
    JobWatermarks,
    Overview,
    SavepointRequest,
    SavepointStatus,
    TaskWatermark,
    TriggerResponse,
)
from millrace.runtime.dispatcher.rest_openapi import document_errors
from millrace.runtime.dispatcher.rest_rescaling_routes import rescaling_routes
from millrace.runtime.dispatcher.savepoint_requests import SavepointRequests
from millrace.runtime.dispatcher.web_dashboard import dashboard_router
from millrace.runtime.executiongraph import JobStatus
from millrace.runtime.jobgraph import JobGraph
from millrace.runtime.resourcemanager.resource_manager_gateway import ResourceManagerGateway
from millrace.types import JobId

__all__ = ["DispatcherRestEndpoint", "create_rest_app", "rest_token"]

logger = logging.getLogger(__name__)

_VERSION = "0.1.0"
_SAVEPOINT_TIMEOUT = 3600.0  # seconds a savepoint may take before its request fails
_BEARER: list[dict[str, list[str]]] = [{"bearerAuth": []}]  # OpenAPI: needs the token


def rest_token(secret: bytes) -> str:
    """The bearer token of REST writes: HMAC-SHA256 of the cluster secret, hex (64 chars).

    Knowing it allows REST writes, not joining the RPC cluster.
    """
    return hmac.new(secret, b"millrace-rest-v1", hashlib.sha256).hexdigest()


async def _result(future: Future[Any], timeout: float) -> Any:
    return await asyncio.wait_for(asyncio.wrap_future(future), timeout)


def create_rest_app(
    dispatcher: DispatcherGateway,
    resource_manager: ResourceManagerGateway,
    codec: MessageCodec,
    token: str,
    *,
    max_body_bytes: int,
    timeout: float,
    savepoint_targets: SavepointTargets,
    store_duration: float = 300.0,
    clock: Clock | None = None,
) -> FastAPI:
    """The FastAPI application of the REST API, behind its :class:`RestGuard`.

    Args:
        dispatcher: Gateway of the Dispatcher.
        resource_manager: Gateway of the ResourceManager.
        codec: Decodes submitted JobGraphs.
        token: Bearer token required by writes and savepoint status (:func:`rest_token`).
        max_body_bytes: Largest accepted JobGraph (``rpc.framesize``).
        timeout: Seconds a request waits for the Dispatcher or ResourceManager.
        savepoint_targets: Confines savepoint targets (``state.savepoints.*``).
        store_duration: Seconds a finished savepoint request stays readable
            (``rest.async.store-duration``).
        clock: Time source of that duration (default the system clock).

    Returns:
        The app; serve it with uvicorn.
    """
    app = FastAPI(
        title="Millrace REST API",
        version=_VERSION,
        description="Flink's REST paths over a Millrace session cluster.",
    )
    app.add_middleware(RestGuard, token=token, job_body_limit_bytes=max_body_bytes)
    app.include_router(create_metrics_router(dispatcher, resource_manager, timeout))
    app.include_router(dashboard_router())  # GET / and /web/...: the web dashboard

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
            )
            schemes = schema.setdefault("components", {}).setdefault("securitySchemes", {})
            schemes["bearerAuth"] = {"type": "http", "scheme": "bearer"}
            document_errors(schema, needs_token)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, error: HTTPException) -> JSONResponse:
        return JSONResponse({"errors": [str(error.detail)]}, status_code=error.status_code)

    @app.get("/overview", response_model=Overview, response_model_by_alias=True)
    async def overview() -> Overview:
        infos = await _result(resource_manager.request_task_manager_infos(), timeout)
        jobs = await _result(dispatcher.list_jobs(), timeout)
        count = {status: sum(j.status is status for j in jobs) for status in JobStatus}
        return Overview(
            taskmanagers=len(infos),
            slots_total=sum(i.slots_total for i in infos),
            slots_available=sum(i.slots_free for i in infos),
            jobs_running=len(jobs)
            - count[JobStatus.FINISHED]
            - count[JobStatus.CANCELED]
            - count[JobStatus.FAILED],
            jobs_finished=count[JobStatus.FINISHED],
            jobs_cancelled=count[JobStatus.CANCELED],
            jobs_failed=count[JobStatus.FAILED],
            millrace_version=_VERSION,
        )

    @app.get("/jobs", response_model=JobIdsWithStatus)
    async def jobs() -> JobIdsWithStatus:
        listed = await _result(dispatcher.list_jobs(), timeout)
        return JobIdsWithStatus(
            jobs=[JobIdWithStatus(id=j.job_id, status=j.status.name) for j in listed]
        )

    def checkpoint_info(record: CheckpointRecord) -> CheckpointInfo:
        return CheckpointInfo(
            id=record.checkpoint_id,
            status=record.status,
            is_savepoint=record.is_savepoint,
            trigger_timestamp=record.trigger_ms,
            end_to_end_duration=record.duration_ms,
            state_size=record.state_size_bytes,
            external_path=record.location,
            failure_message=record.failure,
        )

    async def running(call: Any) -> Any:
        try:
            return await _result(call(), timeout)
        except JobSubmissionError as error:
            raise HTTPException(404, str(error)) from None
        except CheckpointError as error:
            raise HTTPException(400, str(error)) from None

    @app.get(
        "/jobs/{jobid}/checkpoints",
        response_model=CheckpointingStatistics,
        response_model_by_alias=True,
    )
    async def checkpoints(jobid: str) -> CheckpointingStatistics:
        stats = await running(lambda: dispatcher.request_checkpoint_statistics(JobId(jobid)))
        completed = [r for r in stats.history if r.status == "COMPLETED"]
        return CheckpointingStatistics(
            counts={
                "completed": stats.completed,
                "failed": stats.failed,
                "in_progress": stats.in_progress,
            },
            interval=stats.interval_ms,
            mode=stats.mode,
            restored=stats.restored_from,
            retained=stats.retained,
            latest=checkpoint_info(completed[-1]) if completed else None,
            history=[checkpoint_info(r) for r in stats.history],
        )

    @app.get("/jobs/{jobid}/watermarks", response_model=JobWatermarks, response_model_by_alias=True)
    async def watermarks(jobid: str) -> JobWatermarks:
        info = await running(lambda: dispatcher.request_watermarks(JobId(jobid)))
        return JobWatermarks(
            min_clock=info.min_clock_ms,
            tasks=[
                TaskWatermark(vertex=c.vertex, subtask=c.subtask_index, watermark=c.watermark_ms)
                for c in info.tasks
            ],
        )

    savepoints = SavepointRequests(clock or SystemClock(), store_duration)
    app.include_router(job_routes(dispatcher, savepoints, savepoint_targets, timeout))
    app.include_router(cluster_routes(dispatcher, resource_manager, timeout))
    app.include_router(
        rescaling_routes(
            dispatcher, SavepointRequests(clock or SystemClock(), store_duration), timeout
        )
    )

    @app.post(
        "/jobs/{jobid}/savepoints",
        status_code=202,
        response_model=TriggerResponse,
        response_model_by_alias=True,
        openapi_extra={"security": _BEARER},
    )
    async def trigger_savepoint(jobid: str, request: SavepointRequest) -> TriggerResponse:
        """Trigger a savepoint (and cancel the job once it is taken, with cancel-job)."""
        try:
            target = savepoint_targets.resolve(request.target_directory)
        except CheckpointError as error:
            raise HTTPException(400, str(error)) from None
        await running(lambda: dispatcher.request_job_details(JobId(jobid)))
        request_id = savepoints.start(  # nothing starts when the table is full
            JobId(jobid),
            lambda: dispatcher.trigger_savepoint(
                JobId(jobid),
                target if request.target_directory else None,
                request.cancel_job,
                timeout=_SAVEPOINT_TIMEOUT,
            ),
        )
        if request_id is None:
            raise HTTPException(429, "too many savepoint requests in progress; try again later")
        return TriggerResponse(request_id=request_id)

    @app.get(
        "/jobs/{jobid}/savepoints/{requestid}",
        response_model=SavepointStatus,
        response_model_by_alias=True,
        openapi_extra={"security": _BEARER},
    )
    async def savepoint_status(jobid: str, requestid: str) -> SavepointStatus:
        taking = savepoints.get(JobId(jobid), requestid)
        if taking is None:
            raise HTTPException(404, f"no savepoint request {requestid} of job {jobid}")
        if not taking.done():
            return SavepointStatus(status="IN_PROGRESS")
        error = taking.exception()
        if error is not None:
            return SavepointStatus(status="COMPLETED", failure_cause=str(error))
        return SavepointStatus(status="COMPLETED", location=taking.result())

    @app.post(
        "/jobs",
        status_code=202,
        response_model=JobSubmitResponse,
        response_model_by_alias=True,
        openapi_extra={
            "security": _BEARER,
            "requestBody": {
                "required": True,
                "content": {
                    "application/x-msgpack": {"schema": {"type": "string", "format": "binary"}}
                },
            },
        },
    )
    async def submit(request: Request) -> JobSubmitResponse:
        """Submit a JobGraph (the codec's msgpack encoding, as the CLI builds it)."""
        body = await request.body()  # at most max_body_bytes: RestGuard caps the stream
        if len(body) > max_body_bytes:
            raise HTTPException(
                413, f"JobGraph of {len(body)} bytes exceeds rpc.framesize={max_body_bytes}"
            )
        try:
            job_graph = codec.decode(body)
        except CodecError as error:
            raise HTTPException(400, f"not a JobGraph: {error}") from None
        if not isinstance(job_graph, JobGraph):
            raise HTTPException(400, f"not a JobGraph: {type(job_graph).__name__}")
        try:
            await _result(dispatcher.submit_job(job_graph), timeout)
        except JobSubmissionError as error:
            raise HTTPException(400, str(error)) from None
        return JobSubmitResponse(jobid=job_graph.job_id, job_url=f"/jobs/{job_graph.job_id}")

    @app.patch("/jobs/{jobid}", status_code=202, openapi_extra={"security": _BEARER})
    async def cancel(
        jobid: str, mode: str = Query("cancel", description="only 'cancel'")
    ) -> dict[str, Any]:
        if mode != "cancel":
            raise HTTPException(400, f"mode={mode!r} is not supported; use mode=cancel")
        try:
            await _result(dispatcher.cancel_job(JobId(jobid)), timeout)
        except JobSubmissionError as error:
            raise HTTPException(404, str(error)) from None
        return {}

    return app


class DispatcherRestEndpoint:
    """Serves :func:`create_rest_app` with uvicorn on its own thread.

    Args:
        app: The application.
        host: Interface to listen on (``rest.bind-address``).
        port: Port (``rest.port``; 0 picks a free one).
        ssl_certificate: PEM certificate chain to serve HTTPS with
            (``security.ssl.rest.certificate``); None: plain HTTP.
        ssl_key: Its PEM private key (``security.ssl.rest.key``).

    Raises:
        OSError: From ``start``, if the port cannot be bound or the certificate not loaded.

    Threading:
        ``start`` and ``close`` from one thread.
    """

    def __init__(
        self,
        app: FastAPI,
        host: str,
        port: int,
        *,
        ssl_certificate: str | None = None,
        ssl_key: str | None = None,
    ) -> None:
        import uvicorn

        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level="warning",
            lifespan="off",
            ssl_certfile=ssl_certificate,
            ssl_keyfile=ssl_key,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="rest", daemon=True)
        self._host = host
        self._scheme = "https" if ssl_certificate else "http"
        self.port = port

    @property
    def url(self) -> str:
        """``http(s)://host:port`` of the API."""
        return f"{self._scheme}://{self._host}:{self.port}"

    def start(self, timeout: float = 30.0) -> DispatcherRestEndpoint:
        """Start serving; returns once the socket listens."""
        self._thread.start()
        deadline = threading.Event()
        for _ in range(int(timeout / 0.01)):
            if self._server.started or not self._thread.is_alive():
                break
            deadline.wait(0.01)
        if not self._server.started:
            self.close()
            raise OSError(f"the REST API could not listen on {self._host}:{self.port}")
        self.port = self._server.servers[0].sockets[0].getsockname()[1]
        logger.info("REST API at %s", self.url)
        return self

    def close(self, timeout: float = 10.0) -> None:
        """Stop serving and join the thread. Idempotent."""
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout)
