"""The REST app in process, on a real Dispatcher and ResourceManager (LocalRpcService, no Spark):
savepoint requests forgotten after ``rest.async.store-duration`` on a manual clock, savepoint
targets confined, and schemathesis against ``/openapi.json`` (no 5xx; every write and savepoint
status read refused without the token)."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import schemathesis
import trustme
from fastapi import FastAPI
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import response_schema_conformance, status_code_conformance
from starlette.testclient import TestClient

from millrace.clock import ManualClock
from millrace.config import Configuration
from millrace.rpc import LocalRpcService
from millrace.runtime.checkpoint.savepoint_targets import SavepointTargets
from millrace.runtime.control_messages import control_message_codec
from millrace.runtime.dispatcher.dispatcher import Dispatcher
from millrace.runtime.dispatcher.dispatcher_gateway import DispatcherGateway
from millrace.runtime.dispatcher.rest_endpoint import DispatcherRestEndpoint, create_rest_app
from millrace.runtime.dispatcher.savepoint_requests import SavepointRequests
from millrace.runtime.io_executor import create_io_executor, shutdown_io_executor
from millrace.runtime.jobgraph import JobGraph, JobVertex, OperatorKind, SerializedOperator
from millrace.runtime.resourcemanager.resource_manager import ResourceManager
from millrace.runtime.resourcemanager.resource_manager_gateway import ResourceManagerGateway
from millrace.types import JobId
from tests.waiting import wait_value

WAIT = 10.0
TOKEN = "a" * 64
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@dataclass
class RestApp:
    client: TestClient
    clock: ManualClock
    savepoints_dir: Path
    app: FastAPI


@pytest.fixture
def rest(tmp_path) -> Iterator[RestApp]:
    conf = Configuration({"io.tmp.dirs": str(tmp_path), "slot.request.timeout": "10 min"})
    clock = ManualClock()
    service = LocalRpcService("rest-test", configuration=conf)
    io = create_io_executor()
    resource_manager = ResourceManager(service, configuration=conf)
    resource_manager.start()
    dispatcher = Dispatcher(service, conf, resource_manager.address, io)
    dispatcher.start()
    app = create_rest_app(
        dispatcher.get_self_gateway(DispatcherGateway),
        resource_manager.get_self_gateway(ResourceManagerGateway),
        control_message_codec(),
        TOKEN,
        max_body_bytes=64 * 1024,
        timeout=WAIT,
        savepoint_targets=SavepointTargets.from_configuration(conf),
        store_duration=300.0,
        clock=clock,
    )
    with TestClient(app, base_url="http://127.0.0.1") as client:
        yield RestApp(client, clock, tmp_path / "savepoints", app)
    service.close_async().exception(timeout=WAIT)
    shutdown_io_executor(io, WAIT)


def waiting_job(client: TestClient) -> str:
    operator = SerializedOperator(OperatorKind.TRANSFORM, "opaque", b"x")
    graph = JobGraph("waits", [JobVertex("waits", 1, "nowhere:Task", (operator,), True)], [])
    body = control_message_codec().encode(graph)
    submitted = client.post("/jobs", content=body, headers=AUTH)
    assert submitted.status_code == 202, submitted.text
    return str(submitted.json()["jobid"])


def test_finished_savepoint_requests_are_forgotten_after_the_store_duration(rest) -> None:
    job_id = waiting_job(rest.client)
    triggered = rest.client.post(f"/jobs/{job_id}/savepoints", json={}, headers=AUTH)
    assert triggered.status_code == 202, triggered.text
    path = f"/jobs/{job_id}/savepoints/{triggered.json()['request-id']}"
    status = wait_value(
        lambda: rest.client.get(path, headers=AUTH),
        lambda answer: answer.status_code != 200 or answer.json()["status"] != "IN_PROGRESS",
        what="the savepoint request to finish (it fails: the job has no running task)",
        timeout=WAIT,
    )
    assert status.status_code == 200 and status.json()["status"] == "COMPLETED", status.text
    rest.clock.advance(299.0)
    assert rest.client.get(path, headers=AUTH).status_code == 200
    rest.clock.advance(1.0)
    assert rest.client.get(path, headers=AUTH).status_code == 404


def test_the_api_serves_https_with_the_configured_certificate(rest, tmp_path) -> None:
    ca = trustme.CA()
    certificate = ca.issue_cert("127.0.0.1")
    chain, key, trusted = tmp_path / "rest.pem", tmp_path / "rest.key", tmp_path / "ca.pem"
    certificate.cert_chain_pems[0].write_to_path(str(chain))
    certificate.private_key_pem.write_to_path(str(key))
    ca.cert_pem.write_to_path(str(trusted))
    endpoint = DispatcherRestEndpoint(
        rest.app, "127.0.0.1", 0, ssl_certificate=str(chain), ssl_key=str(key)
    ).start()
    try:
        assert endpoint.url.startswith("https://127.0.0.1:")
        context = ssl.create_default_context(cafile=str(trusted))
        answer = httpx.get(f"{endpoint.url}/overview", verify=context, timeout=WAIT)
        assert answer.status_code == 200 and answer.json()["taskmanagers"] == 0
        with pytest.raises(httpx.HTTPError):  # nothing in the clear
            httpx.get(endpoint.url.replace("https", "http") + "/overview", timeout=WAIT)
    finally:
        endpoint.close()


def test_the_savepoint_table_is_bounded() -> None:
    clock = ManualClock()
    table = SavepointRequests(clock, store_duration=60.0, max_requests=3)
    running: list[Future[str]] = [Future() for _ in range(3)]
    ids = [table.add(JobId("j"), f) for f in running]
    assert None not in ids and table.add(JobId("j"), Future()) is None  # full of running ones
    running[0].set_result("/sp")
    assert table.add(JobId("j"), Future()) is None  # finished, but still within its duration
    clock.advance(60.0)
    assert table.add(JobId("j"), Future()) is not None and len(table) == 3


def test_a_full_savepoint_table_starts_nothing() -> None:
    """A savepoint, stop or rescale refused with 429 was never started."""
    table = SavepointRequests(ManualClock(), store_duration=60.0, max_requests=1)
    started: list[Future[str]] = []

    def starting() -> Future[str]:
        started.append(Future())
        return started[-1]

    assert table.start(JobId("j"), starting) is not None
    assert table.start(JobId("j"), starting) is None
    assert len(started) == 1


# Schemathesis ----------------------------------------------------------------------------------

# A submitted JobGraph is msgpack bytes: generated as a binary string, sent as is.
schemathesis.serializer.alias("application/x-msgpack", "application/octet-stream")

FUZZ = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
_OPEN = {"GET", "HEAD", "OPTIONS"}


def _needs_token(method: str, path: str) -> bool:
    return method.upper() not in _OPEN or path.startswith(
        ("/jobs/{jobid}/savepoints/", "/jobs/{jobid}/rescaling/")
    )


def fuzz_operation(operation, headers: dict[str, str], seen: list[str]) -> None:  # type: ignore[no-untyped-def]
    """Hypothesis over one operation's generated requests: no 5xx; every status and body as
    the OpenAPI document says; 401 for what needs the token when ``headers`` lack it."""
    label = f"{operation.method.upper()} {operation.path}"
    refused = not headers and _needs_token(operation.method, operation.path)

    @FUZZ
    @given(case=operation.as_strategy())
    def check(case) -> None:  # type: ignore[no-untyped-def]
        response = case.call(headers=headers)
        seen.append(label)
        assert response.status_code < 500, (label, response.status_code, response.text)
        case.validate_response(
            response, checks=[status_code_conformance, response_schema_conformance]
        )
        if refused:
            assert response.status_code == 401, (label, response.status_code, response.text)

    check()


@pytest.mark.parametrize("with_token", [False, True], ids=["no token", "token"])
def test_schemathesis_finds_no_server_error_and_no_write_without_token(rest, with_token) -> None:
    schema = schemathesis.openapi.from_asgi("/openapi.json", rest.client.app)
    waiting_job(rest.client)  # something for the paths that name a job
    seen: list[str] = []
    for result in schema.get_all_operations():
        fuzz_operation(result.ok(), AUTH if with_token else {}, seen)
    writes = {label for label in seen if label.split()[0] not in _OPEN}
    assert {
        "POST /jobs",
        "PATCH /jobs/{jobid}",
        "POST /jobs/{jobid}/savepoints",
        "PATCH /jobs/{jobid}/rescaling",
    } <= writes
    assert len(seen) > 200, len(seen)


def test_https_without_its_files_fails_at_start_naming_the_key(tmp_path) -> None:
    from millrace.errors import ConfigError
    from millrace.runtime.entrypoint.standalone_session_cluster_entrypoint import (
        StandaloneSessionClusterEntrypoint,
    )

    conf = Configuration(
        {
            "io.tmp.dirs": str(tmp_path),
            "jobmanager.rpc.port": "0",
            "rest.port": "0",
            "security.ssl.rest.enabled": "true",
            "security.ssl.rest.certificate": str(tmp_path / "missing.pem"),
        }
    )
    with pytest.raises(ConfigError, match=r"security\.ssl\.rest\.certificate"):
        StandaloneSessionClusterEntrypoint(conf).start()
