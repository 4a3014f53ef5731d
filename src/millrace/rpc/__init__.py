"""The in-process actor runtime of Millrace: endpoints, gateways and RPC services (seed 004).

An :class:`RpcEndpoint` owns its state and one main thread that processes its mailbox in FIFO
order; other components talk to it through a typed :class:`RpcGateway` obtained from an
:class:`RpcService` (``connect``). Two transports implement RpcService, each composing one
:class:`EndpointRegistry` (the hosted endpoints, lookups and their timeout, the fatal error
handler): :class:`LocalRpcService` in-process, and ``millrace.rpc.tcp.TcpRpcService`` between
processes.
"""

from millrace.rpc.endpoint_registry import EndpointRegistry
from millrace.rpc.fenced_rpc_endpoint import FencedRpcEndpoint
from millrace.rpc.gateway_proxy import (
    AskTimeoutScheduler,
    GatewayMethod,
    GatewayProxy,
    create_gateway_proxy,
    gateway_methods,
)
from millrace.rpc.local_rpc_service import LocalRpcService
from millrace.rpc.rpc_endpoint import RpcEndpoint
from millrace.rpc.rpc_gateway import FencedRpcGateway, GatewayType, RpcGateway
from millrace.rpc.rpc_invocation import RpcInvocation
from millrace.rpc.rpc_server import RpcServer
from millrace.rpc.rpc_service import FatalErrorHandler, RpcService
from millrace.rpc.rpc_timer import RpcTimer, TimerHandle
from millrace.rpc.scheduled_run import ScheduledRun

__all__ = [
    "AskTimeoutScheduler",
    "EndpointRegistry",
    "FatalErrorHandler",
    "FencedRpcEndpoint",
    "FencedRpcGateway",
    "GatewayMethod",
    "GatewayProxy",
    "GatewayType",
    "LocalRpcService",
    "RpcEndpoint",
    "RpcGateway",
    "RpcInvocation",
    "RpcServer",
    "RpcService",
    "RpcTimer",
    "ScheduledRun",
    "TimerHandle",
    "create_gateway_proxy",
    "gateway_methods",
]
