"""DispatcherRestEndpoint: the cluster's REST API, served by the JobManager process (seed 003).

Flink's paths and JSON field names: ``GET /overview``, ``GET /jobs``, ``GET /jobs/{jobid}``,
``GET /taskmanagers``, ``POST /jobs`` (a JobGraph), ``PATCH /jobs/{jobid}?mode=cancel``; the
OpenAPI description is served at ``/openapi.json`` (and browsable at ``/docs``). Errors come as
``{"errors": [message]}``.

Reads are open, like Flink's; writes (submitting user code, cancelling) carry
``Authorization: Bearer <token>``, the token being derived from the cluster secret
(:func:`rest_token`), and the API listens on loopback unless ``rest.bind-address`` says
otherwise. A submitted JobGraph is the control-message codec's msgpack encoding
(``application/x-msgpack``), at most ``rpc.framesize`` bytes.

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

from fastapi import FastAPI, Header, HTTPException, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from millrace.errors import JobSubmissionError
from millrace.rpc.message_codec import CodecError, MessageCodec
from millrace.runtime.dispatcher.dispatcher_gateway import DispatcherGateway
from millrace.runtime.executiongraph import JobStatus
from millrace.runtime.job_result import JobDetails
from millrace.runtime.jobgraph import JobGraph
from millrace.runtime.resourcemanager.resource_manager_gateway import ResourceManagerGateway

__all__ = ["DispatcherRestEndpoint", "create_rest_app", "rest_token"]

logger = logging.getLogger(__name__)

_VERSION = "0.1.0"


def rest_token(secret: bytes) -> str:
    """The bearer token of REST writes: HMAC-SHA256 of the cluster secret, hex (64 chars).

    Knowing it allows REST writes, not joining the RPC cluster.
    """
    return hmac.new(secret, b"millrace-rest-v1", hashlib.sha256).hexdigest()


class _Model(BaseModel):
    model_config = ConfigDict(populate_by_name=True)


class Overview(_Model):
    taskmanagers: int
    slots_total: int = Field(alias="slots-total")
    slots_available: int = Field(alias="slots-available")
    jobs_running: int = Field(alias="jobs-running")
    jobs_finished: int = Field(alias="jobs-finished")
    jobs_cancelled: int = Field(alias="jobs-cancelled")
    jobs_failed: int = Field(alias="jobs-failed")
    millrace_version: str = Field(alias="millrace-version")


class JobIdWithStatus(_Model):
    id: str
    status: str


class JobIdsWithStatus(_Model):
    jobs: list[JobIdWithStatus]


class VertexMetrics(_Model):
    read_records: int = Field(alias="read-records")
    write_records: int = Field(alias="write-records")
    dead_letters: int = Field(alias="dead-letters")
    late_records: int = Field(alias="late-records")
    spark_jobs: int = Field(alias="spark-jobs")


class JobVertexDetails(_Model):
    name: str
    parallelism: int
    tasks: dict[str, int] = Field(description="ExecutionState -> number of subtasks in it")
    metrics: VertexMetrics


class JobDetailsInfo(_Model):
    jid: str
    name: str
    state: str
    start_time: int = Field(alias="start-time", description="epoch ms")
    end_time: int = Field(alias="end-time", description="epoch ms, -1 while running")
    duration: int = Field(description="ms")
    restarts: int
    splits_total: int = Field(alias="splits-total")
    splits_assigned: int = Field(alias="splits-assigned")
    vertices: list[JobVertexDetails]


class TaskManagerInfoModel(_Model):
    id: str
    path: str = Field(description="RPC address of its TaskExecutor")
    slots_number: int = Field(alias="slotsNumber")
    free_slots: int = Field(alias="freeSlots")


class TaskManagersInfo(_Model):
    taskmanagers: list[TaskManagerInfoModel]


class JobSubmitResponse(_Model):
    jobid: str
    job_url: str = Field(alias="jobUrl")


async def _result(future: Future[Any], timeout: float) -> Any:
    return await asyncio.wait_for(asyncio.wrap_future(future), timeout)


def _job_details(details: JobDetails) -> JobDetailsInfo:
    start_ms = round(details.start_time * 1000)
    terminal = details.status.is_globally_terminal
    return JobDetailsInfo(
        jid=details.job_id,
        name=details.name,
        state=details.status.name,
        start_time=start_ms,
        end_time=start_ms + round(details.duration * 1000) if terminal else -1,
        duration=round(details.duration * 1000),
        restarts=details.restarts,
        splits_total=details.splits_total,
        splits_assigned=details.splits_assigned,
        vertices=[
            JobVertexDetails(
                name=v.name,
                parallelism=v.parallelism,
                tasks=v.states,
                metrics=VertexMetrics(
                    read_records=v.metrics.records_in,
                    write_records=v.metrics.records_out,
                    dead_letters=v.metrics.dead_letters,
                    late_records=v.metrics.late_records,
                    spark_jobs=v.metrics.bundles,
                ),
            )
            for v in details.vertices
        ],
    )


def create_rest_app(
    dispatcher: DispatcherGateway,
    resource_manager: ResourceManagerGateway,
    codec: MessageCodec,
    token: str,
    *,
    max_body_bytes: int,
    timeout: float,
) -> FastAPI:
    """The FastAPI application of the REST API.

    Args:
        dispatcher: Gateway of the Dispatcher.
        resource_manager: Gateway of the ResourceManager.
        codec: Decodes submitted JobGraphs.
        token: Bearer token required by writes (:func:`rest_token`).
        max_body_bytes: Largest accepted JobGraph (``rpc.framesize``).
        timeout: Seconds a request waits for the Dispatcher or ResourceManager.

    Returns:
        The app; serve it with uvicorn.
    """
    app = FastAPI(
        title="Millrace REST API",
        version=_VERSION,
        description="Flink's REST paths over a Millrace session cluster.",
    )

    def authorize(authorization: str | None) -> None:
        scheme, _, given = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip(), token):
            raise HTTPException(401, "a write needs 'Authorization: Bearer <token>' (rest_token)")

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

    @app.get("/jobs/{jobid}", response_model=JobDetailsInfo, response_model_by_alias=True)
    async def job(jobid: str) -> JobDetailsInfo:
        try:
            details = await _result(dispatcher.request_job_details(jobid), timeout)
        except JobSubmissionError as error:
            raise HTTPException(404, str(error)) from None
        return _job_details(details)

    @app.get("/taskmanagers", response_model=TaskManagersInfo, response_model_by_alias=True)
    async def taskmanagers() -> TaskManagersInfo:
        infos = await _result(resource_manager.request_task_manager_infos(), timeout)
        return TaskManagersInfo(
            taskmanagers=[
                TaskManagerInfoModel(
                    id=i.resource_id,
                    path=i.address,
                    slots_number=i.slots_total,
                    free_slots=i.slots_free,
                )
                for i in infos
            ]
        )

    @app.post(
        "/jobs",
        status_code=202,
        response_model=JobSubmitResponse,
        response_model_by_alias=True,
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {
                    "application/x-msgpack": {"schema": {"type": "string", "format": "binary"}}
                },
            }
        },
    )
    async def submit(
        request: Request, authorization: str | None = Header(default=None)
    ) -> JobSubmitResponse:
        """Submit a JobGraph (the codec's msgpack encoding, as the CLI builds it)."""
        authorize(authorization)
        body = await request.body()
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

    @app.patch("/jobs/{jobid}", status_code=202)
    async def cancel(
        jobid: str,
        mode: str = Query("cancel", description="only 'cancel'"),
        authorization: str | None = Header(default=None),
    ) -> dict[str, Any]:
        authorize(authorization)
        if mode != "cancel":
            raise HTTPException(400, f"mode={mode!r} is not supported; use mode=cancel")
        try:
            await _result(dispatcher.cancel_job(jobid), timeout)
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

    Raises:
        OSError: From ``start``, if the port cannot be bound.

    Threading:
        ``start`` and ``close`` from one thread.
    """

    def __init__(self, app: FastAPI, host: str, port: int) -> None:
        import uvicorn

        config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="rest", daemon=True)
        self._host = host
        self.port = port

    @property
    def url(self) -> str:
        """``http://host:port`` of the API."""
        return f"http://{self._host}:{self.port}"

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
