"""The web dashboard's serving, in process on the real REST app (real Dispatcher and
ResourceManager on a LocalRpcService): ``/`` and its assets need no token, carry a
Content-Security-Policy, shadow no API path and stay out of the OpenAPI document; every module
the page imports ships in the package; no script writes API strings as markup."""

from __future__ import annotations

import re
from collections.abc import Iterator
from importlib.resources import files

import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from starlette.testclient import TestClient

from millrace.config import Configuration
from millrace.rpc import LocalRpcService
from millrace.runtime.checkpoint.savepoint_targets import SavepointTargets
from millrace.runtime.control_messages import control_message_codec
from millrace.runtime.dispatcher.dispatcher import Dispatcher
from millrace.runtime.dispatcher.dispatcher_gateway import DispatcherGateway
from millrace.runtime.dispatcher.rest_endpoint import create_rest_app
from millrace.runtime.dispatcher.web_dashboard import dashboard_assets
from millrace.runtime.io_executor import create_io_executor, shutdown_io_executor
from millrace.runtime.resourcemanager.resource_manager import ResourceManager
from millrace.runtime.resourcemanager.resource_manager_gateway import ResourceManagerGateway

WAIT = 10.0
TOKEN = "b" * 64
WEB = files("millrace.runtime.dispatcher").joinpath("web")


@pytest.fixture
def app(tmp_path) -> Iterator[FastAPI]:
    conf = Configuration({"io.tmp.dirs": str(tmp_path)})
    service = LocalRpcService("dashboard-test", configuration=conf)
    io = create_io_executor()
    resource_manager = ResourceManager(service, configuration=conf)
    resource_manager.start()
    dispatcher = Dispatcher(service, conf, resource_manager.address, io)
    dispatcher.start()
    yield create_rest_app(
        dispatcher.get_self_gateway(DispatcherGateway),
        resource_manager.get_self_gateway(ResourceManagerGateway),
        control_message_codec(),
        TOKEN,
        max_body_bytes=64 * 1024,
        timeout=WAIT,
        savepoint_targets=SavepointTargets.from_configuration(conf),
    )
    service.close_async().exception(timeout=WAIT)
    shutdown_io_executor(io, WAIT)


@pytest.fixture
def client(app) -> Iterator[TestClient]:
    with TestClient(app, base_url="http://127.0.0.1") as started:
        yield started


def test_the_dashboard_is_served_at_the_root_without_the_token(client) -> None:
    page = client.get("/")
    assert page.status_code == 200, page.text
    assert page.headers["content-type"].startswith("text/html")
    assert 'src="/web/app.js"' in page.text and 'id="content"' in page.text
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "default-src 'none'" in policy
    assert page.headers["x-content-type-options"] == "nosniff"


def test_every_asset_is_served_with_its_type_and_nothing_else_is(client) -> None:
    types = {".js": "text/javascript", ".css": "text/css", ".html": "text/html"}
    for name in dashboard_assets():
        answer = client.get(f"/web/{name}")
        assert answer.status_code == 200, (name, answer.text)
        assert answer.headers["content-type"].startswith(types[name[name.rfind(".") :]])
    for bad in ["/web/nope.js", "/web/..%2Fweb_dashboard.py", "/web/%2e%2e/rest_guard.py"]:
        assert client.get(bad).status_code == 404, bad


def test_the_dashboard_shadows_no_api_path_and_is_not_in_the_openapi_document(app, client) -> None:
    api = [r for r in app.routes if isinstance(r, APIRoute) and r.include_in_schema]
    assert api, "the API's routes"
    for route in api:
        assert route.path != "/" and not route.path.startswith("/web"), route.path
    paths = client.get("/openapi.json").json()["paths"]
    assert "/" not in paths and not any(p.startswith("/web") for p in paths)
    assert client.get("/overview").json()["taskmanagers"] == 0  # the API still answers
    assert client.patch("/jobs/x?mode=cancel").status_code == 401  # writes still need it


def test_every_module_the_page_loads_ships_in_the_package() -> None:
    assets = dashboard_assets()
    index = assets["index.html"].decode()
    wanted = set(re.findall(r'(?:src|href)="/web/([^"]+)"', index))
    for name, content in assets.items():
        if name.endswith(".js"):
            wanted |= set(re.findall(r'from "\./([^"]+)"', content.decode()))
    assert wanted >= {"app.js", "style.css"}
    assert wanted <= set(assets), wanted - set(assets)


def test_no_script_writes_markup_or_loads_from_elsewhere() -> None:
    for name, content in dashboard_assets().items():
        text = content.decode()
        if name.endswith(".js"):
            sink = re.search(
                r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|"
                r"createContextualFragment|DOMParser",
                text,
            )
            assert sink is None, f"{name} uses {sink and sink.group()}"
        assert not re.search(r"(?:src|href)=\"(?:https?:)?//", text), f"{name} loads from outside"
        assert "@import" not in text and "url(http" not in text, name
