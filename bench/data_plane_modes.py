"""The data plane's modes: the flight-delays job on local Spark, on a Spark standalone cluster
and through Spark Connect.

One invocation starts a Spark standalone cluster on this machine (``SparkStandaloneCluster``:
a master and ``--workers`` workers of ``--cores`` cores, from the jars pyspark ships), then runs,
for each mode, one child process holding one SparkSession (a process can hold only one
SparkContext): ``local`` (``spark.master=local[*]``, the default) and ``standalone``
(``spark.master=spark://...``, executors on the workers); then the cluster again with a Spark
Connect server, the only application on the workers, and ``connect``
(``spark.remote=sc://...``: no JVM in the child, its plans run in the server). In each child the
bounded
flight-delays job (``examples/flight_delays.py``) runs on an embedded cluster in BATCH and in
STREAMING mode, once to warm up and then ``--runs`` times alternately, and the fixed cost of a
Spark job (one ``toArrow`` of a one-row DataFrame, 20 times) is measured: that is the floor of
each bundle's cost in the mode. The script prints the medians and the ratio of each mode to
local Spark (the peer, same invocation).

Usage: ``.venv/bin/python bench/data_plane_modes.py [--runs 5] [--parallelism 1] [--workers 2]
[--cores 1]``
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODES = ("local", "standalone", "connect")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--parallelism", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cores", type=int, default=1)
    parser.add_argument("--input", default=str(ROOT / "data" / "flights"))
    parser.add_argument("--child", help=argparse.SUPPRESS)  # internal: run one mode, print JSON
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(_measure(args.child, args)))
        return

    from millrace.spark.standalone_cluster import SparkStandaloneCluster

    work = Path(tempfile.mkdtemp(prefix="millrace-bench-modes-"))
    results: dict[str, dict[str, list[float]]] = {}
    shape = {"workers": args.workers, "cores": args.cores, "memory": "1g"}
    with SparkStandaloneCluster(work / "spark-cluster", **shape) as cluster:
        results["local"] = _child("local[*]", args)
        results["standalone"] = _child(cluster.master_url, args)
    # the Connect server takes every core of the workers: a cluster of its own
    with SparkStandaloneCluster(
        work / "spark-connect", connect_port=_free_port(), **shape
    ) as cluster:
        assert cluster.connect_url is not None
        results["connect"] = _child(cluster.connect_url, args)
    _report(results, args)


def _child(where: str, args: argparse.Namespace) -> dict[str, list[float]]:
    """One mode measured in a child process: its wall times (s) by contender."""
    command = [sys.executable, __file__, "--child", where, "--runs", str(args.runs)]
    command += ["--parallelism", str(args.parallelism), "--input", args.input]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"{where} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _measure(master: str, args: argparse.Namespace) -> dict[str, list[float]]:
    """Run the contenders of one mode in this process; wall times in seconds."""
    import importlib.util

    from millrace import Configuration, StreamExecutionEnvironment
    from millrace.spark.spark_session import create_spark_session, stop_spark_session

    spec = importlib.util.spec_from_file_location("fd", ROOT / "examples" / "flight_delays.py")
    assert spec and spec.loader
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    work = Path(tempfile.mkdtemp(prefix="millrace-bench-mode-"))
    settings = {
        "parallelism.default": args.parallelism,
        "io.tmp.dirs": str(work / "tmp"),
        "spark.executor.memory": "512m",
        **({"spark.remote": master} if master.startswith("sc://") else {"spark.master": master}),
    }
    conf = Configuration(settings)
    started = time.perf_counter()
    spark = create_spark_session(conf, app_name="bench-data-plane-modes")
    times: dict[str, list[float]] = {"spark start": [time.perf_counter() - started]}

    def job(mode: str) -> float:
        env = StreamExecutionEnvironment(conf, spark).set_runtime_mode(mode)
        example.build(env, args.input, str(work / f"out-{mode}"))
        t0 = time.perf_counter()
        env.execute("flight-delays")
        return time.perf_counter() - t0

    def spark_job() -> float:
        t0 = time.perf_counter()
        spark.range(1).toArrow()
        return time.perf_counter() - t0

    contenders = {"BATCH": lambda: job("BATCH"), "STREAMING": lambda: job("STREAMING")}
    for run in contenders.values():
        run()  # warm-up
    spark_job()
    for _ in range(args.runs):
        for name, run in contenders.items():
            times.setdefault(name, []).append(run())
    times["one Spark job"] = [spark_job() for _ in range(20)]
    stop_spark_session(spark)
    return times


def _report(results: dict[str, dict[str, list[float]]], args: argparse.Namespace) -> None:
    print(
        f"flight delays (336,776 rows), parallelism {args.parallelism}, {args.runs} runs after "
        f"warm-up; Spark standalone: {args.workers} workers x {args.cores} cores"
    )
    names = ["BATCH", "STREAMING", "one Spark job", "spark start"]
    header = "".join(f"{m + ' median s':>22}" for m in MODES)
    ratios = "".join(f"{m + '/local':>18}" for m in MODES[1:])
    print(f"{'contender':<16}{header}{ratios}")
    for name in names:
        medians = [statistics.median(results[m][name]) for m in MODES]
        line = "".join(f"{v:>22.3f}" for v in medians)
        line += "".join(f"{v / medians[0]:>17.2f}x" for v in medians[1:])
        print(f"{name:<16}{line}")


if __name__ == "__main__":
    main()
