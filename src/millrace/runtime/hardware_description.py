"""HardwareDescription: the machine a TaskManager runs on, sent when it registers (Flink's
HardwareDescription), and the process's resident memory, sent with its heartbeats.

Read from the OS without extra dependencies: ``os.cpu_count`` and ``sysconf`` page counts
(POSIX), ``/proc/self/statm`` for the resident set (Linux; -1 where unknown).

Threading:
    Any thread.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["HardwareDescription", "hardware", "rss_bytes"]


@dataclass(frozen=True)
class HardwareDescription:
    """The TaskManager's machine.

    Attributes:
        cpu_cores: Logical CPUs.
        physical_memory_bytes: Physical memory (-1: unknown).
        free_memory_bytes: Physical memory available when it registered (-1: unknown).
        managed_memory_bytes: Memory managed by the TaskManager (0: Millrace manages none;
            Spark manages its own).
    """

    cpu_cores: int
    physical_memory_bytes: int
    free_memory_bytes: int
    managed_memory_bytes: int = 0


def _pages(name: str) -> int:
    try:
        return int(os.sysconf(name)) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return -1


def hardware() -> HardwareDescription:
    """This machine's HardwareDescription, now."""
    return HardwareDescription(
        os.cpu_count() or 1, _pages("SC_PHYS_PAGES"), _pages("SC_AVPHYS_PAGES")
    )


def rss_bytes() -> int:
    """This process's resident memory in bytes, or -1 where the OS does not tell (not Linux)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * int(os.sysconf("SC_PAGE_SIZE"))
    except (OSError, ValueError, IndexError):
        return -1
