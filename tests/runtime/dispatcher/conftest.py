"""Fixtures of the Dispatcher tests under high availability (a real ZooKeeper:
``tests.runtime.highavailability.ha_processes``)."""

from tests.runtime.highavailability.ha_processes import (  # noqa: F401  (fixtures)
    jobmanagers,
    observer,
)
