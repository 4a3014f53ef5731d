"""Restart strategies (Flink's names and keys): whether a failed job may run again, and when.

- ``none``: never restart.
- ``fixed-delay``: up to ``restart-strategy.fixed-delay.attempts`` restarts, each after
  ``restart-strategy.fixed-delay.delay``.
- ``exponential-delay``: delays grow from ``initial-backoff`` by ``backoff-multiplier`` up to
  ``max-backoff``; after ``reset-backoff-threshold`` without failure they start over.
- ``failure-rate``: restart after ``delay`` unless more than ``max-failures-per-interval``
  failures fell within ``failure-rate-interval``.

Threading:
    Owned by the JobMaster's main thread. Times are seconds of the JobMaster's clock.
"""

from __future__ import annotations

from collections import deque
from typing import Protocol

from millrace.config import Configuration, FailoverOptions

__all__ = [
    "ExponentialDelayRestartStrategy",
    "FailureRateRestartStrategy",
    "FixedDelayRestartStrategy",
    "NoRestartStrategy",
    "RestartStrategy",
    "restart_strategy_from",
]


class RestartStrategy(Protocol):
    def notify_failure(self, now: float) -> None:
        """A failure happened at ``now`` (seconds)."""
        ...

    def can_restart(self) -> bool:
        """Whether the job may run again after the failures notified so far."""
        ...

    def restart_delay(self) -> float:
        """Seconds to wait before the next restart."""
        ...


class NoRestartStrategy:
    def notify_failure(self, now: float) -> None:
        pass

    def can_restart(self) -> bool:
        return False

    def restart_delay(self) -> float:
        return 0.0

    def __repr__(self) -> str:
        return "NoRestartStrategy"


class FixedDelayRestartStrategy:
    """Up to ``attempts`` restarts, ``delay`` seconds apart."""

    def __init__(self, attempts: int, delay: float) -> None:
        self.attempts = attempts
        self.delay = delay
        self._failures = 0

    def notify_failure(self, now: float) -> None:
        self._failures += 1

    def can_restart(self) -> bool:
        return self._failures <= self.attempts

    def restart_delay(self) -> float:
        return self.delay

    def __repr__(self) -> str:
        return f"FixedDelayRestartStrategy(attempts={self.attempts}, delay={self.delay:g} s)"


class ExponentialDelayRestartStrategy:
    """Unbounded restarts with growing delays; quiet periods reset the backoff."""

    def __init__(
        self, initial: float, maximum: float, multiplier: float, reset_threshold: float
    ) -> None:
        self.initial, self.maximum = initial, maximum
        self.multiplier, self.reset_threshold = multiplier, reset_threshold
        self._delay = 0.0
        self._last_failure: float | None = None

    def notify_failure(self, now: float) -> None:
        if self._last_failure is not None and now - self._last_failure >= self.reset_threshold:
            self._delay = 0.0
        self._delay = (
            self.initial if self._delay == 0 else min(self._delay * self.multiplier, self.maximum)
        )
        self._last_failure = now

    def can_restart(self) -> bool:
        return True

    def restart_delay(self) -> float:
        return self._delay

    def __repr__(self) -> str:
        return (
            f"ExponentialDelayRestartStrategy(initial={self.initial:g} s, "
            f"max={self.maximum:g} s, multiplier={self.multiplier:g})"
        )


class FailureRateRestartStrategy:
    """Restart unless more than ``max_failures`` failures fall within ``interval`` seconds."""

    def __init__(self, max_failures: int, interval: float, delay: float) -> None:
        self.max_failures, self.interval, self.delay = max_failures, interval, delay
        self._failures: deque[float] = deque()
        self._now = 0.0

    def notify_failure(self, now: float) -> None:
        self._failures.append(now)
        self._now = now

    def can_restart(self) -> bool:
        while self._failures and self._failures[0] <= self._now - self.interval:
            self._failures.popleft()
        return len(self._failures) <= self.max_failures

    def restart_delay(self) -> float:
        return self.delay

    def __repr__(self) -> str:
        return (
            f"FailureRateRestartStrategy(max {self.max_failures} per "
            f"{self.interval:g} s, delay={self.delay:g} s)"
        )


def restart_strategy_from(conf: Configuration) -> RestartStrategy:
    """The strategy ``restart-strategy.type`` names, with its settings.

    Raises:
        ConfigError: For an unknown type or an invalid setting.
    """
    kind = conf.get(FailoverOptions.TYPE)
    if kind == "none":
        return NoRestartStrategy()
    if kind == "fixed-delay":
        return FixedDelayRestartStrategy(
            conf.get(FailoverOptions.FIXED_DELAY_ATTEMPTS),
            conf.get(FailoverOptions.FIXED_DELAY_DELAY),
        )
    if kind == "exponential-delay":
        return ExponentialDelayRestartStrategy(
            conf.get(FailoverOptions.EXPONENTIAL_INITIAL),
            conf.get(FailoverOptions.EXPONENTIAL_MAX),
            conf.get(FailoverOptions.EXPONENTIAL_MULTIPLIER),
            conf.get(FailoverOptions.EXPONENTIAL_RESET),
        )
    return FailureRateRestartStrategy(
        conf.get(FailoverOptions.FAILURE_RATE_MAX),
        conf.get(FailoverOptions.FAILURE_RATE_INTERVAL),
        conf.get(FailoverOptions.FAILURE_RATE_DELAY),
    )
