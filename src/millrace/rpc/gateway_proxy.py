"""GatewayProxy: the client-side invocation handler behind every connected gateway (seed 004).

For each gateway Protocol a proxy class is built once and cached: every gateway method becomes a
small precomputed function that packs the call into an :class:`RpcInvocation` and hands it to
the transport's ``send``. No reflection happens per call. Methods the gateway does not declare
do not exist on the proxy, so calling one raises AttributeError.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from millrace.rpc.rpc_gateway import GatewayType, RpcGateway
from millrace.rpc.rpc_invocation import RpcInvocation

__all__ = [
    "AskTimeoutScheduler",
    "GatewayMethod",
    "GatewayProxy",
    "create_gateway_proxy",
    "gateway_methods",
]

G = TypeVar("G", bound=RpcGateway)

_GATEWAY_PROPERTIES = frozenset({"address", "fencing_token"})
_MISSING = object()


class AskTimeoutScheduler(Protocol):
    """Fails a reply future with RpcTimeoutError after a timeout (``RpcService`` provides it)."""

    def __call__(
        self, future: Future[Any], endpoint_id: str, method: str, timeout: float
    ) -> None: ...


@dataclass(frozen=True, slots=True)
class GatewayMethod:
    """How one gateway method travels, derived once from its signature.

    Attributes:
        name: Method name.
        is_tell: True if annotated ``-> None`` (fire-and-forget).
        timeout_index: Position (without ``self``) of a positional ``timeout`` parameter.
        has_timeout: True if the method has a parameter named ``timeout``.
        timeout_default: That parameter's default, or None.
    """

    name: str
    is_tell: bool
    timeout_index: int | None = None
    has_timeout: bool = False
    timeout_default: float | None = None


def _return_kind(gateway_type: type, name: str, fn: Callable[..., Any]) -> bool:
    """True for a tell, False for an ask; TypeError for anything else."""
    try:
        annotation: Any = typing.get_type_hints(fn).get("return", _MISSING)
    except (NameError, TypeError):  # unresolvable forward reference: judge the text
        annotation = fn.__annotations__.get("return", _MISSING)
        if isinstance(annotation, str):
            text = annotation.replace(" ", "")
            if text == "None":
                return True
            if text.split("[")[0].rsplit(".", 1)[-1] == "Future":
                return False
    if annotation is None or annotation is type(None):
        return True
    if annotation is Future or typing.get_origin(annotation) is Future:
        return False
    raise TypeError(
        f"gateway method {gateway_type.__name__}.{name} must be annotated '-> None' (a tell) "
        f"or '-> Future[T]' (an ask), not {annotation!r}"
    )


def _describe(gateway_type: type, name: str, fn: Callable[..., Any]) -> GatewayMethod:
    is_tell = _return_kind(gateway_type, name, fn)
    params = list(inspect.signature(fn).parameters.values())[1:]
    for index, param in enumerate(params):
        if param.name != "timeout":
            continue
        positional = param.kind in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD)
        default = None if param.default is param.empty else param.default
        return GatewayMethod(name, is_tell, index if positional else None, True, default)
    return GatewayMethod(name, is_tell)


def _gateway_class(gateway_type: GatewayType[RpcGateway]) -> type:
    """``gateway_type`` as a class; TypeError unless it is a Protocol subclassing RpcGateway."""
    if not (
        isinstance(gateway_type, type)
        and RpcGateway in gateway_type.__mro__
        and getattr(gateway_type, "_is_protocol", False)
    ):
        raise TypeError(f"{gateway_type!r} is not a Protocol subclassing RpcGateway")
    return gateway_type


@functools.cache
def gateway_methods(gateway_type: GatewayType[RpcGateway]) -> Mapping[str, GatewayMethod]:
    """The methods declared by a gateway Protocol and its gateway bases.

    Args:
        gateway_type: A ``typing.Protocol`` subclassing RpcGateway.

    Returns:
        Method name -> GatewayMethod, public methods only (``address`` and ``fencing_token``
        are properties of every proxy).

    Raises:
        TypeError: If ``gateway_type`` is not a gateway Protocol or a method's return annotation
            is neither None nor a Future.

    Threading:
        Any thread; cached per type.
    """
    gateway_class = _gateway_class(gateway_type)
    methods: dict[str, GatewayMethod] = {}
    for klass in gateway_class.__mro__:
        if not getattr(klass, "_is_protocol", False) or klass in (Protocol, typing.Generic):
            continue
        for name, value in vars(klass).items():
            if name.startswith("_") or name in _GATEWAY_PROPERTIES or name in methods:
                continue
            if inspect.isfunction(value):
                methods[name] = _describe(gateway_class, name, value)
    return methods


class GatewayProxy:
    """Base of generated proxies: holds the target and the transport's send function.

    Args:
        address: Target endpoint address.
        endpoint_id: Target endpoint id (named in timeout errors).
        send: Transport function that delivers an invocation to the target's mailbox.
        schedule_ask_timeout: Fails a reply future after a timeout (the service's timer).
        ask_timeout: Default ask timeout in seconds (``rpc.ask-timeout``).
        fencing_token: Token attached to every call; None for an unfenced gateway.
        fencing_token_supplier: If given, called per call for the token instead (used by a
            fenced endpoint's self gateway, which follows the endpoint's current token).

    Threading:
        Any thread.
    """

    __slots__ = (
        "_address",
        "_ask_timeout",
        "_endpoint_id",
        "_fencing_token",
        "_schedule_ask_timeout",
        "_send",
        "_token_supplier",
    )

    def __init__(
        self,
        address: str,
        endpoint_id: str,
        send: Callable[[RpcInvocation], None],
        schedule_ask_timeout: AskTimeoutScheduler,
        ask_timeout: float,
        fencing_token: object | None = None,
        fencing_token_supplier: Callable[[], object | None] | None = None,
    ) -> None:
        self._address = address
        self._endpoint_id = endpoint_id
        self._send = send
        self._schedule_ask_timeout = schedule_ask_timeout
        self._ask_timeout = ask_timeout
        self._fencing_token = fencing_token
        self._token_supplier = fencing_token_supplier

    @property
    def address(self) -> str:
        """The target endpoint's address."""
        return self._address

    @property
    def fencing_token(self) -> object | None:
        """The token attached to calls through this proxy (None: unfenced)."""
        supplier = self._token_supplier
        return self._fencing_token if supplier is None else supplier()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} to {self._address}>"


