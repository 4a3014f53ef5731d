"""Flink's rescaling paths: ``PATCH /jobs/{jobid}/rescaling?parallelism=N`` and ``GET
/jobs/{jobid}/rescaling/{triggerid}`` (issue 13).

The PATCH answers 202 with a trigger id at once; the rescaling (a savepoint, the job's tasks
restarted at the new parallelism from it, key groups redistributed: ``LiveJobChanges``) runs on
in the JobMaster, and its status, with the downtime, is read at the GET path for the same job
only. Both need the bearer token (``rest_guard.py``); a finished request stays readable for
``rest.async.store-duration``, like a savepoint request (the same table class,
``SavepointRequests``, its own instance). ``vertex`` (an id, id prefix or name) rescales one
vertex only; without it every vertex is rescaled.

Threading:
    uvicorn's event loop; the Dispatcher only through its gateway.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, HTTPException, Query
from pydantic import BaseModel, ConfigDict, Field

from millrace.errors import JobSubmissionError
from millrace.runtime.dispatcher.dispatcher_gateway import DispatcherGateway
from millrace.runtime.dispatcher.rest_job_models import ErrorResponse
from millrace.runtime.dispatcher.rest_models import TriggerResponse
from millrace.runtime.dispatcher.savepoint_requests import SavepointRequests
from millrace.runtime.jobmaster.job_change import JobChangeRequest, JobChangeResult
from millrace.types import JobId

__all__ = ["RescalingStatus", "rescaling_routes"]

RESCALING_TIMEOUT = 3600.0  # seconds a rescaling may take before its request fails
_BEARER: list[dict[str, list[str]]] = [{"bearerAuth": []}]


class RescalingStatus(BaseModel):
    """A rescaling request's status (Flink's ``AsynchronousOperationResult``, flattened)."""

    model_config = ConfigDict(populate_by_name=True)

    status: str = Field(description="IN_PROGRESS or COMPLETED")
    savepoint: str | None = Field(default=None, description="the savepoint restored from")
    downtime_ms: int | None = Field(
        default=None,
        alias="downtime-ms",
        description="ms from the savepoint's barrier to every task RUNNING again",
    )
    failure_cause: str | None = Field(default=None, alias="failure-cause")


def rescaling_routes(
    dispatcher: DispatcherGateway, requests: SavepointRequests, timeout: float
) -> APIRouter:
    """The router of the rescaling paths (see the module docstring).

    Args:
        dispatcher: Gateway of the Dispatcher.
        requests: The table of rescaling requests (its own, not the savepoints').
        timeout: Seconds the PATCH waits for the Dispatcher to find the job.
    """
    router = APIRouter()

    @router.patch(
        "/jobs/{jobid}/rescaling",
        status_code=202,
        response_model=TriggerResponse,
        response_model_by_alias=True,
        openapi_extra={"security": _BEARER},
        responses={429: {"model": ErrorResponse, "description": "too many rescalings pending"}},
    )
    async def rescale(
        jobid: str,
        parallelism: int = Query(..., ge=1, description="the new parallelism"),
        vertex: str = Query("", description="one vertex (id, id prefix or name); default all"),
    ) -> TriggerResponse:
        """Rescale a running job (a savepoint, then its tasks restart at ``parallelism``)."""
        try:
            await asyncio.wait_for(
                asyncio.wrap_future(dispatcher.request_job_details(JobId(jobid))), timeout
            )
        except JobSubmissionError as error:
            raise HTTPException(404, str(error)) from None
        request = JobChangeRequest(parallelism=parallelism, vertex=vertex)
        trigger_id = requests.start(  # nothing starts when the table is full
            JobId(jobid),
            lambda: dispatcher.change_job(JobId(jobid), request, timeout=RESCALING_TIMEOUT),
        )
        if trigger_id is None:
            raise HTTPException(429, "too many rescaling requests in progress; try again later")
        return TriggerResponse(request_id=trigger_id)

    @router.get(
        "/jobs/{jobid}/rescaling/{triggerid}",
        response_model=RescalingStatus,
        response_model_by_alias=True,
        openapi_extra={"security": _BEARER},
    )
    async def rescaling_status(jobid: str, triggerid: str) -> RescalingStatus:
        changing: Any = requests.get(JobId(jobid), triggerid)
        if changing is None:
            raise HTTPException(404, f"no rescaling request {triggerid} of job {jobid}")
        if not changing.done():
            return RescalingStatus(status="IN_PROGRESS")
        if changing.exception() is not None:
            return RescalingStatus(status="COMPLETED", failure_cause=str(changing.exception()))
        result: JobChangeResult = changing.result()
        return RescalingStatus(
            status="COMPLETED", savepoint=result.savepoint, downtime_ms=result.downtime_ms
        )

    return router
