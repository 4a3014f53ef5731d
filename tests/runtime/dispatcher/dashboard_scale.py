"""A cluster of 50 jobs and 20 TaskManagers in one process, for the dashboard at scale.

The real ResourceManager and Dispatcher on a LocalRpcService behind the real REST app (served
by uvicorn on loopback), and 20 real TaskExecutors on a TestingTaskRuntime (no Spark) that
register with the ResourceManager through RegisterTaskManager like a TaskManager process does.
Jobs are one-vertex graphs whose task runs until cancelled (every tenth finishes at once, job 5
fails: :func:`task_of`); with 2 slots per TaskManager, 40 slots serve the 50 jobs, so some wait
for a slot (SCHEDULED). Job 2
and its vertex are named with markup (:data:`HOSTILE_NAME`), for the dashboard's escaping.

Used by tests/runtime/dispatcher/test_dashboard_at_scale.py and bench/dashboard_pages.py;
:func:`page_requests` lists the REST requests each dashboard page makes (as the page's
JavaScript makes them: see millrace/runtime/dispatcher/web/).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from millrace.config import Configuration
from millrace.rpc import LocalRpcService
from millrace.runtime.checkpoint.savepoint_targets import SavepointTargets
from millrace.runtime.checkpoint.task_state_snapshot import TaskStateSnapshot
from millrace.runtime.control_messages import control_message_codec
from millrace.runtime.dispatcher.dispatcher import Dispatcher
from millrace.runtime.dispatcher.dispatcher_gateway import DispatcherGateway
from millrace.runtime.dispatcher.rest_endpoint import DispatcherRestEndpoint, create_rest_app
from millrace.runtime.io_executor import create_io_executor, shutdown_io_executor
from millrace.runtime.jobgraph import JobGraph, JobVertex
from millrace.runtime.resourcemanager.resource_manager import ResourceManager
from millrace.runtime.resourcemanager.resource_manager_gateway import ResourceManagerGateway
from millrace.runtime.taskexecutor.task_environment import AbstractInvokable
from millrace.runtime.taskexecutor.task_executor import TaskExecutor
from millrace.testing import TestingTaskRuntime
from millrace.types import ResourceId
from tests.waiting import wait_until

TOKEN = "d" * 64
WAIT = 30.0
HERE = __name__
HOSTILE_NAME = '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>'
"""The name of job 2: a page that made markup of job names would run it."""


class RunsUntilCancelled(AbstractInvokable):
    """Counts one record, then acknowledges every checkpoint (an empty snapshot) until
    cancelled, so savepoints of the job complete."""

    def invoke(self) -> None:
        env = self.environment
        env.metrics.records_in += 1
        while not env.cancelled:
            for checkpoint_id, _ in env.take_checkpoint_triggers():
                env.checkpoint_responder.acknowledge_checkpoint(checkpoint_id, TaskStateSnapshot())
            time.sleep(0.05)
        env.check_cancelled()


class Succeeds(AbstractInvokable):
    def invoke(self) -> None:
        self.environment.metrics.records_in += 1


class Fails(AbstractInvokable):
    def invoke(self) -> None:
        raise RuntimeError(f"this job fails at once: {HOSTILE_NAME}")


def task_of(i: int) -> str:
    """The invokable of job ``i``: every tenth finishes, job 5 fails, the others run."""
    if i % 10 == 0:
        return "Succeeds"
    return "Fails" if i == 5 else "RunsUntilCancelled"


@dataclass
class ScaledCluster:
    """``jobs`` jobs on ``taskmanagers`` simulated TaskManagers; a context manager.

    Args:
        work: A scratch directory (``io.tmp.dirs``).
        jobs: Jobs to submit.
        taskmanagers: TaskExecutors to register.
        slots: Slots of each.
    """

    work: Path
    jobs: int = 50
    taskmanagers: int = 20
    slots: int = 2
    job_ids: list[str] = field(default_factory=list)

    def __enter__(self) -> ScaledCluster:
        conf = Configuration(
            {
                "io.tmp.dirs": str(self.work),
                "slot.request.timeout": "10 min",
                "restart-strategy.type": "none",
                "taskmanager.numberOfTaskSlots": self.slots,
            }
        )
        self._service = LocalRpcService("dashboard-scale", configuration=conf)
        self._io = create_io_executor()
        resource_manager = ResourceManager(self._service, configuration=conf)
        resource_manager.start()
        dispatcher = Dispatcher(self._service, conf, resource_manager.address, self._io)
        dispatcher.start()
        app = create_rest_app(
            dispatcher.get_self_gateway(DispatcherGateway),
            resource_manager.get_self_gateway(ResourceManagerGateway),
            control_message_codec(),
            TOKEN,
            max_body_bytes=1024 * 1024,
            timeout=WAIT,
            savepoint_targets=SavepointTargets.from_configuration(conf),
        )
        self.app = app
        self._rest = DispatcherRestEndpoint(app, "127.0.0.1", 0).start()
        self.url = self._rest.url
        self.client = httpx.Client(base_url=self.url, timeout=WAIT)
        runtime = TestingTaskRuntime()
        for i in range(self.taskmanagers):
            executor = TaskExecutor(
                self._service,
                conf,
                resource_manager.address,
                runtime,
                ResourceId(f"tm-{i:02d}"),
            )
            executor.start()
            _start_metric_query_service(self._service, executor)
        wait_until(
            lambda: self.get("/overview")["taskmanagers"] == self.taskmanagers,
            what=f"{self.taskmanagers} TaskManagers registered",
            timeout=WAIT,
        )
        codec = control_message_codec()
        for i in range(self.jobs):
            task = task_of(i)
            graph = JobGraph(
                HOSTILE_NAME if i == 2 else f"job-{i:02d}",
                [
                    JobVertex(
                        HOSTILE_NAME if i == 2 else f"Source: numbers {i}",
                        1,
                        f"{HERE}:{task}",
                        is_source=True,
                    )
                ],
                [],
            )
            answer = self.client.post(
                "/jobs",
                content=codec.encode(graph),
                headers={"Authorization": f"Bearer {TOKEN}"},
            )
            assert answer.status_code == 202, answer.text
            self.job_ids.append(graph.job_id)
        running = sum(task_of(i) == "RunsUntilCancelled" for i in range(self.jobs))
        busy = min(self.taskmanagers * self.slots, running)
        wait_until(
            lambda: (
                self.get("/overview")["slots-available"] == self.taskmanagers * self.slots - busy
            ),
            what=f"{busy} slots taken",
            timeout=WAIT,
        )
        return self

    def get(self, path: str) -> Any:
        answer = self.client.get(path)
        answer.raise_for_status()
        return answer.json()

    def __exit__(self, *exc: object) -> None:
        self.client.close()
        self._rest.close()
        self._service.close_async().exception(timeout=WAIT)
        shutdown_io_executor(self._io, WAIT)


def _start_metric_query_service(service: LocalRpcService, executor: TaskExecutor) -> None:
    """Serve the TaskExecutor's metrics as a TaskManager process does (TaskManagerRunner), so
    the REST metric paths (back pressure) reach every simulated TaskManager: the ResourceManager
    asks each one's MetricQueryService. A no-op where the metrics of issue 14 are not merged."""
    try:
        from millrace.runtime.metrics.metric_query_service import (  # type: ignore[import-not-found]
            MetricQueryService,
        )
    except ImportError:
        return
    snapshots = executor.metric_group.snapshots  # type: ignore[attr-defined]
    MetricQueryService(service, executor.resource_id, snapshots).start()


