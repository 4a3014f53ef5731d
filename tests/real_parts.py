"""What a test does when a real part it needs (Kafka, PostgreSQL, ZooKeeper, a Spark master,
Chromium, ...) cannot start: it fails, naming the part and why.

A test suite that quietly skips the tests of a missing server proves nothing about the
guarantees those tests guard, and its summary line looks green. So :func:`part_unavailable`
fails the test unless the run was started with pytest's ``--allow-skip`` option (``make test
ALLOW_SKIP=1``: a laptop without PostgreSQL; ``make test-quick`` passes it). An environment
variable inherited from a shell cannot turn skipping on: only the command line of the run can.
And a run without ``--allow-skip`` that skipped anything at all fails at its end
(``tests/conftest.py``, ``pytest_sessionfinish``), so a green run is a run where every test ran.
This is the only place in ``tests/`` allowed to skip (``tests/test_suite_hygiene.py`` checks).
"""

from __future__ import annotations

from typing import NoReturn

import pytest

__all__ = ["ALLOW_SKIP_OPTION", "allow_skipping", "part_unavailable", "skipping_allowed"]

ALLOW_SKIP_OPTION = "--allow-skip"

_allowed = False


def allow_skipping(allowed: bool) -> None:
    """Set whether this run may skip tests; called once by ``pytest_configure``."""
    global _allowed
    _allowed = allowed


def skipping_allowed() -> bool:
    """Whether this run was started with ``--allow-skip``."""
    return _allowed


def part_unavailable(part: str, reason: object) -> NoReturn:
    """Fail (or, when allowed, skip) the current test because ``part`` cannot start.

    Args:
        part: The real part, as a user would name it ("PostgreSQL", "the Kafka broker").
        reason: Why it cannot start (the error, with its output).

    Raises:
        pytest.fail.Exception: Always, unless the run was started with ``--allow-skip``.
        pytest.skip.Exception: With ``--allow-skip``.
    """
    message = f"{part} is needed by this test and cannot start: {reason}"
    if skipping_allowed():
        pytest.skip(message)
    pytest.fail(
        f"{message} (run `make test ALLOW_SKIP=1`, or pytest {ALLOW_SKIP_OPTION}, to skip such "
        "tests instead)",
        pytrace=False,
    )
