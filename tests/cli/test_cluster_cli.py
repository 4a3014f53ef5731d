"""The standalone cluster as an operator drives it: cluster start, run --jobmanager (waiting and
detached), list, cancel, cluster stop — real processes on loopback, nothing left behind."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import time
from pathlib import Path

import httpx
import pytest

from tests.integration.helpers import (
    ROOT,
    assert_same_result,
    expected_flight_delays,
    read_flights,
    read_output,
    run_cli,
)
from tests.integration.standalone_cluster import free_port

pytestmark = [pytest.mark.slow, pytest.mark.spark]

EXAMPLE = str(ROOT / "examples" / "flight_delays.py")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"


def test_cluster_start_run_list_cancel_stop(flights_dir, tmp_path) -> None:
    rest_port = free_port()
    settings = [
        "-D",
        f"io.tmp.dirs={tmp_path / 'tmp'}",
        "-D",
        f"jobmanager.rpc.port={free_port()}",
        "-D",
        f"rest.port={rest_port}",
        "-D",
        "spark.driver.memory=1g",
        "-D",
        "slot.request.timeout=5 min",
        "-D",
        "metrics.reporter.prom.port=0",  # no test fights for 9249
    ]
    pids: list[int] = []
    try:
        started = run_cli(["cluster", "start", "--taskmanagers", "2", *settings], tmp_path, 120)
        assert started.returncode == 0, started.stdout + started.stderr
        pids = [int(p) for p in re.findall(r"\(pid (\d+)\)", started.stdout)]
        assert len(pids) == 3
        address = re.search(r"at (127\.0\.0\.1:\d+), REST", started.stdout).group(1)
        secret = tmp_path / "tmp" / "cluster" / "secret"
        assert oct(secret.stat().st_mode & 0o777) == "0o600"
        deadline = time.monotonic() + 60
        while httpx.get(f"http://127.0.0.1:{rest_port}/overview").json()["taskmanagers"] < 2:
            assert time.monotonic() < deadline, "TaskManagers did not register"
            time.sleep(0.2)

        out = tmp_path / "out"
        ran = run_cli(
            ["run", EXAMPLE, str(flights_dir), str(out), "--jobmanager", address, *settings],
            tmp_path,
        )
        assert ran.returncode == 0, ran.stdout + ran.stderr
        expected = expected_flight_delays(read_flights(flights_dir))
        assert_same_result(read_output(out), expected)  # the oracle: pandas on the same files
        assert f"rows written: {len(expected):,}" in ran.stdout
        assert len(expected) == 5_430  # a second check

        # more subtasks than the cluster's 4 slots: the job waits until cancelled
        detached = run_cli(
            [
                "run",
                EXAMPLE,
                str(flights_dir),
                str(tmp_path / "out2"),
                "--jobmanager",
                address,
                "--detached",
                *settings,
                "-D",
                "parallelism.default=8",
            ],
            tmp_path,
        )
        assert detached.returncode == 0, detached.stdout + detached.stderr
        job_id = re.search(r"Job ([0-9a-f]{32}) \(flight-delays\) submitted", detached.stdout)[1]
        listed = run_cli(["list", "--jobmanager", address, *settings], tmp_path, 60)
        assert job_id in listed.stdout and "RUNNING" in listed.stdout
        assert "FINISHED" in listed.stdout  # the first job
        cancelled = run_cli(
            ["cancel", job_id[:8], "--jobmanager", address, *settings], tmp_path, 60
        )
        assert cancelled.returncode == 0 and f"cancelled job {job_id}" in cancelled.stdout
        jobs = httpx.get(f"http://127.0.0.1:{rest_port}/jobs").json()["jobs"]
        deadline = time.monotonic() + 30
        while {"id": job_id, "status": "CANCELED"} not in jobs:
            assert time.monotonic() < deadline, jobs
            time.sleep(0.2)
            jobs = httpx.get(f"http://127.0.0.1:{rest_port}/jobs").json()["jobs"]

        stopped = run_cli(["cluster", "stop", *settings], tmp_path, 120)
        assert stopped.returncode == 0, stopped.stdout
        assert stopped.stdout.count("exited") == 3, stopped.stdout
        deadline = time.monotonic() + 30
        while any(alive(pid) for pid in pids):  # and their Spark JVMs with them
            assert time.monotonic() < deadline, "a cluster process outlived cluster stop"
            time.sleep(0.2)
        assert not list((tmp_path / "tmp" / "cluster").glob("*.json"))
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)


def test_second_cluster_start_refuses_while_one_runs(tmp_path) -> None:
    settings = [
        "-D",
        f"io.tmp.dirs={tmp_path / 'tmp'}",
        "-D",
        f"jobmanager.rpc.port={free_port()}",
        "-D",
        f"rest.port={free_port()}",
    ]
    first = run_cli(["cluster", "start", "--taskmanagers", "0", *settings], tmp_path, 60)
    try:
        assert first.returncode == 0, first.stdout + first.stderr
        second = run_cli(["cluster", "start", "--taskmanagers", "0", *settings], tmp_path, 60)
        assert second.returncode == 1 and "already runs" in second.stdout
    finally:
        stopped = run_cli(["cluster", "stop", *settings], tmp_path, 60)
        assert "stopped jobmanager" in stopped.stdout
    files = list((tmp_path / "tmp" / "cluster").glob("*.json"))
    assert not files, [json.loads(f.read_text()) for f in files]
