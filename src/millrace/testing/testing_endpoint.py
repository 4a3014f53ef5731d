"""TestingEndpoint: an RpcEndpoint that serves a testing gateway's methods, so that the
component under test reaches it by address like a real peer (Flink's TestingRpcService
registering a testing gateway)."""

from __future__ import annotations

from typing import Any

from millrace.rpc import RpcEndpoint, RpcService

__all__ = ["TestingEndpoint"]


class TestingEndpoint(RpcEndpoint):
    """Serves the public methods of ``target`` (e.g. a TestingTaskExecutorGateway) at
    ``<service>/<endpoint_id>``, each on the endpoint's main thread.

    Args:
        rpc_service: The service the component under test uses.
        endpoint_id: The id of the address it is reached at.
        target: The object whose methods answer (asks may return values or Futures).

    Threading:
        Calls arrive on the endpoint's main thread and run ``target``'s methods there.
    """

    __test__ = False

    def __init__(self, rpc_service: RpcService, endpoint_id: str, target: object) -> None:
        self._target = target
        super().__init__(rpc_service, endpoint_id)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._target, name)
