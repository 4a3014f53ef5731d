"""Restart strategies: how many restarts, and after which delay."""

from __future__ import annotations

import pytest

from millrace.config import Configuration
from millrace.errors import ConfigError
from millrace.runtime.failover import (
    ExponentialDelayRestartStrategy,
    FailureRateRestartStrategy,
    FixedDelayRestartStrategy,
    NoRestartStrategy,
    restart_strategy_from,
)


def test_none_never_restarts() -> None:
    strategy = NoRestartStrategy()
    strategy.notify_failure(0)
    assert not strategy.can_restart()


def test_fixed_delay_allows_exactly_its_attempts() -> None:
    strategy = FixedDelayRestartStrategy(attempts=2, delay=0.5)
    outcomes = []
    for t in range(3):
        strategy.notify_failure(t)
        outcomes.append(strategy.can_restart())
    assert outcomes == [True, True, False]
    assert strategy.restart_delay() == 0.5


def test_exponential_delay_grows_caps_and_resets() -> None:
    strategy = ExponentialDelayRestartStrategy(1.0, 5.0, 2.0, reset_threshold=100.0)
    delays = []
    for t in range(5):
        strategy.notify_failure(t)
        delays.append(strategy.restart_delay())
    assert delays == [1.0, 2.0, 4.0, 5.0, 5.0]
    strategy.notify_failure(1000.0)  # after a quiet hour: start over
    assert strategy.restart_delay() == 1.0
    assert strategy.can_restart()


def test_failure_rate_counts_failures_within_the_interval() -> None:
    strategy = FailureRateRestartStrategy(max_failures=2, interval=10.0, delay=1.0)
    for t in (0.0, 1.0):
        strategy.notify_failure(t)
        assert strategy.can_restart()
    strategy.notify_failure(2.0)
    assert not strategy.can_restart()  # three within 10 s
    strategy = FailureRateRestartStrategy(max_failures=2, interval=10.0, delay=1.0)
    for t in (0.0, 1.0, 12.0):
        strategy.notify_failure(t)
    assert strategy.can_restart()  # the first two fell out of the window


def test_configuration_selects_the_strategy() -> None:
    conf = Configuration(
        {"restart-strategy.type": "failure-rate", "restart-strategy.failure-rate.delay": "250 ms"}
    )
    strategy = restart_strategy_from(conf)
    assert isinstance(strategy, FailureRateRestartStrategy)
    assert strategy.restart_delay() == 0.25
    assert isinstance(restart_strategy_from(Configuration()), FixedDelayRestartStrategy)


def test_unknown_strategy_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="one of none, fixed-delay"):
        Configuration({"restart-strategy.type": "sometimes"}).validate()
