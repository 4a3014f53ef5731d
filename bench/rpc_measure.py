"""The measurement shared by every contender of ``rpc_throughput.py``.

- tell throughput: one sender thread sends N fire-and-forget messages that increment a counter,
  then one ask waits until all were processed; messages per second.
- ask round trip: sequential asks returning their argument; p50 and p99 in microseconds.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

Result = tuple[float, float, float]  # tells/s, ask p50 us, ask p99 us


def percentiles(latencies: list[float]) -> tuple[float, float]:
    """(p50, p99) of ``latencies``; sorts the list in place."""
    latencies.sort()
    return statistics.median(latencies), latencies[int(len(latencies) * 0.99) - 1]


def measure(
    tell: Callable[[int], object],
    flush: Callable[[], object],
    ask: Callable[[int], object],
    tells: int,
    asks: int,
) -> Result:
    """Measure a contender given as blocking calls.

    ``flush`` waits until every tell was processed; ``ask`` makes one round trip.
    """
    for i in range(200):  # warm-up
        ask(i)
    started = time.perf_counter()
    for _ in range(tells):
        tell(1)
    flush()
    throughput = tells / (time.perf_counter() - started)
    latencies = []
    for i in range(asks):
        t0 = time.perf_counter()
        ask(i)
        latencies.append((time.perf_counter() - t0) * 1e6)
    return (throughput, *percentiles(latencies))
