"""Flink's REST metric paths (the metrics helper's part of issue 14's REST contract).

* ``GET /jobs/{jobid}/vertices/{vertexid}/subtasks/metrics[?get=a,b][&agg=min,max,avg,sum]``:
  the names of the task metrics of the vertex's running subtasks (``[{"id"}]``), or with
  ``get`` each named metric aggregated over them (``[{"id","min","max","avg","sum"}]``);
* ``GET /jobs/{jobid}/vertices/{vertexid}/backpressure``: per subtask the share of time it
  was back-pressured (``ratio``), idle and busy, over the last 5 s, and Flink's level
  (``ok`` up to 0.10, ``low`` up to 0.5, ``high`` above; the vertex's is its worst
  subtask's). A source is back-pressured while its output channels' flow-control windows are
  full (seed 001; ``taskmanager.network.flow-control.*``);
* ``GET /taskmanagers/{taskmanagerid}/metrics[?get=..]`` and ``GET
  /jobmanager/metrics[?get=..]``: ``[{"id"}]``, or with ``get`` ``[{"id","value"}]`` with
  values as strings, as Flink's.

The task and TaskManager figures come from each TaskManager's MetricQueryService through the
ResourceManager (Flink's MetricFetcher), the same snapshots the Prometheus reporter shows;
the JobManager's from this process and the ResourceManager and Dispatcher gateways.

Threading:
    The router's handlers run on the REST app's event loop; they only call gateways.
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import Future
from typing import Any

from fastapi import APIRouter, HTTPException, Query
from pydantic import BaseModel, ConfigDict, Field

from millrace.errors import JobSubmissionError
from millrace.runtime.dispatcher.dispatcher_gateway import DispatcherGateway
from millrace.runtime.metrics.metric_query_service import MetricDump
from millrace.runtime.metrics.metric_values import (
    TASK_METRICS,
    job_manager_values,
    process_values,
    task_values,
)
from millrace.runtime.metrics.process_metrics import process_metrics
from millrace.runtime.metrics.task_io_metric_group import TaskMetricsSnapshot
from millrace.runtime.resourcemanager.resource_manager_gateway import ResourceManagerGateway
from millrace.types import JobId, ResourceId

__all__ = ["back_pressure_level", "create_metrics_router"]

AGGREGATIONS = ("min", "max", "avg", "sum")


class _Model(BaseModel):
    model_config = ConfigDict(populate_by_name=True)


class AggregatedMetric(_Model):
    id: str
    min: float | None = None
    max: float | None = None
    avg: float | None = None
    sum: float | None = None


class MetricValue(_Model):
    id: str
    value: str | None = Field(default=None, description="As Flink's: the value as a string")


class SubtaskBackPressure(_Model):
    subtask: int
    backpressure_level: str = Field(alias="backpressureLevel")
    ratio: float = Field(description="backPressuredTimeMsPerSecond / 1000")
    idle_ratio: float = Field(alias="idleRatio")
    busy_ratio: float = Field(alias="busyRatio")


class JobVertexBackPressure(_Model):
    status: str
    backpressure_level: str = Field(alias="backpressureLevel")
    end_timestamp: int = Field(alias="end-timestamp", description="epoch ms")
    subtasks: list[SubtaskBackPressure]


def back_pressure_level(ratio: float) -> str:
    """Flink's level of a back-pressure ratio: ok <= 0.10 < low <= 0.5 < high."""
    if ratio <= 0.10:
        return "ok"
    return "low" if ratio <= 0.5 else "high"


def _names(get: str | None) -> list[str] | None:
    if get is None:
        return None
    return [name.strip() for name in get.split(",") if name.strip()]


def _aggregations(agg: str | None) -> list[str]:
    if agg is None:
        return list(AGGREGATIONS)
    chosen = [a.strip() for a in agg.split(",") if a.strip()]
    unknown = [a for a in chosen if a not in AGGREGATIONS]
    if unknown:
        raise HTTPException(
            400, f"unknown aggregation {unknown[0]!r}: use {', '.join(AGGREGATIONS)}"
        )
    return chosen


def _values(values: dict[str, float], get: str | None) -> list[MetricValue]:
    names = _names(get)
    if names is None:
        return [MetricValue(id=name) for name in values]
    return [MetricValue(id=n, value=_text(values[n])) for n in names if n in values]


