"""Bounded jobs, Millrace vs plain PySpark batch: the contest both batch benchmarks run.

Each contender gets its best setting of ``spark.sql.shuffle.partitions`` in the one shared
SparkSession: Millrace its default (1: every subtask's Spark job is small and the subtasks
already run in parallel), the peer both 1 and the number of cores, and the faster of the two
is the peer the ratios are taken against (BRIEF §5: best setting of each). Every contender
runs once to warm the JVM, then ``runs`` times in turn (alternating, so drift in the machine's
load hits them alike); figures are medians.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable
from typing import Any

__all__ = ["PEER_PREFIX", "compete", "report"]

PEER_PREFIX = "spark batch"


def compete(
    spark: Any,
    millrace: dict[str, Callable[[], float]],
    peer: Callable[[], float],
    runs: int,
) -> dict[str, list[float]]:
    """Run every contender ``runs`` times after a warm-up; returns name -> wall times (s).

    Args:
        spark: The shared SparkSession.
        millrace: Millrace contenders (name -> run, returning seconds), run at Millrace's
            default of 1 shuffle partition.
        peer: The plain PySpark job (returns seconds), run at 1 and at ``os.cpu_count()``
            shuffle partitions.
        runs: Timed runs of each contender.
    """
    cores = os.cpu_count() or 1

    def at(partitions: int, run: Callable[[], float]) -> Callable[[], float]:
        def timed() -> float:
            spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
            return run()

        return timed

    contenders = {name: at(1, run) for name, run in millrace.items()}
    for partitions in sorted({1, cores}):
        contenders[f"{PEER_PREFIX} ({partitions} shuffle p.)"] = at(partitions, peer)
    for run in contenders.values():
        run()  # warm-up
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(runs):
        for name, run in contenders.items():
            times[name].append(run())
    return times


def report(times: dict[str, list[float]], work_units: float, unit: str) -> None:
    """Print each contender's median, min and max seconds and ``unit`` per second, then each
    Millrace contender's ratio to the fastest peer setting."""
    medians = {name: statistics.median(values) for name, values in times.items()}
    print(f"{'contender':<30}{'median s':>10}{'min s':>9}{'max s':>9}{unit + '/s':>12}")
    for name, values in times.items():
        rate = work_units / medians[name]
        print(
            f"{name:<30}{medians[name]:>10.2f}{min(values):>9.2f}{max(values):>9.2f}{rate:>12,.1f}"
        )
    peers = {n: m for n, m in medians.items() if n.startswith(PEER_PREFIX)}
    best = min(peers, key=peers.__getitem__)
    for name, median in medians.items():
        if name not in peers:
            print(f"ratio {name} / {best} (time): {median / peers[best]:.2f}x")
