"""The REST API's TaskManager and JobManager paths (Flink 1.19's): ``GET /taskmanagers``,
``GET /taskmanagers/{taskmanagerid}``, ``GET /jobmanager/config``, ``GET /jobmanager/logs`` and
``GET /jobmanager/logs/{name}``.

TaskManagers come from the ResourceManager (hardware sent at registration, resident memory with
the heartbeats); the tasks one runs from the running jobs' ExecutionGraphInfo. The configuration
is the JobManager's effective one with secrets masked. Log files are those of the JobManager
in its log directory (``<io.tmp.dirs>/log``, ``jobmanager-*``): a name is served only if the
listing shows it, so no path outside that directory can be read. All are reads, open as in
Flink (``rest_guard.py``).

Threading:
    uvicorn's event loop; the Dispatcher and the ResourceManager only through their gateways;
    file reads in a worker thread (a log answered whole, its last 16 MiB at most).
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from fastapi import APIRouter, HTTPException
from fastapi.responses import PlainTextResponse

from millrace.errors import JobSubmissionError
from millrace.runtime.dispatcher.dispatcher_gateway import DispatcherGateway
from millrace.runtime.dispatcher.rest_cluster_models import (
    ConfigurationEntry,
    HardwareInfo,
    LogInfo,
    LogListInfo,
    SlotInfo,
    SlotResource,
    TaskManagerDetails,
    TaskManagerEntry,
    TaskManagerMemory,
    TaskManagersList,
    TaskManagerTask,
)
from millrace.runtime.dispatcher.rest_job_models import ErrorResponse
from millrace.runtime.resourcemanager.resource_manager_gateway import ResourceManagerGateway
from millrace.runtime.resourcemanager.slot_manager import TaskManagerInfo
from millrace.runtime.scheduler.execution_graph_views import endpoint
from millrace.types import JobId

__all__ = ["cluster_routes", "log_files"]

_LOG_PREFIX = "jobmanager"
_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorResponse, "description": "unknown TaskManager or log"}
}


def log_files(directory: Path) -> dict[str, Path]:
    """The JobManager's log files in ``directory`` by name (regular files named
    ``jobmanager*`` directly in it; symbolic links are not followed out of it)."""
    if not directory.is_dir():
        return {}
    root = directory.resolve()
    found = {}
    for path in directory.iterdir():
        inside = not path.is_symlink() and path.resolve().parent == root
        if path.name.startswith(_LOG_PREFIX) and inside and path.is_file():
            found[path.name] = path
    return found


def _entry(info: TaskManagerInfo) -> dict[str, object]:
    hardware = info.hardware
    _, _, port = endpoint(info.address).rpartition(":")
    return {
        "id": info.resource_id,
        "path": info.address,
        "slots_number": info.slots_total,
        "free_slots": info.slots_free,
        "data_port": int(port) if port.isdigit() else 0,
        "time_since_last_heartbeat": info.time_since_last_heartbeat_ms,
        "hardware": HardwareInfo(
            cpu_cores=hardware.cpu_cores if hardware else 0,
            physical_memory=hardware.physical_memory_bytes if hardware else -1,
            free_memory=hardware.free_memory_bytes if hardware else -1,
            managed_memory=hardware.managed_memory_bytes if hardware else 0,
        ),
    }


def cluster_routes(
    dispatcher: DispatcherGateway, resource_manager: ResourceManagerGateway, timeout: float
) -> APIRouter:
    """The router of the TaskManager and JobManager paths (see the module docstring).

    Args:
        dispatcher: Gateway of the Dispatcher (jobs, configuration, log directory).
        resource_manager: Gateway of the ResourceManager (TaskManagers).
        timeout: Seconds a request waits for either.
    """
    router = APIRouter()

    async def wait(future: Future[Any]) -> Any:
        return await asyncio.wait_for(asyncio.wrap_future(future), timeout)

    @router.get("/taskmanagers", response_model=TaskManagersList, response_model_by_alias=True)
    async def taskmanagers() -> TaskManagersList:
        infos = await wait(resource_manager.request_task_manager_infos())
        return TaskManagersList(taskmanagers=[TaskManagerEntry(**_entry(i)) for i in infos])

    async def tasks_on(resource_id: str) -> list[TaskManagerTask]:
        tasks = []
        for job in await wait(dispatcher.list_jobs()):
            if job.status.is_globally_terminal:
                continue
            try:
                info = await wait(dispatcher.request_execution_graph_info(JobId(job.job_id)))
            except JobSubmissionError:
                continue  # it ended meanwhile
            for vertex in info.vertices:
                tasks += [
                    TaskManagerTask(
                        job_id=job.job_id,
                        vertex_id=vertex.vertex_id,
                        task_name=f"{vertex.name} ({s.subtask + 1}/{vertex.parallelism})",
                        subtask=s.subtask,
                        status=s.state,
                    )
                    for s in vertex.subtasks
                    if s.task_manager_id == resource_id
                ]
        return tasks

    @router.get(
        "/taskmanagers/{taskmanagerid}",
        response_model=TaskManagerDetails,
        response_model_by_alias=True,
        responses=_NOT_FOUND,
    )
    async def taskmanager(taskmanagerid: str) -> TaskManagerDetails:
        infos = await wait(resource_manager.request_task_manager_infos())
        info = next((i for i in infos if i.resource_id == taskmanagerid), None)
        if info is None:
            raise HTTPException(404, f"no TaskManager {taskmanagerid} is registered")
        return TaskManagerDetails(
            **_entry(info),
            allocated_slots=[
                SlotInfo(
                    job_id=s.job_id,
                    resource=SlotResource(slot_index=s.slot_index, allocation_id=s.allocation_id),
                )
                for s in info.allocated_slots
            ],
            tasks=await tasks_on(taskmanagerid),
            memory=TaskManagerMemory(rss=info.resident_memory_bytes),
        )

    @router.get("/jobmanager/config", response_model=list[ConfigurationEntry])
    async def jobmanager_config() -> list[ConfigurationEntry]:
        configuration = await wait(dispatcher.request_cluster_configuration())
        return [ConfigurationEntry(key=k, value=v) for k, v in configuration.entries]

    async def logs() -> dict[str, Path]:
        configuration = await wait(dispatcher.request_cluster_configuration())
        return await asyncio.to_thread(log_files, Path(configuration.log_directory))

    @router.get("/jobmanager/logs", response_model=LogListInfo)
    async def jobmanager_logs() -> LogListInfo:
        def described(files: dict[str, Path]) -> list[LogInfo]:
            shown = []
            for name, path in sorted(files.items()):
                try:
                    stat = path.stat()
                except OSError:
                    continue  # removed meanwhile
                shown.append(LogInfo(name=name, size=stat.st_size, mtime=int(stat.st_mtime * 1000)))
            return shown

        return LogListInfo(logs=await asyncio.to_thread(described, await logs()))

    @router.get(
        "/jobmanager/logs/{name}",
        response_class=PlainTextResponse,
        responses={
            200: {"content": {"text/plain": {"schema": {"type": "string"}}}},
            404: {
                "description": "no such log file",
                "content": {
                    "application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}
                },
            },
        },
    )
    async def jobmanager_log(name: str) -> PlainTextResponse:
        path = (await logs()).get(name)
        if path is None:
            raise HTTPException(404, f"no log file {name!r}; GET /jobmanager/logs lists them")
        # read whole at once: the process appends to its log, and a file streamed with the
        # length it had when stat'ed outgrows its Content-Length (uvicorn drops the answer)
        text = await asyncio.to_thread(_tail, path, _LOG_BYTES)
        return PlainTextResponse(text, media_type="text/plain; charset=utf-8")

    return router


_LOG_BYTES = 16 * 1024 * 1024  # the most of a log file one answer carries (its end)


def _tail(path: Path, limit: int) -> bytes:
    """The last ``limit`` bytes of ``path`` as they are now (worker thread)."""
    with path.open("rb") as f:
        size = f.seek(0, 2)
        f.seek(max(0, size - limit))
        return f.read(limit)
