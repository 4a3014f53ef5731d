"""HeartbeatManager: an endpoint's side of DeathWatch (Flink's HeartbeatManagerSender).

The owner (ResourceManager or JobMaster) monitors targets (TaskManagers): every
``heartbeat.interval`` it sends each target a heartbeat request through a callback; the target
answers with ``receive_heartbeat``. Each target has a phi-accrual failure detector; when phi
passes ``heartbeat.threshold``, the listener is told ``notify_heartbeat_timeout`` once and the
target is unmonitored (the watcher receives Terminated, in seed 000's words).

Threading:
    Main thread of the owning endpoint only: the periodic check runs through the endpoint's
    ``schedule_run_async``; nothing here is locked.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from millrace.clock import Clock
from millrace.runtime.heartbeat.phi_accrual_failure_detector import PhiAccrualFailureDetector
from millrace.types import ResourceId

__all__ = ["HeartbeatListener", "HeartbeatManager"]

logger = logging.getLogger(__name__)


class HeartbeatListener(Protocol):
    def notify_heartbeat_timeout(self, resource_id: ResourceId) -> None:
        """The target ``resource_id`` is considered dead (its detector's phi passed the
        threshold). Called on the owner's main thread."""
        ...


@dataclass
class _Target:
    request: Callable[[], None]
    detector: PhiAccrualFailureDetector


class HeartbeatManager:
    """Monitors targets for one endpoint.

    Args:
        clock: The endpoint's clock.
        schedule: ``schedule(fn, delay_s)`` running ``fn`` on the owner's main thread (the
            endpoint's ``schedule_run_async``).
        listener: Told about timeouts.
        interval: Seconds between heartbeat requests (``heartbeat.interval``).
        pause: Acceptable heartbeat pause, seconds (``heartbeat.pause``).
        threshold: phi threshold (``heartbeat.threshold``).
    """

    def __init__(
        self,
        clock: Clock,
        schedule: Callable[[Callable[[], None], float], object],
        listener: HeartbeatListener,
        interval: float,
        pause: float,
        threshold: float,
    ) -> None:
        self._clock = clock
        self._schedule = schedule
        self._listener = listener
        self.interval = interval
        self._pause = pause
        self._threshold = threshold
        self._targets: dict[ResourceId, _Target] = {}
        self._running = False

    def start(self) -> None:
        """Begin the periodic requests and checks. Main thread."""
        if not self._running:
            self._running = True
            self._schedule(self._tick, self.interval)

    def stop(self) -> None:
        """Stop monitoring everything. Main thread."""
        self._running = False
        self._targets.clear()

    def monitor_target(self, resource_id: ResourceId, request: Callable[[], None]) -> None:
        """Watch ``resource_id``; ``request()`` asks it for a heartbeat. It counts as alive
        now."""
        detector = PhiAccrualFailureDetector(
            self._clock, self._threshold, self._pause, self.interval
        )
        detector.heartbeat()
        self._targets[resource_id] = _Target(request, detector)

    def unmonitor_target(self, resource_id: ResourceId) -> None:
        self._targets.pop(resource_id, None)

    def receive_heartbeat(self, resource_id: ResourceId) -> None:
        """A heartbeat from ``resource_id`` arrived (unknown targets are ignored)."""
        target = self._targets.get(resource_id)
        if target is not None:
            target.detector.heartbeat()

    def phi(self, resource_id: ResourceId) -> float:
        """Current suspicion of a monitored target. Raises KeyError for an unknown one."""
        return self._targets[resource_id].detector.phi()

    @property
    def monitored(self) -> list[str]:
        return list(self._targets)

    def _tick(self) -> None:
        if not self._running:
            return
        for resource_id, target in list(self._targets.items()):
            if not target.detector.is_available():
                logger.warning(
                    "heartbeat of %s timed out (phi %.1f > %.1f)",
                    resource_id,
                    target.detector.phi(),
                    self._threshold,
                )
                del self._targets[resource_id]
                self._listener.notify_heartbeat_timeout(resource_id)
                continue
            try:
                target.request()
            except Exception:  # a request that cannot be sent counts as a missed heartbeat
                logger.debug("heartbeat request to %s failed", resource_id, exc_info=True)
        self._schedule(self._tick, self.interval)
