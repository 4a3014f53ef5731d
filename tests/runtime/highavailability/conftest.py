"""Fixtures of the high-availability tests (``tests.runtime.highavailability.ha_processes``)."""

from tests.runtime.highavailability.ha_processes import (  # noqa: F401  (fixtures)
    jobmanagers,
    observer,
)
