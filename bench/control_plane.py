"""The control plane under load: heartbeats of many TaskManagers, and task state updates.

Part 1, DeathWatch at scale (BRIEF section 5: 200 TaskManagers heartbeating on one JobManager
without false detection). A real JobManager process (``millrace cluster start --foreground``,
TCP on 127.0.0.1, its default heartbeat settings unless given) and, in this process, N simulated
TaskManagers: real TaskExecutorGateway endpoints on one TcpRpcService that register at the
ResourceManager, answer every heartbeat request at once, and register again if the
ResourceManager falls silent (as a real TaskExecutor does). Optionally both CPUs are kept busy by
two spinning processes. For the whole duration, the JobManager's view is sampled every second
over REST (``/taskmanagers``); a false detection is a heartbeat timeout in the JobManager's log
or a TaskManager missing from its list. Printed: the timeouts, the least TaskManagers seen, the
re-registrations, and the heartbeats answered per second.

Part 2, task state updates (BRIEF section 5: a JobMaster handling 50,000 task state updates per
second). A real JobMaster on the in-process transport runs a job of P source subtasks deployed
into testing TaskExecutor endpoints; U UpdateTaskExecutionState asks (RUNNING, with counters:
what every running task sends each second) are sent to it through its gateway, all in flight at
once, and the rate is measured until the last reply. The floor is the same U updates applied to
its Scheduler directly on its main thread, no RPC. Printed: both rates (median of the rounds)
and their ratio.

Loopback only; every process started is stopped by its PID.

Usage: ``.venv/bin/python bench/control_plane.py [--taskmanagers 200] [--duration 600]
[--busy] [--updates 100000] [--rounds 3]``
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import Executor, Future
from pathlib import Path
from typing import Any

import httpx

from millrace.config import Configuration
from millrace.rpc import LocalRpcService, RpcEndpoint
from millrace.rpc.tcp.tcp_rpc_service import TcpRpcService
from millrace.rpc.tcp.transport_security import TransportSecurity
from millrace.runtime.control_messages import control_message_codec
from millrace.runtime.deployment import (
    Acknowledge,
    SlotOffer,
    TaskDeploymentDescriptor,
    TaskExecutionState,
    TaskOperationResult,
)
from millrace.runtime.executiongraph import ExecutionState, IOMetrics
from millrace.runtime.io.partition_events import PartitionEvents
from millrace.runtime.jobgraph import JobGraph, JobVertex
from millrace.runtime.jobmaster.job_master import JobMaster
from millrace.runtime.jobmaster.job_master_gateway import JobMasterGateway
from millrace.runtime.registration import (
    AcknowledgeRegistration,
    AlreadyRegistered,
    RegisterTaskManager,
)
from millrace.runtime.resourcemanager.resource_manager_gateway import ResourceManagerGateway
from millrace.runtime.taskexecutor.task_executor_gateway import TaskExecutorGateway
from millrace.testing import (
    TestingEndpoint,
    TestingResourceManagerGateway,
    TestingTaskExecutorGateway,
)
from millrace.types import (
    Address,
    AllocationId,
    ExecutionAttemptId,
    JobId,
    JobMasterId,
    ResourceId,
    ResultPartitionId,
)

ROOT = Path(__file__).resolve().parents[1]
TARGET_UPDATES_PER_S = 50_000  # BRIEF section 5


# Part 1 ----------------------------------------------------------------------------------------


class SimulatedTaskExecutor(RpcEndpoint, implements=(TaskExecutorGateway,)):
    """A TaskManager that only registers and answers heartbeats (no slots are ever used)."""

    def __init__(self, service: TcpRpcService, resource_id: str, rm_address: str) -> None:
        super().__init__(service, resource_id)
        self.resource_id = ResourceId(resource_id)
        self._rm_address = rm_address
        self._rm: ResourceManagerGateway | None = None
        self._last_rm_heartbeat = 0.0
        self.registrations = 0
        self.heartbeats = 0

    def on_start(self) -> None:
        self._register()
        self.schedule_run_async(self._check_resource_manager, 1.0)

    def _register(self) -> None:
        connecting = self.rpc_service.connect(self._rm_address, ResourceManagerGateway)

        def connected(f: Future[ResourceManagerGateway]) -> None:
            if f.exception() is not None:
                self.schedule_run_async(self._register, 0.5)
                return
            self._rm = f.result()
            message = RegisterTaskManager(self.resource_id, Address(self.address), 2)
            self.on_main_thread(self._rm.register_task_executor(message), registered)

        def registered(f: Future[Any]) -> None:
            ok = f.exception() is None and isinstance(
                f.result(), AcknowledgeRegistration | AlreadyRegistered
            )
            if not ok:
                self.schedule_run_async(self._register, 0.5)
                return
            self.registrations += 1
            self._last_rm_heartbeat = time.monotonic()

        self.on_main_thread(connecting, connected)

    def _check_resource_manager(self) -> None:
        if self.registrations and time.monotonic() - self._last_rm_heartbeat > 12.0:
            self._register()  # pause (10 s) + interval (1 s) of silence, as a TaskExecutor
        self.schedule_run_async(self._check_resource_manager, 1.0)

    def heartbeat_from_resource_manager(self, resource_manager_id: str) -> None:
        self._last_rm_heartbeat = time.monotonic()
        self.heartbeats += 1
        if self._rm is not None:
            self._rm.heartbeat_from_task_manager(self.resource_id)

    # the rest of the gateway: never used by this benchmark
    def request_slot(
        self,
        slot_index: int,
        job_id: JobId,
        allocation_id: AllocationId,
        job_master_address: str,
        job_master_id: JobMasterId,
        timeout: float | None = None,
    ) -> Acknowledge:
        return Acknowledge()

    def submit_task(
        self, tdd: TaskDeploymentDescriptor, timeout: float | None = None
    ) -> TaskOperationResult:
        return TaskOperationResult(tdd.attempt_id, False, "a simulated TaskManager")

    def cancel_task(
        self, attempt_id: ExecutionAttemptId, timeout: float | None = None
    ) -> TaskOperationResult:
        return TaskOperationResult(attempt_id, False, "a simulated TaskManager")

    def trigger_checkpoint(
        self,
        attempt_id: ExecutionAttemptId,
        checkpoint_id: int,
        timestamp_ms: int,
        timeout: float | None = None,
    ) -> TaskOperationResult:
        return TaskOperationResult(attempt_id, False, "a simulated TaskManager")

    def free_slot(self, allocation_id: AllocationId, cause: str) -> None:
        pass

    def release_partitions(self, job_id: JobId) -> None:
        pass

    def heartbeat_from_job_manager(self, job_id: JobId) -> None:
        pass

    def disconnect_job_manager(self, job_id: JobId, cause: str) -> None:
        pass

    def request_partition_events(
        self,
        partition_id: ResultPartitionId,
        subpartition: int,
        from_index: int,
        timeout: float | None = None,
    ) -> PartitionEvents:
        return PartitionEvents(from_index, ())


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(30)


def deathwatch(taskmanagers: int, duration: float, busy: bool, settings: list[str]) -> None:
    work = Path(tempfile.mkdtemp(prefix="millrace-control-plane-"))
    rpc_port, rest_port = _free_port(), _free_port()
    conf = {
        "io.tmp.dirs": str(work / "tmp"),
        "jobmanager.rpc.port": str(rpc_port),
        "rest.port": str(rest_port),
        **dict(s.split("=", 1) for s in settings),
    }
    args = [str(ROOT / ".venv" / "bin" / "millrace"), "cluster", "start", "--foreground"]
    for key, value in conf.items():
        args += ["-D", f"{key}={value}"]
    log = work / "jobmanager.log"
    with open(log, "wb") as out:
        jobmanager = subprocess.Popen(
            args, stdout=out, stderr=out, stdin=subprocess.DEVNULL, start_new_session=True
        )
    spinners: list[subprocess.Popen[bytes]] = []
    service: TcpRpcService | None = None
    try:
        rest = f"http://127.0.0.1:{rest_port}"
        deadline = time.monotonic() + 120
        while True:
            try:
                httpx.get(f"{rest}/overview", timeout=2)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline, f"no JobManager: {log.read_text()[-2000:]}"
                assert jobmanager.poll() is None, f"JobManager exited: {log.read_text()[-2000:]}"
                time.sleep(0.2)
        configuration = Configuration(conf)
        service = TcpRpcService(
            "simulated",
            security=TransportSecurity.from_configuration(configuration),
            codec=control_message_codec(),
            configuration=configuration,
        )
        rm_address = f"tcp://127.0.0.1:{rpc_port}/resourcemanager"
        sims = [
            SimulatedTaskExecutor(service, f"sim-{i:03d}", rm_address) for i in range(taskmanagers)
        ]
        for sim in sims:
            sim.start()
        deadline = time.monotonic() + 300
        while len(httpx.get(f"{rest}/taskmanagers", timeout=10).json()["taskmanagers"]) < len(sims):
            assert time.monotonic() < deadline, "the simulated TaskManagers did not register"
            time.sleep(0.5)
        if busy:
            spin = "while True: pass"
            spinners = [
                subprocess.Popen([sys.executable, "-c", spin], start_new_session=True)
                for _ in range(os.cpu_count() or 2)
            ]
        print(
            f"deathwatch: {len(sims)} TaskManagers registered; {duration:.0f} s "
            f"{'with every CPU busy' if busy else 'on an idle machine'}",
            flush=True,
        )
        fewest = len(sims)
        beats_before = sum(s.heartbeats for s in sims)
        started = time.monotonic()
        while time.monotonic() - started < duration:
            time.sleep(1.0)
            try:
                listed = len(httpx.get(f"{rest}/taskmanagers", timeout=10).json()["taskmanagers"])
            except httpx.HTTPError:
                continue  # a REST hiccup under load is not a detection
            fewest = min(fewest, listed)
        elapsed = time.monotonic() - started
        beats = sum(s.heartbeats for s in sims) - beats_before
        timeouts = len(re.findall(r"heartbeat of sim-\d+ timed out", log.read_text()))
        again = sum(max(0, s.registrations - 1) for s in sims)
        print(
            f"deathwatch: false detections {timeouts} (heartbeat timeouts in the JobManager's "
            f"log), fewest TaskManagers listed {fewest} of {len(sims)}, re-registrations "
            f"{again}; heartbeats answered {beats / elapsed:,.0f}/s",
            flush=True,
        )
    finally:
        for spinner in spinners:
            _stop(spinner)
        if service is not None:
            service.close_async().exception(timeout=30)
        _stop(jobmanager)


# Part 2 ----------------------------------------------------------------------------------------


class InlineExecutor(Executor):
    def submit(self, fn, /, *args, **kwargs):  # type: ignore[no-untyped-def]
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as error:
            future.set_exception(error)
        return future


def _deployed_job_master(
    parallelism: int, work: Path
) -> tuple[LocalRpcService, JobMaster, list[TaskDeploymentDescriptor]]:
    """A JobMaster whose P source subtasks are deployed and RUNNING on testing endpoints."""
    service = LocalRpcService("bench")
    rm = TestingResourceManagerGateway()
    te = TestingTaskExecutorGateway()
    requested: list[AllocationId] = []
    rm.request_slot_fn = lambda _address, _id, _job, allocation: requested.append(allocation)
    TestingEndpoint(service, "resourcemanager", rm).start()
    te_endpoint = TestingEndpoint(service, "tm", te)
    te_endpoint.start()
    graph = JobGraph("bench", [JobVertex("source", parallelism, "m:S", (), True, "src")], [])
    conf = Configuration({"io.tmp.dirs": str(work), "heartbeat.interval": "60 s"})
    job_master = JobMaster(
        service, graph, conf, service.address_of("resourcemanager"), InlineExecutor()
    )
    job_master.start()
    gateway = job_master.get_self_gateway(JobMasterGateway)
    deadline = time.monotonic() + 60
    while len(requested) < parallelism:
        assert time.monotonic() < deadline, "the JobMaster asked for no slots"
        time.sleep(0.01)
    offers = [SlotOffer(allocation, i) for i, allocation in enumerate(requested)]
    gateway.offer_slots(ResourceId("tm"), te_endpoint.address, offers).result(60)
    while len(te.called("submit_task")) < parallelism:
        assert time.monotonic() < deadline, "the JobMaster deployed nothing"
        time.sleep(0.01)
    tdds = [args[0] for args in te.called("submit_task")]
    for tdd in tdds:
        gateway.update_task_execution_state(
            TaskExecutionState(tdd.job_id, tdd.attempt_id, ExecutionState.RUNNING)
        ).result(60)
    return service, job_master, tdds


def _updates(tdds: list[TaskDeploymentDescriptor], count: int) -> list[TaskExecutionState]:
    return [
        TaskExecutionState(
            tdds[i % len(tdds)].job_id,
            tdds[i % len(tdds)].attempt_id,
            ExecutionState.RUNNING,
            IOMetrics(records_in=i, records_out=i // 2, bundles=i // 100),
        )
        for i in range(count)
    ]


def state_updates(parallelism: int, count: int, rounds: int) -> None:
    work = Path(tempfile.mkdtemp(prefix="millrace-updates-"))
    service, job_master, tdds = _deployed_job_master(parallelism, work)
    try:
        gateway = job_master.get_self_gateway(JobMasterGateway)
        updates = _updates(tdds, count)
        rpc_rates, floor_rates = [], []
        for _ in range(rounds):
            started = time.perf_counter()
            replies = [gateway.update_task_execution_state(u) for u in updates]
            for reply in replies:
                reply.result(120)
            rpc_rates.append(count / (time.perf_counter() - started))

            def direct() -> float:
                scheduler = job_master.scheduler
                begun = time.perf_counter()
                for update in updates:
                    scheduler.update_task_execution_state(update)
                return time.perf_counter() - begun

            floor_rates.append(count / job_master.call_async(direct).result(120))
        rpc, floor = statistics.median(rpc_rates), statistics.median(floor_rates)
        verdict = "met" if rpc >= TARGET_UPDATES_PER_S else "NOT met"
        print(
            f"task state updates: {rpc:,.0f}/s through the JobMaster's gateway "
            f"(in-process transport, {count:,} asks in flight, {parallelism} subtasks) against "
            f"{floor:,.0f}/s applied directly to its Scheduler (no RPC): ratio "
            f"{rpc / floor:.2f}; target {TARGET_UPDATES_PER_S:,}/s {verdict} "
            f"(median of {rounds} rounds)",
            flush=True,
        )
    finally:
        service.close_async().exception(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--taskmanagers", type=int, default=200)
    parser.add_argument("--duration", type=float, default=600.0, help="seconds of part 1")
    parser.add_argument("--busy", action="store_true", help="keep every CPU busy in part 1")
    parser.add_argument(
        "-D", dest="settings", action="append", default=[], help="JobManager key=value"
    )
    parser.add_argument("--updates", type=int, default=100_000)
    parser.add_argument("--parallelism", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--skip-deathwatch", action="store_true")
    args = parser.parse_args()
    state_updates(args.parallelism, args.updates, args.rounds)
    if not args.skip_deathwatch:
        deathwatch(args.taskmanagers, args.duration, args.busy, args.settings)


if __name__ == "__main__":
    main()
