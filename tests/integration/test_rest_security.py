"""The REST API of a real JobManager process against hostile requests (issue 9, case 5).

The token is checked before any body is read, bodies are capped as they arrive, a token is any
bytes, savepoint status is its job's and behind the token, savepoint targets stay under the
savepoints directory (finished savepoint requests being forgotten is in
tests/runtime/test_rest_app.py, on a manual clock). No Spark: the job waits
for slots. Loopback only; the JobManager is stopped by its process group.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import httpx
import pytest

from millrace.rpc.tcp.transport_security import TransportSecurity
from millrace.runtime.control_messages import control_message_codec
from millrace.runtime.dispatcher.rest_endpoint import rest_token
from millrace.runtime.jobgraph import JobGraph, JobVertex, OperatorKind, SerializedOperator
from tests.integration.standalone_cluster import StandaloneCluster

pytestmark = pytest.mark.slow

WAIT = 30.0
SETTINGS = {
    "rpc.lookup-timeout": "1 s",
    "rpc.ask-timeout": "5 s",
    "rpc.framesize": "64 kb",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[StandaloneCluster]:
    started = StandaloneCluster(tmp_path_factory.mktemp("rest"), dict(SETTINGS))
    try:
        started.start_jobmanager()
        yield started
    finally:
        started.close()


@pytest.fixture(scope="module")
def auth(cluster) -> dict[str, str]:
    secret = TransportSecurity.from_configuration(cluster.configuration).secret
    return {"Authorization": f"Bearer {rest_token(secret)}"}


@pytest.fixture(scope="module")
def job_id(cluster, auth) -> str:
    """A job that waits for slots (there are no TaskManagers) for the module's life."""
    operator = SerializedOperator(OperatorKind.TRANSFORM, "opaque", b"x")
    graph = JobGraph("waits", [JobVertex("waits", 1, "nowhere:Task", (operator,), True)], [])
    submitted = httpx.post(
        f"http://127.0.0.1:{cluster.rest_port}/jobs",
        content=control_message_codec().encode(graph),
        headers={"Content-Type": "application/x-msgpack", **auth},
        timeout=WAIT,
    )
    assert submitted.status_code == 202, submitted.text
    return submitted.json()["jobid"]


def raw_request(cluster: StandaloneCluster, head: str) -> bytes:
    """Send only the request head (no body) and return the status line that comes back, or
    fail if none comes before the wait ends: the server would be waiting for the body."""
    with socket.create_connection(("127.0.0.1", cluster.rest_port), timeout=WAIT) as sock:
        sock.sendall(head.replace("\n", "\r\n").encode() + b"\r\n")
        try:
            answer = sock.recv(4096)
        except TimeoutError:
            message = f"no answer within {WAIT:g} s to a head without its body"
            raise AssertionError(message) from None
    return answer.split(b"\r\n", 1)[0]


def url(cluster: StandaloneCluster, path: str) -> str:
    return f"http://127.0.0.1:{cluster.rest_port}{path}"


def test_an_unauthenticated_write_is_refused_before_its_body_is_read(cluster) -> None:
    status = raw_request(
        cluster,
        "POST /jobs/0123/savepoints HTTP/1.1\nHost: x\nContent-Type: application/json\n"
        "Content-Length: 104857600\n",
    )
    assert status == b"HTTP/1.1 401 Unauthorized", status


def test_an_unauthenticated_malformed_body_gets_401_not_422(cluster) -> None:
    response = httpx.post(url(cluster, "/jobs/0123/savepoints"), content=b"{not json", timeout=WAIT)
    assert response.status_code == 401 and response.json()["errors"]


def test_an_oversized_job_is_refused_before_its_body_is_read(cluster, auth) -> None:
    status = raw_request(
        cluster,
        "POST /jobs HTTP/1.1\nHost: x\nContent-Type: application/x-msgpack\n"
        f"Authorization: {auth['Authorization']}\nContent-Length: 104857600\n",
    )
    assert status == b"HTTP/1.1 413 Request Entity Too Large", status


def test_a_chunked_body_is_cut_off_at_the_cap(cluster, auth) -> None:
    def chunks() -> Iterator[bytes]:
        for _ in range(200):  # 200 x 1 KB, more than rpc.framesize's 64 KB
            yield b"x" * 1024

    response = httpx.post(url(cluster, "/jobs"), content=chunks(), headers=auth, timeout=WAIT)
    assert response.status_code == 413, response.text


def test_a_non_ascii_bearer_token_is_a_wrong_token(cluster) -> None:
    for token in ("Bearer été".encode(), b"Bearer \xff\xfe", "Bëarer x".encode()):
        response = httpx.patch(
            url(cluster, "/jobs/0123?mode=cancel"), headers={"Authorization": token}, timeout=WAIT
        )
        assert response.status_code == 401, (token, response.status_code, response.text)


def test_savepoint_status_needs_the_token_and_its_own_job(cluster, auth, job_id) -> None:
    triggered = httpx.post(
        url(cluster, f"/jobs/{job_id}/savepoints"), json={}, headers=auth, timeout=WAIT
    )
    assert triggered.status_code == 202, triggered.text
    request_id = triggered.json()["request-id"]
    path = f"/jobs/{job_id}/savepoints/{request_id}"
    assert httpx.get(url(cluster, path), timeout=WAIT).status_code == 401
    other = f"/jobs/{'f' * 32}/savepoints/{request_id}"
    assert httpx.get(url(cluster, other), headers=auth, timeout=WAIT).status_code == 404
    assert httpx.get(url(cluster, path), headers=auth, timeout=WAIT).status_code == 200


@pytest.mark.parametrize("target", ["../../..", "/etc", "/tmp/../etc/millrace", "x/../../y"])
def test_a_savepoint_target_outside_the_savepoints_directory_is_refused(
    cluster, auth, job_id, target
) -> None:
    response = httpx.post(
        url(cluster, f"/jobs/{job_id}/savepoints"),
        json={"target-directory": target},
        headers=auth,
        timeout=WAIT,
    )
    assert response.status_code == 400, response.text
    assert "state.savepoints" in response.json()["errors"][0]
