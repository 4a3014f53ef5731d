"""The REST API's job paths beyond the basic ones (Flink 1.19's): ``GET /jobs/overview``,
``GET /jobs/{jobid}`` (with its plan, vertex ids, states and times), ``.../plan``,
``.../vertices/{vertexid}`` and its ``/subtasks``, ``.../exceptions``, ``.../config``,
``.../checkpoints/config``, ``.../checkpoints/details/{checkpointid}``, and ``POST
/jobs/{jobid}/stop`` (stop with savepoint).

Every read answers from the job's ExecutionGraphInfo, which the Dispatcher gets from the job's
JobMaster (or keeps once the job ended). Stop with savepoint is the Dispatcher's
``trigger_savepoint`` with cancel-after; its request id is read at ``GET
/jobs/{jobid}/savepoints/{requestid}`` from the same SavepointRequests table as ``POST
/jobs/{jobid}/savepoints``. Like every write it needs the bearer token (``rest_guard.py``). An
unknown job, vertex or checkpoint is answered 404 ``{"errors": [...]}``.

Threading:
    uvicorn's event loop; the Dispatcher only through its gateway.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Future
from typing import Any

from fastapi import APIRouter, HTTPException

from millrace.errors import CheckpointError, JobSubmissionError
from millrace.runtime.checkpoint.savepoint_targets import SavepointTargets
from millrace.runtime.dispatcher.dispatcher_gateway import DispatcherGateway
from millrace.runtime.dispatcher.rest_job_models import (
    CheckpointConfig,
    CheckpointDetails,
    ErrorResponse,
    ExceptionHistory,
    ExceptionHistoryEntryInfo,
    ExecutionConfigInfo,
    ExternalizationInfo,
    JobConfig,
    JobDetailsFull,
    JobExceptions,
    JobPlanInfo,
    MultipleJobsDetails,
    StopWithSavepointRequest,
    SubtasksInfo,
    VertexSubtasksDetails,
)
from millrace.runtime.dispatcher.rest_job_views import (
    checkpoint_details,
    job_details,
    job_overview,
    job_plan,
    subtask_info,
)
from millrace.runtime.dispatcher.rest_models import TriggerResponse
from millrace.runtime.dispatcher.savepoint_requests import SavepointRequests
from millrace.runtime.executiongraph.archived_execution_graph import (
    ArchivedExecutionJobVertex,
    ExecutionGraphInfo,
)
from millrace.types import JobId

__all__ = ["SAVEPOINT_TIMEOUT", "job_routes"]

SAVEPOINT_TIMEOUT = 3600.0  # seconds a stop with savepoint may take before its request fails
_BEARER: list[dict[str, list[str]]] = [{"bearerAuth": []}]
_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorResponse, "description": "unknown job (or vertex, checkpoint)"}
}


def job_routes(
    dispatcher: DispatcherGateway,
    savepoints: SavepointRequests,
    savepoint_targets: SavepointTargets,
    timeout: float,
) -> APIRouter:
    """The router of the job paths (see the module docstring).

    Args:
        dispatcher: Gateway of the Dispatcher.
        savepoints: The REST app's table of savepoint requests (shared with ``POST
            /jobs/{jobid}/savepoints``).
        savepoint_targets: Confines a stop's ``targetDirectory`` (``state.savepoints.*``).
        timeout: Seconds a request waits for the Dispatcher.
    """
    router = APIRouter()

    async def wait(future: Future[Any]) -> Any:
        return await asyncio.wait_for(asyncio.wrap_future(future), timeout)

    async def graph(jobid: str) -> ExecutionGraphInfo:
        try:
            info: ExecutionGraphInfo = await wait(
                dispatcher.request_execution_graph_info(JobId(jobid))
            )
        except JobSubmissionError as error:
            raise HTTPException(404, str(error)) from None
        return info

    async def vertex(jobid: str, vertexid: str) -> tuple[ExecutionGraphInfo, Any]:
        info = await graph(jobid)
        found: ArchivedExecutionJobVertex | None = next(
            (v for v in info.vertices if v.vertex_id == vertexid), None
        )
        if found is None:
            raise HTTPException(404, f"job {jobid} has no vertex {vertexid}")
        return info, found

    @router.get("/jobs/overview", response_model=MultipleJobsDetails, response_model_by_alias=True)
    async def overview() -> MultipleJobsDetails:
        jobs = await wait(dispatcher.list_jobs())
        shown = []
        for details in jobs:
            try:
                info = await wait(dispatcher.request_execution_graph_info(JobId(details.job_id)))
            except JobSubmissionError:
                info = None
            shown.append(job_overview(details, info))
        return MultipleJobsDetails(jobs=shown)

    @router.get(
        "/jobs/{jobid}",
        response_model=JobDetailsFull,
        response_model_by_alias=True,
        responses=_NOT_FOUND,
    )
    async def job(jobid: str) -> JobDetailsFull:
        return job_details(await graph(jobid))

    @router.get(
        "/jobs/{jobid}/plan",
        response_model=JobPlanInfo,
        response_model_by_alias=True,
        responses=_NOT_FOUND,
    )
    async def plan(jobid: str) -> JobPlanInfo:
        return JobPlanInfo(plan=job_plan(await graph(jobid)))

    @router.get(
        "/jobs/{jobid}/vertices/{vertexid}",
        response_model=VertexSubtasksDetails,
        response_model_by_alias=True,
        responses=_NOT_FOUND,
    )
    async def vertex_details(jobid: str, vertexid: str) -> VertexSubtasksDetails:
        info, found = await vertex(jobid, vertexid)
        return VertexSubtasksDetails(
            id=found.vertex_id,
            name=found.name,
            parallelism=found.parallelism,
            max_parallelism=found.max_parallelism,
            now=info.now_ms,
            subtasks=[subtask_info(s, info.now_ms) for s in found.subtasks],
        )

    @router.get(
        "/jobs/{jobid}/vertices/{vertexid}/subtasks",
        response_model=SubtasksInfo,
        response_model_by_alias=True,
        responses=_NOT_FOUND,
    )
    async def subtasks(jobid: str, vertexid: str) -> SubtasksInfo:
        info, found = await vertex(jobid, vertexid)
        return SubtasksInfo(subtasks=[subtask_info(s, info.now_ms) for s in found.subtasks])

    @router.get(
        "/jobs/{jobid}/exceptions",
        response_model=JobExceptions,
        response_model_by_alias=True,
        responses=_NOT_FOUND,
    )
    async def exceptions(jobid: str) -> JobExceptions:
        info = await graph(jobid)
        entries = [
            ExceptionHistoryEntryInfo(
                exception_name=e.exception_name,
                stacktrace=e.stacktrace,
                timestamp=e.timestamp_ms,
                task_name=e.task_name or None,
                endpoint=e.endpoint or None,
                task_manager_id=e.task_manager_id or None,
            )
            for e in reversed(info.exceptions)  # newest first, as Flink's
        ]
        return JobExceptions(
            root_exception=info.root_exception or None,
            timestamp=info.root_timestamp_ms or None,
            truncated=False,
            exception_history=ExceptionHistory(
                entries=entries, truncated=info.exceptions_truncated
            ),
        )

    @router.get(
        "/jobs/{jobid}/config",
        response_model=JobConfig,
        response_model_by_alias=True,
        responses=_NOT_FOUND,
    )
    async def config(jobid: str) -> JobConfig:
        info = await graph(jobid)
        settings = info.job_config
        return JobConfig(
            jid=info.details.job_id,
            name=info.details.name,
            execution_config=ExecutionConfigInfo(
                execution_mode=settings.execution_mode,
                restart_strategy=settings.restart_strategy,
                job_parallelism=settings.job_parallelism,
                object_reuse_mode=False,
                user_config=settings.user_config,
            ),
        )

    @router.get(
        "/jobs/{jobid}/checkpoints/config",
        response_model=CheckpointConfig,
        response_model_by_alias=True,
        responses=_NOT_FOUND,
    )
    async def checkpoint_config(jobid: str) -> CheckpointConfig:
        settings = (await graph(jobid)).checkpoint_config
        return CheckpointConfig(
            mode=settings.mode,
            interval=settings.interval_ms,
            timeout=settings.timeout_ms,
            min_pause=settings.min_pause_ms,
            max_concurrent=settings.max_concurrent,
            # retained checkpoints outlive a cancelled or failed job; a finished one drops them
            externalization=ExternalizationInfo(enabled=True, delete_on_cancellation=False),
            state_backend=settings.state_backend,
            checkpoint_storage=settings.checkpoint_storage,
            unaligned_checkpoints=False,
            tolerable_failed_checkpoints=0,
        )

    @router.get(
        "/jobs/{jobid}/checkpoints/details/{checkpointid}",
        response_model=CheckpointDetails,
        response_model_by_alias=True,
        responses=_NOT_FOUND,
    )
    async def checkpoint(jobid: str, checkpointid: int) -> CheckpointDetails:
        info = await graph(jobid)
        record = next((r for r in info.checkpoints if r.checkpoint_id == checkpointid), None)
        if record is None:
            raise HTTPException(
                404, f"job {jobid} has no checkpoint {checkpointid} in its history (the last 10)"
            )
        return checkpoint_details(record, info.retained)

    @router.post(
        "/jobs/{jobid}/stop",
        status_code=202,
        response_model=TriggerResponse,
        response_model_by_alias=True,
        responses={
            **_NOT_FOUND,
            400: {"model": ErrorResponse, "description": "invalid target or drain"},
            401: {"model": ErrorResponse, "description": "no or a wrong bearer token"},
        },
        openapi_extra={"security": _BEARER},
    )
    async def stop(jobid: str, request: StopWithSavepointRequest) -> TriggerResponse:
        """Stop the job with a savepoint: the savepoint is taken, then the job is cancelled;
        read the outcome at ``GET /jobs/{jobid}/savepoints/{request-id}``."""
        if request.drain:
            raise HTTPException(
                400, "drain is not supported: Millrace stops with a savepoint without draining"
            )
        try:
            target = savepoint_targets.resolve(request.target_directory)
        except CheckpointError as error:
            raise HTTPException(400, str(error)) from None
        try:
            await wait(dispatcher.request_job_details(JobId(jobid)))
        except JobSubmissionError as error:
            raise HTTPException(404, str(error)) from None
        request_id = savepoints.start(  # nothing starts when the table is full
            JobId(jobid),
            lambda: dispatcher.trigger_savepoint(
                JobId(jobid),
                target if request.target_directory else None,
                True,
                timeout=SAVEPOINT_TIMEOUT,
            ),
        )
        if request_id is None:
            raise HTTPException(429, "too many savepoint requests in progress; try again later")
        return TriggerResponse(request_id=request_id)

    return router
