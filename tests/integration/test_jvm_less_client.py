"""The client of a standalone cluster starts no JVM (issue 15): ``millrace run --jobmanager``
against TaskManagers with a classic Spark (local here; ``spark.master`` the same) builds the
script's columns as Spark Connect expressions, which need no session, and each TaskManager
plans them in its own JVM (``millrace.spark.connect_planner``). The examples' outputs equal
their oracles row for row; no process under the client ran ``java``; the time from the client's
start until the JobManager listed its job is printed (docs/deployment.md)."""

from __future__ import annotations

from collections.abc import Iterator

import pandas as pd
import pytest

from tests.integration.helpers import (
    ROOT,
    assert_rows_equal,
    assert_same_result,
    expected_flight_delays,
    load_example,
    read_flights,
    read_output,
)
from tests.integration.standalone_cluster import StandaloneCluster, run_client, watch_client
from tests.integration.test_word_count_example import LICENSES, python_count
from tests.integration.window_expectations import expected_sessions

pytestmark = [pytest.mark.slow, pytest.mark.spark]

EXAMPLES = ROOT / "examples"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[StandaloneCluster]:
    """A JobManager and two TaskManagers (2 slots each), each with its own local Spark."""
    with StandaloneCluster(tmp_path_factory.mktemp("jvm-less-client")).running() as started:
        yield started


def run_without_jvm(cluster: StandaloneCluster, script: str, *args: object) -> str:
    """Run ``examples/SCRIPT`` through ``millrace run --jobmanager``; check that it succeeded
    and started no JVM; returns its output."""
    known = {job["id"] for job in cluster.rest("/jobs")["jobs"]}
    client = run_client(cluster, EXAMPLES / script, *args)
    submitted, commands = watch_client(cluster, client, known)
    print(f"millrace run {script} without a JVM: job listed at the JobManager {submitted:.1f} s")
    assert client.process.returncode == 0, client.output()[-5000:]
    assert not [c for c in commands if "java" in c], "the client started a JVM"
    assert "no local Spark" in client.output()
    return client.output()


def test_flight_delays_equal_pandas(flights_dir, tmp_path, cluster) -> None:
    out = tmp_path / "out"
    output = run_without_jvm(cluster, "flight_delays.py", flights_dir, out)
    assert "flight-delays FINISHED" in output
    assert_same_result(read_output(out), expected_flight_delays(read_flights(flights_dir)))


def test_word_count_equals_python(tmp_path, cluster) -> None:
    """Columns of another kind: a regular-expression split, explode, lower."""
    out = tmp_path / "out"
    run_without_jvm(cluster, "word_count.py", LICENSES, out)
    counted = read_output(out, order=("word",))
    assert dict(zip(counted["word"], counted["n"], strict=True)) == python_count(LICENSES)


def test_session_windows_equal_pandas(flights_dir, tmp_path, cluster) -> None:
    """Session windows: the window operator's own columns built on the client too."""
    out = tmp_path / "out"
    run_without_jvm(cluster, "sessions.py", flights_dir, out)
    gap = pd.Timedelta(load_example("sessions").GAP)
    expected, key = expected_sessions(read_flights(flights_dir), gap), "tailnum"
    assert_rows_equal(
        read_output(out, order=(key, "window_start")), expected, [key, "window_start"]
    )