def page_requests(cluster: ScaledCluster, *, as_served: bool = False) -> dict[str, list[str]]:
    """The GET requests each dashboard page makes on one refresh, at the cluster's size.

    The job pages are those of a running job (its first vertex), the TaskManager page that of
    the first TaskManager.

    Args:
        cluster: The cluster.
        as_served: False: the contract's paths (``/jobs/overview`` for the job list,
            ``/taskmanagers/<id>`` for a TaskManager). True: what the page requests on this
            cluster: where ``/jobs/overview`` answers 404 it reads ``/jobs`` and ``/jobs/<id>``
            of every job, where ``/taskmanagers/<id>`` does, ``/taskmanagers``.
    """
    job = cluster.job_ids[1]  # job 0 finishes at once; job 1 runs
    details = cluster.get(f"/jobs/{job}")
    vertex = details["vertices"][0].get("id", details["vertices"][0]["name"])
    tm = cluster.get("/taskmanagers")["taskmanagers"][0]["id"]
    j, v = f"/jobs/{job}", f"/jobs/{job}/vertices/{vertex}"
    job_list, tm_page = ["/jobs/overview"], [f"/taskmanagers/{tm}"]
    if as_served and cluster.client.get(job_list[0]).status_code == 404:
        job_list = ["/jobs/overview", "/jobs", *(f"/jobs/{i}" for i in cluster.job_ids)]
    if as_served and cluster.client.get(tm_page[0]).status_code == 404:
        tm_page = [*tm_page, "/taskmanagers"]
    return {
        "overview": ["/overview", *job_list],
        "jobs": job_list,
        "job": [j, f"{j}/plan", f"{j}/watermarks", f"{v}/backpressure"],
        "job-vertex": [j, v, f"{v}/backpressure"],
        "job-checkpoints": [j, f"{j}/checkpoints", f"{j}/checkpoints/config"],
        "job-exceptions": [j, f"{j}/exceptions"],
        "job-config": [j, f"{j}/config", f"{j}/checkpoints/config"],
        "job-watermarks": [j, f"{j}/watermarks"],
        "taskmanagers": ["/taskmanagers"],
        "taskmanager": tm_page,
        "jobmanager": ["/jobmanager/config", "/jobmanager/logs"],
    }
