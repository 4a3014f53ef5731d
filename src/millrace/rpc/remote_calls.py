"""What a remote peer may call on an endpoint: the methods of its declared gateways (issue 9).

An endpoint declares the gateways it serves in its class statement (``implements=(...)``, its
own and its base classes') or by subclassing gateway Protocols. A network transport dispatches
a remote call only if its method belongs to one of those gateways and its arguments fit the
gateway's signature (:class:`CallShape`), so a peer can neither reach other public attributes
of the endpoint (``close_async``, ``set_fencing_token``, ...) nor make it raise TypeError on
its main thread with a wrong number of arguments.

Threading:
    Any thread; results are cached per endpoint class.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from millrace.rpc.gateway_proxy import gateway_methods
from millrace.rpc.rpc_gateway import GatewayType, RpcGateway

__all__ = ["CallShape", "declared_gateways", "served_methods"]


@dataclass(frozen=True, slots=True)
class CallShape:
    """The parameters of a gateway method (without ``self``), to check a call's arguments
    before it is dispatched.

    Attributes:
        name: Method name.
        positional: Names of the parameters that may be given by position, in order.
        required_positional: How many leading ``positional`` parameters have no default.
        positional_only: Names that may not be given by keyword.
        keyword_only: Names of keyword-only parameters.
        required_keyword_only: Those without a default.
        var_positional: Whether the method takes ``*args``.
        var_keyword: Whether the method takes ``**kwargs``.
    """

    name: str
    positional: tuple[str, ...]
    required_positional: int
    positional_only: frozenset[str]
    keyword_only: frozenset[str]
    required_keyword_only: frozenset[str]
    var_positional: bool
    var_keyword: bool

    @classmethod
    def of(cls, name: str, fn: Callable[..., Any]) -> CallShape:
        """The shape of ``fn``'s signature, its first parameter (``self``) left out."""
        params = list(inspect.signature(fn).parameters.values())[1:]
        kinds = inspect.Parameter
        by_position = (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD)
        positional = [p for p in params if p.kind in by_position]
        required = 0
        for p in positional:
            if p.default is not p.empty:
                break
            required += 1
        keyword_only = [p for p in params if p.kind is kinds.KEYWORD_ONLY]
        return cls(
            name=name,
            positional=tuple(p.name for p in positional),
            required_positional=required,
            positional_only=frozenset(
                p.name for p in positional if p.kind is kinds.POSITIONAL_ONLY
            ),
            keyword_only=frozenset(p.name for p in keyword_only),
            required_keyword_only=frozenset(p.name for p in keyword_only if p.default is p.empty),
            var_positional=any(p.kind is kinds.VAR_POSITIONAL for p in params),
            var_keyword=any(p.kind is kinds.VAR_KEYWORD for p in params),
        )

    def check(self, args: list[Any] | tuple[Any, ...], kwargs: dict[Any, Any]) -> str | None:
        """Why ``method(*args, **kwargs)`` would not bind, or None if it would.

        Returns:
            A message in Python's own words (``"put() takes 1 positional argument but 2 were
            given"``), or None.
        """
        given = len(args)
        if not kwargs:  # the common case: two comparisons
            if given < self.required_positional:
                missing = self.positional[given : self.required_positional]
                return f"{self.name}() missing required argument(s): {', '.join(missing)}"
            if given > len(self.positional) and not self.var_positional:
                return (
                    f"{self.name}() takes {len(self.positional)} positional argument(s) but "
                    f"{given} were given"
                )
            if self.required_keyword_only:
                return (
                    f"{self.name}() missing required keyword argument(s): "
                    f"{', '.join(sorted(self.required_keyword_only))}"
                )
            return None
        return self._check_keywords(given, kwargs)

    def _check_keywords(self, given: int, kwargs: dict[Any, Any]) -> str | None:
        if given > len(self.positional) and not self.var_positional:
            return (
                f"{self.name}() takes {len(self.positional)} positional argument(s) but "
                f"{given} were given"
            )
        by_position = set(self.positional[:given])
        for key in kwargs:
            if not isinstance(key, str):
                return f"{self.name}() keywords must be strings"
            if key in by_position:
                return f"{self.name}() got multiple values for argument {key!r}"
            named = key not in self.positional_only and (
                key in self.positional or key in self.keyword_only
            )
            if not named and not self.var_keyword:
                return f"{self.name}() got an unexpected keyword argument {key!r}"
        missing = [
            n for n in self.positional[given : self.required_positional] if n not in kwargs
        ] + sorted(n for n in self.required_keyword_only if n not in kwargs)
        if missing:
            return f"{self.name}() missing required argument(s): {', '.join(missing)}"
        return None


def _is_gateway(klass: type) -> bool:
    return (
        getattr(klass, "_is_protocol", False)
        and RpcGateway in klass.__mro__
        and klass is not RpcGateway
    )


_gateways: dict[type, tuple[GatewayType[RpcGateway], ...]] = {}
_methods: dict[type, Mapping[str, CallShape]] = {}


def declared_gateways(endpoint_class: type) -> tuple[GatewayType[RpcGateway], ...]:
    """The gateways ``endpoint_class`` serves, in MRO order, each once.

    Those named by ``implements=`` in its class statement or a base class's, and the gateway
    Protocols among its bases.
    """
    cached = _gateways.get(endpoint_class)
    if cached is not None:
        return cached
    found: list[GatewayType[RpcGateway]] = []
    for klass in endpoint_class.__mro__:
        candidates = [*vars(klass).get("_rpc_implements", ())]
        if _is_gateway(klass):
            candidates.append(klass)
        for gateway in candidates:
            if gateway not in found:
                found.append(gateway)
    return _gateways.setdefault(endpoint_class, tuple(found))


def served_methods(endpoint_class: type) -> Mapping[str, CallShape]:
    """Method name -> shape of every method a remote peer may call on ``endpoint_class``.

    The public methods of :func:`declared_gateways` (a method declared by several gateways
    takes the shape of the first).
    """
    cached = _methods.get(endpoint_class)
    if cached is not None:
        return cached
    methods: dict[str, CallShape] = {}
    for gateway in declared_gateways(endpoint_class):
        for name in gateway_methods(gateway):
            if name not in methods:
                methods[name] = CallShape.of(name, getattr(gateway, name))
    return _methods.setdefault(endpoint_class, methods)