def _text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def create_metrics_router(
    dispatcher: DispatcherGateway, resource_manager: ResourceManagerGateway, timeout: float
) -> APIRouter:
    """The metric paths of the REST API.

    Args:
        dispatcher: Gateway of the Dispatcher (jobs).
        resource_manager: Gateway of the ResourceManager (TaskManagers and their metrics).
        timeout: Seconds a request waits for a gateway.

    Returns:
        An APIRouter to include in the REST app.
    """
    router = APIRouter()

    async def ask(future: Future[Any]) -> Any:
        return await asyncio.wait_for(asyncio.wrap_future(future), timeout)

    async def subtasks(jobid: str, vertexid: str) -> list[TaskMetricsSnapshot]:
        """The snapshots of the vertex's running subtasks (404 for an unknown job or one of
        its unknown vertices)."""
        try:
            details = await ask(dispatcher.request_job_details(JobId(jobid)))
        except JobSubmissionError as error:
            raise HTTPException(404, str(error)) from None
        known = {getattr(v, "vertex_id", getattr(v, "id", None)) for v in details.vertices}
        if None not in known and vertexid not in known:
            raise HTTPException(404, f"job {jobid} has no vertex {vertexid}")
        dumps: list[MetricDump] = await ask(resource_manager.request_task_manager_metrics())
        found = [
            task
            for dump in dumps
            for task in dump.tasks
            if task.job_id == jobid and task.vertex_id == vertexid
        ]
        return sorted(found, key=lambda t: t.subtask_index)

    @router.get(
        "/jobs/{jobid}/vertices/{vertexid}/subtasks/metrics",
        response_model=list[AggregatedMetric],
        response_model_exclude_none=True,
    )
    async def subtask_metrics(
        jobid: str,
        vertexid: str,
        get: str | None = Query(default=None, description="Comma-separated metric names"),
        agg: str | None = Query(default=None, description="Some of min,max,avg,sum"),
    ) -> list[AggregatedMetric]:
        aggregations = _aggregations(agg)
        tasks = await subtasks(jobid, vertexid)
        names = _names(get)
        if not tasks:
            return []
        if names is None:
            return [AggregatedMetric(id=name) for name in TASK_METRICS]
        values = [task_values(t) for t in tasks]
        out = []
        for name in (n for n in names if n in TASK_METRICS):
            column = [float(v[name]) for v in values]
            figures = {
                "min": min(column),
                "max": max(column),
                "avg": sum(column) / len(column),
                "sum": sum(column),
            }
            out.append(AggregatedMetric(id=name, **{a: figures[a] for a in aggregations}))
        return out

    @router.get(
        "/jobs/{jobid}/vertices/{vertexid}/backpressure",
        response_model=JobVertexBackPressure,
        response_model_by_alias=True,
    )
    async def backpressure(jobid: str, vertexid: str) -> JobVertexBackPressure:
        tasks = await subtasks(jobid, vertexid)
        rows = [
            SubtaskBackPressure(
                subtask=t.subtask_index,
                backpressure_level=back_pressure_level(t.backpressured_ms_per_second / 1000),
                ratio=t.backpressured_ms_per_second / 1000,
                idle_ratio=t.idle_ms_per_second / 1000,
                busy_ratio=t.busy_ms_per_second / 1000,
            )
            for t in tasks
        ]
        worst = max((r.ratio for r in rows), default=0.0)
        return JobVertexBackPressure(
            status="ok",
            backpressure_level=back_pressure_level(worst),
            end_timestamp=max((t.timestamp_ms for t in tasks), default=round(time.time() * 1000)),
            subtasks=rows,
        )

    @router.get(
        "/taskmanagers/{taskmanagerid}/metrics",
        response_model=list[MetricValue],
        response_model_exclude_none=True,
    )
    async def task_manager_metrics(
        taskmanagerid: str,
        get: str | None = Query(default=None, description="Comma-separated metric names"),
    ) -> list[MetricValue]:
        dumps: list[MetricDump] = await ask(
            resource_manager.request_task_manager_metrics(ResourceId(taskmanagerid))
        )
        if not dumps:
            raise HTTPException(404, f"no TaskManager {taskmanagerid} answered")
        return _values(dumps[0].process, get)

    @router.get(
        "/jobmanager/metrics",
        response_model=list[MetricValue],
        response_model_exclude_none=True,
    )
    async def job_manager_metrics(
        get: str | None = Query(default=None, description="Comma-separated metric names"),
    ) -> list[MetricValue]:
        infos = await ask(resource_manager.request_task_manager_infos())
        jobs = await ask(dispatcher.list_jobs())
        values = {**process_values(process_metrics()), **job_manager_values(infos, jobs)}
        return _values(values, get)

    return router
