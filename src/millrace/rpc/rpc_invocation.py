"""RpcInvocation: one gateway call on its way to an endpoint's mailbox (seed 004)."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

__all__ = ["RpcInvocation"]


@dataclass(slots=True, eq=False)
class RpcInvocation:
    """A gateway method call: what a proxy hands to its transport.

    The local transport passes it by reference; a network transport encodes everything but
    ``reply``, which stays with the caller and is completed when the answer arrives.

    Attributes:
        method_name: Name of the gateway method to invoke on the endpoint.
        args: Positional arguments, without ``self``.
        kwargs: Keyword arguments.
        fencing_token: The caller's fencing token; None for an unfenced gateway.
        reply: Future completed with the method's result for an ask; None for a tell.
        origin: The peer (``host:port``) of a call that came over the network; None for a
            call made in this process. A failing remote tell is logged, not fatal.

    Threading:
        Built in the caller's thread, read in the endpoint's main thread; not modified after
        it is sent.
    """

    method_name: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    fencing_token: object | None
    reply: Future[Any] | None
    origin: str | None = None

    @property
    def is_tell(self) -> bool:
        """True for a fire-and-forget call (no reply expected)."""
        return self.reply is None
