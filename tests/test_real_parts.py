"""A full run cannot turn green with real parts skipped (``tests/real_parts.py``).

Each check runs pytest in a subprocess on the probes below (functions named ``probe_*``, which
pytest collects only when asked with ``-o python_functions=probe_*``, so the normal run never
sees them), with this repository's ``tests/conftest.py``, as ``make test`` runs it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.real_parts import part_unavailable

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow  # starts pytest processes


def probe_a_part_that_cannot_start() -> None:
    part_unavailable("PostgreSQL", "initdb: not found")


def probe_a_skip() -> None:
    pytest.skip("a skip outside tests/real_parts.py")  # what the run's end must catch


def probe_a_pass() -> None:
    assert True


def run_probe(
    name: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            "-o",
            "python_functions=probe_*",
            f"tests/test_real_parts.py::{name}",
            *args,
        ],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_part_that_cannot_start_fails_its_test_even_with_the_old_environment_switch() -> None:
    done = run_probe("probe_a_part_that_cannot_start", env={"MILLRACE_TEST_ALLOW_SKIP": "1"})
    assert done.returncode == 1, done.stdout
    assert "1 failed" in done.stdout
    assert "PostgreSQL is needed by this test and cannot start: initdb: not found" in done.stdout
    assert "MILLRACE_TEST_ALLOW_SKIP is ignored" in done.stdout


def test_allow_skip_on_the_command_line_skips_it_and_the_run_passes() -> None:
    done = run_probe("probe_a_part_that_cannot_start", "--allow-skip")
    assert done.returncode == 0, done.stdout
    assert "1 skipped" in done.stdout


def test_a_run_that_skipped_anything_fails_without_allow_skip() -> None:
    done = run_probe("probe_a_skip")
    assert done.returncode == 1, done.stdout
    assert "1 skipped" in done.stdout
    assert (
        "1 test(s) skipped without --allow-skip: tests/test_real_parts.py::probe_a_skip"
        in done.stdout
    )


def test_a_run_without_skips_passes() -> None:
    done = run_probe("probe_a_pass")
    assert done.returncode == 0, done.stdout
    assert "1 passed" in done.stdout