def _tell_function(spec: GatewayMethod) -> Callable[..., None]:
    name = spec.name

    def tell(self: GatewayProxy, *args: Any, **kwargs: Any) -> None:
        supplier = self._token_supplier
        token = self._fencing_token if supplier is None else supplier()
        self._send(RpcInvocation(name, args, kwargs, token, None))

    return tell


def _ask_function(spec: GatewayMethod) -> Callable[..., Future[Any]]:
    name, index, has_timeout, default = (
        spec.name,
        spec.timeout_index,
        spec.has_timeout,
        spec.timeout_default,
    )

    def ask(self: GatewayProxy, *args: Any, **kwargs: Any) -> Future[Any]:
        timeout: Any = None
        if has_timeout:
            timeout = kwargs.get("timeout", _MISSING)
            if timeout is _MISSING:
                timeout = args[index] if index is not None and len(args) > index else default
        if timeout is None:
            timeout = self._ask_timeout
        future: Future[Any] = Future()
        self._schedule_ask_timeout(future, self._endpoint_id, name, timeout)
        supplier = self._token_supplier
        token = self._fencing_token if supplier is None else supplier()
        try:
            self._send(RpcInvocation(name, args, kwargs, token, future))
        except Exception as exc:  # the transport could not send: fail this call only
            if not future.done():
                future.set_exception(exc)
        return future

    return ask


@functools.cache
def _proxy_class(gateway_type: GatewayType[RpcGateway]) -> type[GatewayProxy]:
    namespace: dict[str, Any] = {"__slots__": (), "__module__": __name__}
    for name, spec in gateway_methods(gateway_type).items():
        fn = _tell_function(spec) if spec.is_tell else _ask_function(spec)
        declared = getattr(gateway_type, name)
        fn.__name__ = name
        fn.__qualname__ = f"{gateway_type.__name__}Proxy.{name}"
        fn.__doc__ = declared.__doc__
        namespace[name] = fn
    bases = (GatewayProxy, _gateway_class(gateway_type))
    return type(f"{gateway_type.__name__}Proxy", bases, namespace)


def create_gateway_proxy(
    gateway_type: GatewayType[G],
    *,
    address: str,
    endpoint_id: str,
    send: Callable[[RpcInvocation], None],
    schedule_ask_timeout: AskTimeoutScheduler,
    ask_timeout: float,
    fencing_token: object | None = None,
    fencing_token_supplier: Callable[[], object | None] | None = None,
) -> G:
    """Build a proxy implementing ``gateway_type`` whose calls go through ``send``.

    Args:
        gateway_type: The gateway Protocol.
        address: Target endpoint address.
        endpoint_id: Target endpoint id.
        send: Transport function delivering an invocation to the target.
        schedule_ask_timeout: Fails reply futures after their timeout.
        ask_timeout: Default ask timeout in seconds.
        fencing_token: Token attached to each call.
        fencing_token_supplier: Per-call token source, overriding ``fencing_token``.

    Returns:
        The proxy; an instance of ``gateway_type``'s generated proxy class.

    Raises:
        TypeError: If ``gateway_type`` is not a valid gateway Protocol.

    Threading:
        Any thread.
    """
    proxy = _proxy_class(gateway_type)(
        address,
        endpoint_id,
        send,
        schedule_ask_timeout,
        ask_timeout,
        fencing_token,
        fencing_token_supplier,
    )
    return typing.cast(G, proxy)
