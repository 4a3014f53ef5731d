"""FencedRpcEndpoint: an endpoint that serves only callers holding its current fencing token.

Leaders (JobMaster, ResourceManager, Dispatcher) are fenced: each leadership term has a new
token, and gateway calls carrying another token, or none, are rejected, so a caller still talking
to a former leader cannot change the new leader's state (seed 004). Local work submitted with
``run_async``/``call_async``/``schedule_run_async`` is not fenced.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from millrace.errors import FencingTokenError
from millrace.rpc.future_utils import fail
from millrace.rpc.rpc_endpoint import RpcEndpoint
from millrace.rpc.rpc_invocation import RpcInvocation

if TYPE_CHECKING:
    from millrace.rpc.rpc_service import RpcService

__all__ = ["FencedRpcEndpoint"]

logger = logging.getLogger(__name__)


class FencedRpcEndpoint(RpcEndpoint):
    """An RpcEndpoint whose gateway invocations must carry its current fencing token.

    A rejected ask fails with FencingTokenError; a rejected tell is dropped and logged. The
    endpoint's self gateway carries the token current at each call.

    Args:
        rpc_service: The hosting service.
        endpoint_id: Unique id within the service.
        fencing_token: Initial token (e.g. the leader session id); None rejects every
            invocation until :meth:`set_fencing_token` sets one.

    Threading:
        See RpcEndpoint; the token changes only on the main thread.
    """

    def __init__(
        self, rpc_service: RpcService, endpoint_id: str, fencing_token: object | None = None
    ) -> None:
        self._rpc_fencing_token = fencing_token
        super().__init__(rpc_service, endpoint_id)

    @property
    def fencing_token(self) -> object | None:
        """The current fencing token (None: not leader, every invocation is rejected).

        Threading:
            Any thread (a snapshot); changed on the main thread only.
        """
        return self._rpc_fencing_token

    def set_fencing_token(self, fencing_token: object | None) -> None:
        """Replace the fencing token; invocations carrying the old one are rejected from now on.

        Args:
            fencing_token: The new token, or None to reject every invocation.

        Raises:
            IllegalThreadError: If not called on the main thread.

        Threading:
            Main thread only.
        """
        self.validate_runs_in_main_thread()
        self._rpc_fencing_token = fencing_token

    def _rpc_invocation_filter(self) -> Callable[[RpcInvocation], bool] | None:
        return self._rpc_accepts

    def _rpc_self_token_supplier(self) -> Callable[[], object | None] | None:
        return lambda: self._rpc_fencing_token

    def _rpc_accepts(self, invocation: RpcInvocation) -> bool:
        expected = self._rpc_fencing_token
        received = invocation.fencing_token
        if expected is not None and received is not None and received == expected:
            return True
        if invocation.reply is not None:
            fail(invocation.reply, FencingTokenError(self.endpoint_id, expected, received))
        else:
            logger.info(
                "dropped tell %s to %s: fencing token %r, expected %r",
                invocation.method_name,
                self.endpoint_id,
                received,
                expected,
            )
        return False
