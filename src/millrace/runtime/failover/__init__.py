"""Failover: restart strategies deciding whether and when a failed job runs again."""

from millrace.runtime.failover.restart_strategy import (
    ExponentialDelayRestartStrategy,
    FailureRateRestartStrategy,
    FixedDelayRestartStrategy,
    NoRestartStrategy,
    RestartStrategy,
    restart_strategy_from,
)

__all__ = [
    "ExponentialDelayRestartStrategy",
    "FailureRateRestartStrategy",
    "FixedDelayRestartStrategy",
    "NoRestartStrategy",
    "RestartStrategy",
    "restart_strategy_from",
]
