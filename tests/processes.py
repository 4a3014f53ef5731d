"""Helpers for tests that run ``millrace`` commands as an operator would and look at the
processes they leave behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

__all__ = ["CLI_WAIT", "descendants", "millrace", "running"]

CLI_WAIT = 180.0  # seconds a millrace command may take


def millrace(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``millrace ARGS`` in a process of its own (what it starts outlives it), its output
    captured as text on a 200-column terminal.

    Raises:
        subprocess.TimeoutExpired: If it takes more than ``CLI_WAIT`` s.
    """
    return subprocess.run(
        [sys.executable, "-m", "millrace.cli.main", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=CLI_WAIT,
        env={**os.environ, "COLUMNS": "200"},
    )


def running(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (a stopped process that its parent,
    gone, left for init to reap)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def descendants(pid: int) -> dict[int, str]:
    """Every process below ``pid`` (children, their children, ...) now: PID -> command line
    (arguments joined by spaces)."""
    parents: dict[int, int] = {}
    commands: dict[int, str] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            command = (stat.parent / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        child = int(stat.parent.name)
        parents[child] = parent
        commands[child] = command.replace(b"\0", b" ").decode(errors="replace").strip()
    found: dict[int, str] = {}
    frontier = [pid]
    while frontier:
        current = frontier.pop()
        for child, parent in parents.items():
            if parent == current and child not in found:
                found[child] = commands[child]
                frontier.append(child)
    return found
