"""Phi-accrual failure detector (Hayashibara et al. 2004; seed 000's DeathWatch via Akka).

Instead of a yes/no timeout, the detector keeps the recent inter-arrival times of heartbeats and
reports phi = -log10(P(a heartbeat arrives later than now)), modelling the intervals as a normal
distribution whose mean is shifted by the acceptable pause. A target is considered dead when phi
exceeds the threshold. Defaults follow seed 000: interval = ask timeout / 10, acceptable pause
= ask timeout, threshold 12.
"""

from __future__ import annotations

import math
from collections import deque

from millrace.clock import Clock

__all__ = ["PhiAccrualFailureDetector"]


class PhiAccrualFailureDetector:
    """Suspicion level of one monitored target.

    Args:
        clock: Time source (seconds).
        threshold: phi above which the target is considered unavailable (> 0).
        acceptable_pause: Heartbeat pause tolerated without suspicion, seconds (>= 0).
        first_heartbeat_estimate: Expected interval before any sample, seconds (> 0).
        max_sample_size: Inter-arrival times kept (>= 1).
        min_std_deviation: Floor of the standard deviation, seconds (> 0), so that very regular
            heartbeats do not make phi jump at the first delay.

    Threading:
        Not thread-safe; owned by one endpoint's main thread.
    """

    def __init__(
        self,
        clock: Clock,
        threshold: float,
        acceptable_pause: float,
        first_heartbeat_estimate: float,
        max_sample_size: int = 200,
        min_std_deviation: float | None = None,
    ) -> None:
        if threshold <= 0 or acceptable_pause < 0 or first_heartbeat_estimate <= 0:
            raise ValueError("threshold and first estimate must be > 0, pause >= 0")
        self._clock = clock
        self.threshold = threshold
        self._pause = acceptable_pause
        self._min_std = (
            min_std_deviation
            if min_std_deviation is not None
            else max(first_heartbeat_estimate / 10, 0.001)
        )
        self._intervals: deque[float] = deque(maxlen=max_sample_size)
        # Seed with a guess so phi means something before two heartbeats arrived.
        std = first_heartbeat_estimate / 4
        self._intervals.extend((first_heartbeat_estimate - std, first_heartbeat_estimate + std))
        self._last: float | None = None

    def heartbeat(self) -> None:
        """Record a heartbeat arriving now."""
        now = self._clock.monotonic()
        if self._last is not None:
            self._intervals.append(now - self._last)
        self._last = now

    def phi(self) -> float:
        """Current suspicion; 0 before the first heartbeat."""
        if self._last is None:
            return 0.0
        elapsed = self._clock.monotonic() - self._last
        n = len(self._intervals)
        mean = sum(self._intervals) / n
        variance = sum((x - mean) ** 2 for x in self._intervals) / n
        std = max(math.sqrt(variance), self._min_std)
        return _phi(elapsed, mean + self._pause, std)

    def is_available(self) -> bool:
        """Whether phi is below the threshold."""
        return self.phi() < self.threshold


def _phi(elapsed: float, mean: float, std: float) -> float:
    """-log10 of the probability that a heartbeat comes later than ``elapsed``.

    Uses the logistic approximation of the normal CDF that Akka's detector uses,
    P(later) = e / (1 + e) with e = exp(-y (1.5976 + 0.070566 y^2)), y = (elapsed - mean) / std,
    computed in log space so that neither tail overflows.
    """
    y = (elapsed - mean) / std
    z = -y * (1.5976 + 0.070566 * y * y)  # ln(e)
    minus_ln_p = math.log1p(math.exp(-z)) if z > 0 else math.log1p(math.exp(z)) - z
    return minus_ln_p / math.log(10)
