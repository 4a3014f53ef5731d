"""A real JobManager process against bad peers and over REST.

Hostile or broken input at the RPC port (a wrong secret, a silent peer, malformed frames, an
oversized message) costs only that connection or call: the JobManager keeps serving everyone
else. REST: Flink's paths, OpenAPI, writes only with the token. No Spark is needed here: the
JobManager process never starts one, and the submitted job waits for slots until cancelled.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
import time
from collections.abc import Iterator
from typing import Protocol

import httpx
import pytest

from millrace.errors import FrameSizeError, RecipientUnreachableError
from millrace.rpc import RpcGateway
from millrace.rpc.tcp.transport_security import TransportSecurity
from millrace.runtime.control_messages import control_message_codec
from millrace.runtime.dispatcher.rest_endpoint import rest_token
from millrace.runtime.jobgraph import JobGraph, JobVertex, OperatorKind, SerializedOperator
from tests.integration.standalone_cluster import StandaloneCluster
from tests.rpc.raw_peer import RawPeer, frame

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


def raw_peer(cluster: StandaloneCluster) -> RawPeer:
    return RawPeer(cluster.rpc_port, timeout=WAIT)


def answer_challenge(peer: RawPeer, key: bytes) -> None:
    """The connector's answer to the JobManager's challenge, proven with ``key``."""
    hello = peer.read_raw_frame()
    proof = hmac.new(key, b"millrace-2 connector" + hello, hashlib.sha256).digest()
    peer.sock.sendall(frame(proof + b"n" * 32))


def test_wrong_secret_is_disconnected_learning_nothing(cluster) -> None:
    with raw_peer(cluster) as peer:
        answer_challenge(peer, b"a-guess-at-the-cluster-secret")
        assert peer.closed_by_peer() == b""
    still_serving(cluster)


def test_peer_that_connects_and_says_nothing_is_dropped(cluster) -> None:
    with raw_peer(cluster) as peer:
        peer.read_raw_frame()  # the challenge; then silence
        assert peer.closed_by_peer() == b""  # within WAIT, or the read times out
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
        with raw_peer(cluster) as peer:
            peer.handshake(secret(cluster))
            # A complete frame goes with a valid MAC: its payload is what is malformed.
            peer.sock.sendall(peer.sealed(garbage[4:]) if len(garbage) > 4 else garbage)
            peer.closed_by_peer()
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


class OtherVersionResourceManagerGateway(RpcGateway, Protocol):
    """The ResourceManager's gateway as a client of another version has it."""

    def heartbeat_from_task_manager(self, resource_id: str, memory: int, zone: str) -> None: ...


class StopperGateway(RpcGateway, Protocol):
    def close_async(self) -> None: ...


def test_bad_calls_from_a_peer_do_not_stop_the_jobmanager(cluster) -> None:
    from millrace.rpc.tcp.tcp_rpc_service import TcpRpcService

    jobmanager = next(p for p in cluster.processes if p.kind == "jobmanager")
    with cluster.remote() as client:
        service: TcpRpcService = client._rpc  # type: ignore[assignment]
        address = f"tcp://{cluster.jobmanager}/resourcemanager"
        other = service.connect(address, OtherVersionResourceManagerGateway).result(WAIT)
        for _ in range(3):
            other.heartbeat_from_task_manager("taskmanager-0-abcdef", 1, "z")  # an extra argument
        assert isinstance(client.dispatcher().list_jobs().result(WAIT), list)  # behind them
        # A fatal error would stop the process within a second (the old code: exit 1 in 0.3 s).
        for _ in range(20):
            assert jobmanager.process.poll() is None, jobmanager.output()[-2000:]
            time.sleep(0.1)
        with pytest.raises(TypeError, match="does not serve close_async"):
            service.connect(address, StopperGateway).result(WAIT)
    still_serving(cluster)
    assert "refused tell 'heartbeat_from_task_manager'" in jobmanager.output()
