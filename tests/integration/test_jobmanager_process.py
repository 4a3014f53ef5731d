"""A real JobManager process against bad peers and over REST.

Hostile or broken input at the RPC port (a wrong secret, a silent peer, malformed frames, an
oversized message) costs only that connection or call: the JobManager keeps serving everyone
else. REST: Flink's paths, OpenAPI, writes only with the token. No Spark is needed here: the
JobManager process never starts one, and the submitted job waits for slots until cancelled.
"""

from __future__ import annotations

import hashlib
import hmac
import socket
import struct
import time
from collections.abc import Iterator

import httpx
import pytest

from millrace.errors import FrameSizeError, RecipientUnreachableError
from millrace.rpc.tcp.transport_security import TransportSecurity
from millrace.runtime.control_messages import control_message_codec
from millrace.runtime.dispatcher.rest_endpoint import rest_token
from millrace.runtime.jobgraph import JobGraph, JobVertex, OperatorKind, SerializedOperator
from tests.integration.standalone_cluster import StandaloneCluster

pytestmark = pytest.mark.slow

WAIT = 30.0
SETTINGS = {"rpc.lookup-timeout": "1 s", "rpc.ask-timeout": "5 s", "rpc.framesize": "64 kb"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[StandaloneCluster]:
    started = StandaloneCluster(tmp_path_factory.mktemp("jobmanager"), dict(SETTINGS))
    try:
        started.start_jobmanager()
        yield started
    finally:
        started.close()


def secret(cluster: StandaloneCluster) -> bytes:
    return TransportSecurity.from_configuration(cluster.configuration).secret


def still_serving(cluster: StandaloneCluster) -> None:
    """The JobManager answers REST and RPC as before."""
    assert cluster.rest("/overview")["taskmanagers"] == 0
    with cluster.remote() as client:
        assert isinstance(client.dispatcher().list_jobs().result(WAIT), list)


def raw_connection(cluster: StandaloneCluster) -> socket.socket:
    return socket.create_connection(("127.0.0.1", cluster.rpc_port), timeout=WAIT)


def read_frame(sock: socket.socket) -> bytes:
    (length,) = struct.unpack(">I", recv_exactly(sock, 4))
    return recv_exactly(sock, length)


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed by the JobManager")
        data += chunk
    return data


def answer_challenge(sock: socket.socket, key: bytes) -> None:
    codec = control_message_codec()
    hello = codec.decode(read_frame(sock))
    proof = hmac.new(key, b"connector" + hello[1], hashlib.sha256).digest()
    payload = codec.encode([proof, b"n" * 32])
    sock.sendall(struct.pack(">I", len(payload)) + payload)


def closed_by_peer(sock: socket.socket) -> bytes:
    """Everything the peer sends until it closes."""
    sock.settimeout(WAIT)
    data = b""
    try:
        while chunk := sock.recv(4096):
            data += chunk
    except ConnectionResetError:
        pass
    return data


def test_wrong_secret_is_disconnected_learning_nothing(cluster) -> None:
    with raw_connection(cluster) as sock:
        answer_challenge(sock, b"a-guess-at-the-cluster-secret")
        assert closed_by_peer(sock) == b""
    still_serving(cluster)


def test_peer_that_connects_and_says_nothing_is_dropped(cluster) -> None:
    with raw_connection(cluster) as sock:
        read_frame(sock)  # the challenge; then silence
        started = time.monotonic()
        closed_by_peer(sock)
        assert time.monotonic() - started < WAIT
    still_serving(cluster)


@pytest.mark.parametrize(
    "garbage",
    [
        struct.pack(">I", 3) + b"\xc1\xc1\xc1",  # not msgpack
        struct.pack(">I", 10_000_000),  # announces more than rpc.framesize
        struct.pack(">I", 2) + b"\x92\x07",  # msgpack, not a wire message
        struct.pack(">I", 4) + b"\x94\x00\x01\x01",  # a CALL missing its fields
    ],
)
def test_malformed_frame_closes_only_that_connection(cluster, garbage: bytes) -> None:
    with cluster.remote() as client:
        dispatcher = client.dispatcher()  # an honest client, connected before
        with raw_connection(cluster) as sock:
            answer_challenge(sock, secret(cluster))
            read_frame(sock)  # the JobManager's proof
            sock.sendall(garbage)
            closed_by_peer(sock)
        assert isinstance(dispatcher.list_jobs().result(WAIT), list)
    still_serving(cluster)
    log = next(p for p in cluster.processes if p.kind == "jobmanager").output()
    assert "closing connection with 127.0.0.1" in log and "malformed frame" in log


def waiting_job(payload_bytes: int = 16) -> JobGraph:
    """A job of one source vertex; with no TaskManager it waits for its slot."""
    operator = SerializedOperator(OperatorKind.TRANSFORM, "opaque", b"x" * payload_bytes)
    return JobGraph("waits", [JobVertex("waits", 1, "nowhere:Task", (operator,), True)], [])


def test_oversized_message_fails_that_call_naming_size_and_limit(cluster) -> None:
    with cluster.remote() as client:
        dispatcher = client.dispatcher()
        with pytest.raises(FrameSizeError) as info:
            dispatcher.submit_job(waiting_job(payload_bytes=100_000)).result(WAIT)
        assert info.value.limit_bytes == 64 * 1024 and info.value.size_bytes > 100_000
        assert "rpc.framesize=65536" in str(info.value)
        assert isinstance(dispatcher.list_jobs().result(WAIT), list)  # same connection works


def test_client_without_the_secret_cannot_reach_the_dispatcher(cluster) -> None:
    from millrace.cli.remote_cluster import RemoteCluster
    from millrace.config import Configuration

    stranger = Configuration({**SETTINGS, "security.cluster-secret": "0123456789abcdef-guess"})
    with (
        RemoteCluster(stranger, cluster.jobmanager) as client,
        pytest.raises(RecipientUnreachableError),
    ):
        client.dispatcher()


def test_rest_serves_flinks_paths_and_openapi(cluster) -> None:
    base = f"http://127.0.0.1:{cluster.rest_port}"
    overview = httpx.get(f"{base}/overview").json()
    assert {"taskmanagers", "slots-total", "slots-available", "jobs-running"} <= set(overview)
    assert httpx.get(f"{base}/taskmanagers").json() == {"taskmanagers": []}
    paths = httpx.get(f"{base}/openapi.json").json()["paths"]
    assert {"/overview", "/jobs", "/jobs/{jobid}", "/taskmanagers"} <= set(paths)
    assert {"get", "post"} <= set(paths["/jobs"]) and "patch" in paths["/jobs/{jobid}"]
    missing = httpx.get(f"{base}/jobs/0123456789abcdef")
    assert missing.status_code == 404 and missing.json()["errors"]


def test_rest_submits_and_cancels_only_with_the_token(cluster) -> None:
    base = f"http://127.0.0.1:{cluster.rest_port}"
    body = control_message_codec().encode(waiting_job())
    headers = {"Content-Type": "application/x-msgpack"}
    refused = httpx.post(f"{base}/jobs", content=body, headers=headers)
    assert refused.status_code == 401 and refused.json()["errors"]
    auth = {"Authorization": f"Bearer {rest_token(secret(cluster))}"}
    garbage = httpx.post(f"{base}/jobs", content=b"\xc1", headers={**headers, **auth})
    assert garbage.status_code == 400

    accepted = httpx.post(f"{base}/jobs", content=body, headers={**headers, **auth})
    assert accepted.status_code == 202, accepted.text
    job_id = accepted.json()["jobid"]
    assert {"id": job_id, "status": "RUNNING"} in httpx.get(f"{base}/jobs").json()["jobs"]
    assert httpx.patch(f"{base}/jobs/{job_id}?mode=cancel").status_code == 401
    cancel = httpx.patch(f"{base}/jobs/{job_id}?mode=cancel", headers=auth)
    assert cancel.status_code == 202

    def status() -> str:
        return httpx.get(f"{base}/jobs/{job_id}").json()["state"]

    cluster.wait_until(lambda: status() == "CANCELED", timeout=WAIT, what="the job CANCELED")
    with cluster.remote() as client:
        details = client.dispatcher().request_job_details(job_id).result(WAIT)
    assert details.status.name == "CANCELED"
