"""ZooKeeperLeaderElection: one leader election per JobManager process (seed 003; Flink 1.15+).

Contenders queue on ``leader/latch`` with kazoo's lock recipe (ephemeral sequential znodes; the
lowest leads). The winner draws a fresh leader session id, which is the fencing token of every
component it runs (DispatcherId, ResourceManagerId, JobMasterId), and publishes each
component's connection information in an ephemeral znode. Leadership ends when the ZooKeeper
session is LOST (the latch znode is gone, so another contender leads), on SUSPENDED too unless
``tolerate-suspended-connections`` (FLINK-10052), or on close.

Every HA write of the leader is a ZooKeeper transaction that first checks its latch znode, and
:meth:`check_leadership` asks ZooKeeper whether the latch znode is still this session's: a
leader that wakes from a pause (SIGSTOP, GC, partition) after its session expired can therefore
neither publish, nor complete a checkpoint, nor commit a sink.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from kazoo.client import KazooClient, KazooState, TransactionRequest
from kazoo.exceptions import ConnectionLoss, KazooException, NoNodeError

from millrace.errors import HighAvailabilityError, LeadershipLostError
from millrace.runtime.highavailability.zookeeper_paths import ZooKeeperPaths
from millrace.types import new_id

__all__ = ["Fence", "LeaderContender", "ZooKeeperLeaderElection", "connection_info_bytes"]

logger = logging.getLogger(__name__)

_RETRY_WAIT = 0.5  # seconds between attempts to contend or to remove the latch znode
_SUSPENDED_POLL = 0.1  # seconds between checks of a SUSPENDED connection while it is tolerated


class LeaderContender(Protocol):
    """What a leader election grants leadership to (Flink's LeaderContender).

    Threading:
        Both calls come from the election's own thread, one at a time, in order.
    """

    def grant_leadership(self, leader_session_id: str) -> None:
        """Start acting as leader under ``leader_session_id`` (32 hex digits)."""

    def revoke_leadership(self) -> None:
        """Stop acting as leader at once; another process may lead already."""


def connection_info_bytes(address: str, leader_session_id: str) -> bytes:
    """The data of a ``connection_info`` znode: JSON ``{"address", "leader_session_id"}``."""
    return json.dumps({"address": address, "leader_session_id": leader_session_id}).encode()


class ZooKeeperLeaderElection:
    """Contends for the leadership of one cluster on ZooKeeper.

    Args:
        client: A started kazoo client (its session is this process's).
        paths: The cluster's znodes.
        contender: Granted and revoked the leadership.
        tolerate_suspended: Keep leadership while SUSPENDED (give it up only when LOST).
        identifier: Written into the latch znode (e.g. the process's RPC address).
        session_timeout: The ZooKeeper session timeout, s: how long ``check_leadership``
            waits for a SUSPENDED connection that is tolerated to come back.

    Threading:
        ``start``/``close`` from one thread; the contender is called on the election's thread;
        ``check_leadership``, ``commit_fenced`` and ``publish`` from any thread (they block on
        ZooKeeper).
    """

    def __init__(
        self,
        client: KazooClient,
        paths: ZooKeeperPaths,
        contender: LeaderContender,
        tolerate_suspended: bool,
        identifier: str,
        session_timeout: float,
    ) -> None:
        self._client = client
        self._paths = paths
        self._contender = contender
        self._tolerate_suspended = tolerate_suspended
        self._identifier = identifier
        self._session_timeout = session_timeout
        self._closed = threading.Event()
        self._revoked = threading.Event()
        self._lock: Any = None
        self._leader: tuple[str, str] | None = None  # (session id, latch znode), replaced whole
        self._thread = threading.Thread(target=self._run, name="leader-election", daemon=True)

    @property
    def leader_session_id(self) -> str | None:
        """The current leader session id, or None while not leading. Any thread."""
        leader = self._leader
        return leader[0] if leader is not None else None

    def start(self) -> ZooKeeperLeaderElection:
        """Begin contending (in the election's thread); returns self."""
        self._client.add_listener(self._connection_state_changed)
        self._client.ensure_path(self._paths.latch)
        self._thread.start()
        return self

    def close(self, timeout: float = 10.0) -> None:
        """Stop contending; a leader is revoked and its latch znode removed. Idempotent.

        Args:
            timeout: Seconds to wait for the election's thread.
        """
        self._closed.set()
        self._revoked.set()
        lock = self._lock
        if lock is not None:
            lock.cancel()
        self._client.remove_listener(self._connection_state_changed)
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    # The election's thread ---------------------------------------------------------------------

    def _run(self) -> None:
        while not self._closed.is_set():
            self._revoked.clear()
            lock = self._client.Lock(self._paths.latch, self._identifier)
            self._lock = lock
            if self._closed.is_set():  # closed before this lock could be cancelled
                break
            try:
                acquired = lock.acquire()
            except Exception as error:  # session lost, connection loss, cancelled by close
                if not self._closed.is_set():
                    logger.info("contending for leadership failed (%s); again", error)
                    self._closed.wait(_RETRY_WAIT)
                continue
            if not acquired:
                continue
            node = f"{lock.path}/{lock.node}"
            if not self._closed.is_set():
                self._lead(node)
            self._remove_latch(node)

    def _lead(self, node: str) -> None:
        session = new_id()
        self._leader = (session, node)
        logger.info("granted leadership, leader session %s (%s)", session, node)
        try:
            self._contender.grant_leadership(session)
        except Exception:
            logger.exception("the contender failed to take the leadership; giving it up")
            self._revoked.set()
        self._revoked.wait()
        self._leader = None
        logger.warning("leadership of session %s revoked", session)
        try:
            self._contender.revoke_leadership()
        except Exception:
            logger.exception("the contender failed to give up the leadership")

    def _remove_latch(self, node: str) -> None:
        """Delete the latch znode so another contender leads (gone with a lost session)."""
        while True:
            try:
                self._client.retry(self._client.delete, node)
                return
            except NoNodeError:
                return
            except KazooException as error:
                if self._client.state == KazooState.LOST or self._closed.is_set():
                    return  # the session's ephemeral znodes go with it
                logger.info("removing %s failed (%s); again", node, error)
                self._closed.wait(_RETRY_WAIT)

    def _connection_state_changed(self, state: str) -> None:
        """kazoo's thread: LOST always revokes; SUSPENDED unless tolerated."""
        if state == KazooState.LOST or (
            state == KazooState.SUSPENDED and not self._tolerate_suspended
        ):
            if self._leader is not None:
                logger.warning("ZooKeeper connection %s: giving up the leadership", state)
            self._revoked.set()

    # Fenced access (any thread) ----------------------------------------------------------------

    def _node_of(self, leader_session_id: str) -> str:
        leader = self._leader
        if leader is None or leader[0] != leader_session_id:
            raise LeadershipLostError(leader_session_id, "this process does not lead that session")
        return leader[1]

    def check_leadership(self, leader_session_id: str) -> None:
        """Ask ZooKeeper whether this session still holds the latch. While the connection is
        SUSPENDED and that is tolerated, wait (up to the session timeout) for it to come back
        and ask then: a ZooKeeper restart does not cost a commit, and so the job
        (FLINK-10052's point).

        Raises:
            LeadershipLostError: If not, or if ZooKeeper cannot tell (the connection is down,
                and not tolerated or not back within the session timeout).
        """
        node = self._node_of(leader_session_id)
        deadline = time.monotonic() + self._session_timeout
        while True:
            left = max(0.0, deadline - time.monotonic())
            try:  # a call made while reconnecting is queued: bounded by the timeout
                stat = self._client.exists_async(node).get(timeout=max(left, _SUSPENDED_POLL))
                break
            except (ConnectionLoss, self._client.handler.timeout_exception) as error:
                waiting = self._tolerate_suspended and time.monotonic() < deadline
                if not waiting or self._revoked.is_set() or self._closed.is_set():
                    raise LeadershipLostError(leader_session_id, f"ZooKeeper: {error!r}") from error
                self._closed.wait(_SUSPENDED_POLL)
            except KazooException as error:
                raise LeadershipLostError(leader_session_id, f"ZooKeeper: {error!r}") from error
        session = self._client.client_id  # None while disconnected
        if stat is None or session is None or stat.ephemeralOwner != session[0]:
            raise LeadershipLostError(leader_session_id, f"the latch {node} is gone")

    def commit_fenced(
        self, leader_session_id: str, build: Callable[[TransactionRequest], None]
    ) -> None:
        """Commit a transaction that ``build`` fills, preceded by a check of the latch.

        Raises:
            LeadershipLostError: If the latch is not this session's any more.
            HighAvailabilityError: If another operation of the transaction failed.
        """
        node = self._node_of(leader_session_id)
        transaction = self._client.transaction()
        transaction.check(node, 0)
        build(transaction)
        try:
            results = transaction.commit()
        except KazooException as error:
            raise LeadershipLostError(leader_session_id, f"ZooKeeper: {error!r}") from error
        if isinstance(results[0], Exception):
            raise LeadershipLostError(leader_session_id, f"the latch {node} is gone")
        failed = [r for r in results[1:] if isinstance(r, Exception)]
        if failed:
            raise HighAvailabilityError(f"ZooKeeper transaction failed: {failed!r}")

    def publish(self, leader_session_id: str, component: str, address: str) -> None:
        """Publish ``component``'s leader address (ephemeral ``connection_info``).

        Raises:
            LeadershipLostError: If this session does not lead any more.
        """
        path = self._paths.connection_info(component)
        self._client.ensure_path(path.rsplit("/", 1)[0])
        data = connection_info_bytes(address, leader_session_id)
        exists = self._client.exists(path) is not None

        def build(transaction: TransactionRequest) -> None:
            if exists:
                transaction.delete(path)
            transaction.create(path, data, ephemeral=True)

        try:
            self.commit_fenced(leader_session_id, build)
        except LeadershipLostError:
            raise
        except HighAvailabilityError:  # the znode came or went meanwhile: once more
            exists = self._client.exists(path) is not None
            self.commit_fenced(leader_session_id, build)

    def unpublish(self, leader_session_id: str, component: str) -> None:
        """Remove ``component``'s connection information if this session published it."""
        path = self._paths.connection_info(component)
        try:
            data, _ = self._client.get(path)
        except NoNodeError:
            return
        if json.loads(data).get("leader_session_id") == leader_session_id:
            try:
                self.commit_fenced(leader_session_id, lambda t: t.delete(path))
            except HighAvailabilityError as error:
                logger.info("leaving %s: %s", path, error)


class Fence:
    """One leadership term's guard of the HA writes (the stores hold one).

    Args:
        election: The process's election.
        leader_session_id: The term.

    Threading:
        Any thread (blocks on ZooKeeper).
    """

    def __init__(self, election: ZooKeeperLeaderElection, leader_session_id: str) -> None:
        self._election = election
        self.leader_session_id = leader_session_id

    def check(self) -> None:
        """Raises LeadershipLostError unless this term still holds the latch."""
        self._election.check_leadership(self.leader_session_id)

    def commit(self, build: Callable[[TransactionRequest], None]) -> None:
        """A transaction ``build`` fills, after a check of the latch (``commit_fenced``)."""
        self._election.commit_fenced(self.leader_session_id, build)

    @contextmanager
    def writing(self, what: str) -> Iterator[None]:
        """A write of this term: refused at once if the term ended; a failure inside is
        LeadershipLostError if the term ended meanwhile, else HighAvailabilityError.

        Raises:
            LeadershipLostError: If this term does not lead (checked before any I/O).
            HighAvailabilityError: If the write failed while the term still leads.
        """
        self._election._node_of(self.leader_session_id)
        try:
            yield
        except LeadershipLostError:
            raise
        except (KazooException, HighAvailabilityError) as error:
            self.check()  # raises LeadershipLostError if the term is over
            raise HighAvailabilityError(f"{what}: {error}") from error
