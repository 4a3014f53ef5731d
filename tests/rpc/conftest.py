"""Fixtures for RPC tests: every endpoint test runs against every RpcService transport."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from millrace.clock import Clock, ManualClock
from millrace.config import Configuration
from millrace.rpc import LocalRpcService, RpcService
from millrace.rpc.tcp.tcp_rpc_service import TcpRpcService
from millrace.rpc.tcp.transport_security import TransportSecurity
from millrace.runtime.control_messages import control_message_codec

RpcServiceFactory = Callable[..., RpcService]


def _local(clock: Clock | None, configuration: Configuration | None) -> RpcService:
    return LocalRpcService("test", configuration=configuration, clock=clock)


def _tcp(clock: Clock | None, configuration: Configuration | None) -> RpcService:
    return TcpRpcService(
        "test",
        security=TransportSecurity(SECRET),
        codec=control_message_codec(),
        configuration=configuration,
        clock=clock,
    )


SECRET = b"test-cluster-secret-0123456789"

TRANSPORTS: dict[str, Callable[[Clock | None, Configuration | None], RpcService]] = {
    "local": _local,
    "tcp": _tcp,
}


@pytest.fixture(params=sorted(TRANSPORTS))
def rpc_service_factory(request: pytest.FixtureRequest) -> Iterator[RpcServiceFactory]:
    """Builds services of the parametrised transport; closes them all in teardown."""
    services: list[RpcService] = []

    def make(
        *, clock: Clock | None = None, configuration: Configuration | None = None
    ) -> RpcService:
        service = TRANSPORTS[request.param](clock, configuration)
        services.append(service)
        return service

    yield make
    for service in services:  # waits; endpoint termination errors are the tests' concern
        service.close_async().exception(timeout=10)


@pytest.fixture
def rpc_service(rpc_service_factory: RpcServiceFactory) -> RpcService:
    """A service on the system clock."""
    return rpc_service_factory()


@pytest.fixture
def manual_clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def manual_rpc_service(
    rpc_service_factory: RpcServiceFactory, manual_clock: ManualClock
) -> RpcService:
    """A service whose endpoints and timeouts follow ``manual_clock``."""
    return rpc_service_factory(clock=manual_clock)
