"""Leader retrieval: watch a component's ``connection_info`` znode (Flink's
LeaderRetrievalService). TaskManagers follow the ResourceManager's leader, clients the
Dispatcher's and the REST server's."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient
from kazoo.recipe.watchers import DataWatch

from millrace.errors import HighAvailabilityError
from millrace.runtime.highavailability.zookeeper_paths import ZooKeeperPaths

__all__ = ["LeaderInformation", "ZooKeeperLeaderRetrieval", "retrieve_leader"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LeaderInformation:
    """Where a component's leader answers, and its fencing token.

    Attributes:
        address: The leader's address (an RPC address, or the REST server's URL).
        leader_session_id: The leader session id (32 hex digits).
    """

    address: str
    leader_session_id: str


def _parse(data: bytes | None) -> LeaderInformation | None:
    if not data:
        return None
    try:
        fields = json.loads(data)
        return LeaderInformation(str(fields["address"]), str(fields["leader_session_id"]))
    except (ValueError, KeyError, TypeError):
        logger.warning("ignoring malformed connection information %r", data[:200])
        return None


class ZooKeeperLeaderRetrieval:
    """Calls ``listener`` with the component's leader whenever it changes (None: no leader).

    Args:
        client: A started kazoo client.
        paths: The cluster's znodes.
        component: ``dispatcher``, ``resource_manager``, ``rest_server`` or a job id.
        listener: Called with each new LeaderInformation, or None when the leader is gone.

    Threading:
        ``listener`` runs on kazoo's event thread: it must only hand the news to its
        component's mailbox (``run_async``), never block.
    """

    def __init__(
        self,
        client: KazooClient,
        paths: ZooKeeperPaths,
        component: str,
        listener: Callable[[LeaderInformation | None], None],
    ) -> None:
        self._listener = listener
        self._last: LeaderInformation | None = None
        self._stopped = False
        self._path = paths.connection_info(component)
        self._watch = DataWatch(client, self._path, self._changed)

    def _changed(self, data: bytes | None, stat: Any) -> bool | None:
        if self._stopped:
            return False  # ends kazoo's watch
        leader = _parse(data)
        if leader != self._last:
            self._last = leader
            logger.info("leader of %s: %s", self._path, leader)
            self._listener(leader)
        return None

    def stop(self) -> None:
        """Stop watching (the next event ends kazoo's watch; no call after this returns)."""
        self._stopped = True


def retrieve_leader(
    client: KazooClient, paths: ZooKeeperPaths, component: str, timeout: float
) -> LeaderInformation:
    """The component's current leader, waiting up to ``timeout`` s for one (a client's lookup).

    Raises:
        HighAvailabilityError: If no leader is published within ``timeout``.
    """
    found: list[LeaderInformation] = []
    published = threading.Event()

    def listener(leader: LeaderInformation | None) -> None:
        if leader is not None:
            found.append(leader)
            published.set()

    retrieval = ZooKeeperLeaderRetrieval(client, paths, component, listener)
    try:
        if not published.wait(timeout):
            raise HighAvailabilityError(
                f"no leader of {component} published at {paths.connection_info(component)} "
                f"within {timeout:g} s: is a JobManager running with these "
                f"high-availability settings?",
                paths.connection_info(component),
            )
        return found[-1]
    finally:
        retrieval.stop()
