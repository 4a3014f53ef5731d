"""What a Millrace process can honestly say about itself in place of Flink's JVM metrics.

Flink's ``Status.JVM.*`` metrics describe the JVM; a Millrace process is a CPython process
(plus, in a TaskManager, the JVM that PySpark starts, which is not measured here):

* ``Status.JVM.Memory.Heap.Used``: the resident set size (RSS) of the Python process, bytes
  (``/proc/self/statm``; the peak RSS from ``getrusage`` where ``/proc`` is missing);
* ``Status.JVM.CPU.Time``: CPU time of the Python process (user + system), ns (Flink's unit);
* ``Status.JVM.Threads.Count``: live Python threads.
"""

from __future__ import annotations

import os
import resource
import sys
import threading
from dataclasses import dataclass

__all__ = ["ProcessMetrics", "process_metrics"]

_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


@dataclass(frozen=True)
class ProcessMetrics:
    """Attributes: rss_bytes, cpu_time_ns, threads (see the module docstring)."""

    rss_bytes: int
    cpu_time_ns: int
    threads: int


def process_metrics() -> ProcessMetrics:
    """This process's figures now. Any thread."""
    times = os.times()
    return ProcessMetrics(
        rss_bytes=_rss_bytes(),
        cpu_time_ns=round((times.user + times.system) * 1e9),
        threads=threading.active_count(),
    )


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * _PAGE_BYTES
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024
