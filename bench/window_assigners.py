"""Sliding and session windows against the tumbling flight-delays job, on the embedded cluster.

One invocation, one SparkSession, the same flights (``data/flights``, ``make data``) and
parallelism: ``examples/flight_delays.py`` (tumbling 1-day windows, partial aggregates),
``examples/sliding_delays.py`` (1-day windows every 6 h: four windows a record, partial
aggregates) and ``examples/sessions.py`` (sessions per aircraft, gap 4 h, with a
count_distinct: records buffered and sessions merged at every firing). Each runs once to warm
up, then ``--runs`` times in turn; the script prints each job's median ``env.execute`` wall
time and its ratio to the tumbling job's.

Usage: ``.venv/bin/python bench/window_assigners.py [--runs 3] [--parallelism 2]``
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import tempfile
import time
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
JOBS = ("flight_delays", "sliding_delays", "sessions")


def load_example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(spark: object, name: str, parallelism: int) -> float:
    """Seconds of ``env.execute`` of the example ``name``."""
    from millrace import Configuration, StreamExecutionEnvironment

    with tempfile.TemporaryDirectory() as tmp:
        conf = Configuration(
            {
                "parallelism.default": parallelism,
                "io.tmp.dirs": f"{tmp}/tmp",
                "pipeline.side-output.dir": f"{tmp}/side",
            }
        )
        env = StreamExecutionEnvironment(conf, spark)
        load_example(name).build(env, str(ROOT / "data" / "flights"), f"{tmp}/out")
        started = time.perf_counter()
        env.execute(name)
        return time.perf_counter() - started


def main() -> None:
    from millrace import Configuration
    from millrace.spark.spark_session import create_spark_session

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--parallelism", type=int, default=2)
    args = parser.parse_args()
    spark = create_spark_session(Configuration({"spark.master": "local[2]"}), app_name="bench")
    for name in JOBS:  # warm-up
        run(spark, name, args.parallelism)
    times: dict[str, list[float]] = {name: [] for name in JOBS}
    for _ in range(args.runs):
        for name in JOBS:
            times[name].append(run(spark, name, args.parallelism))
    base = statistics.median(times["flight_delays"])
    for name in JOBS:
        median = statistics.median(times[name])
        runs = ", ".join(f"{t:.1f}" for t in times[name])
        print(f"{name:15s} median {median:6.1f} s  ratio {median / base:4.2f}  runs: {runs}")


if __name__ == "__main__":
    main()
