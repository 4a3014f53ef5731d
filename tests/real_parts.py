"""What a test does when a real part it needs (Kafka, PostgreSQL, ZooKeeper, a Spark master,
Chromium, ...) cannot start: it fails, naming the part and why.

A test suite that quietly skips the tests of a missing server proves nothing about the
guarantees those tests guard, and its summary line looks green. So :func:`part_unavailable` fails
the test unless skipping was asked for with ``MILLRACE_TEST_ALLOW_SKIP=1`` (a laptop without
PostgreSQL; ``make test-quick`` sets it, since it runs no test that needs such a part). This is
the only place in ``tests/`` allowed to skip (``tests/test_suite_hygiene.py`` checks).
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

__all__ = ["ALLOW_SKIP", "part_unavailable", "skipping_allowed"]

ALLOW_SKIP = "MILLRACE_TEST_ALLOW_SKIP"


def skipping_allowed() -> bool:
    """Whether ``MILLRACE_TEST_ALLOW_SKIP=1`` is set."""
    return os.environ.get(ALLOW_SKIP, "") == "1"


def part_unavailable(part: str, reason: object) -> NoReturn:
    """Fail (or, when allowed, skip) the current test because ``part`` cannot start.

    Args:
        part: The real part, as a user would name it ("PostgreSQL", "the Kafka broker").
        reason: Why it cannot start (the error, with its output).

    Raises:
        pytest.fail.Exception: Always, unless ``MILLRACE_TEST_ALLOW_SKIP=1``.
        pytest.skip.Exception: With ``MILLRACE_TEST_ALLOW_SKIP=1``.
    """
    message = f"{part} is needed by this test and cannot start: {reason}"
    if skipping_allowed():
        pytest.skip(message)
    pytest.fail(f"{message} (set {ALLOW_SKIP}=1 to skip such tests instead)", pytrace=False)
