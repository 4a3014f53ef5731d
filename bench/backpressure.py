"""Flow control with a slow sink (issue 13, seed 001): exchange bytes and memory against time.

A union of two Kafka topics (the flights of 2013 dealt over them, each one partition) into a
sink that sleeps ``--sink-delay`` seconds per part (``tests/integration/channel_jobs.py``), on an
embedded mini-cluster with a real broker (Tansu, as the tests start it), run twice for
``--seconds`` each: with flow control (``taskmanager.network.flow-control.enabled`` true, the
window ``--window`` bundles) and without. Every ``--interval`` seconds it samples the exchange
store's files and bytes (``io.tmp.dirs/jobs/*/exchange``), this process's RSS (the cluster,
its Spark driver's Python side and the tasks all live in it) and the Spark JVM's (from
/proc), the records read by the sources and by the sink, and the sources' back-pressured ms.
Prints one table per run and writes ``docs/images/backpressure.svg`` (matplotlib is not in the
venv: a hand-made SVG).

Usage: ``PYTHONPATH=src .venv/bin/python bench/backpressure.py [--seconds 60]
[--sink-delay 1.0] [--max-records 5000] [--window 4] [--svg docs/images/backpressure.svg]``
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # tests.* hold the broker and the job
    sys.path.insert(0, str(ROOT))

from tests.integration.channel_jobs import (  # noqa: E402
    SlowParquetSink,
    exchange_usage,
    union_job,
    write_topics,
)
from tests.integration.kafka_flights import flight_messages  # noqa: E402
from tests.kafka_broker import start_broker  # noqa: E402

from millrace import Configuration, StreamExecutionEnvironment  # noqa: E402
from millrace.runtime.dispatcher.dispatcher_gateway import DispatcherGateway  # noqa: E402
from millrace.runtime.hardware_description import rss_bytes  # noqa: E402
from millrace.runtime.minicluster import MiniCluster  # noqa: E402
from millrace.spark.spark_session import create_spark_session, stop_spark_session  # noqa: E402
from millrace.spark.spark_task_runtime import SparkTaskRuntime  # noqa: E402

MiB = 1 << 20


@dataclass(frozen=True)
class Sample:
    t: float
    read: int
    sunk: int
    files: int
    exchange_bytes: int
    rss: int
    jvm_rss: int
    back_pressured_ms: int


def jvm_rss(pid: int) -> int:
    """RSS of process ``pid`` (bytes, from /proc), or -1 where there is none."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return -1


def run(
    spark, bootstrap: str, messages, args: argparse.Namespace, flow_control: bool
) -> list[Sample]:  # type: ignore[no-untyped-def]
    jvm_pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    work = Path(tempfile.mkdtemp(prefix="millrace-bp-"))
    try:
        topics = [f"bench-bp-{uuid.uuid4().hex[:8]}-{i}" for i in range(2)]
        write_topics(bootstrap, topics, messages, len(messages))
        conf = Configuration(
            {
                "parallelism.default": 1,
                "minicluster.number-of-taskmanagers": 2,
                "io.tmp.dirs": str(work / "tmp"),
                "execution.checkpointing.interval": "2 s",
                "execution.bundle.max-records": args.max_records,
                "taskmanager.network.flow-control.enabled": flow_control,
                "taskmanager.network.flow-control.max-unacked-bundles": args.window,
                "taskmanager.network.flow-control.ack-request-interval": max(1, args.window // 2),
            }
        )
        env = StreamExecutionEnvironment(conf, spark)
        sink = SlowParquetSink(str(work / "out"), delay=args.sink_delay)
        graph = union_job(env, bootstrap, topics, sink)
        samples: list[Sample] = []
        with MiniCluster(conf, SparkTaskRuntime(conf, given=spark)) as cluster:
            assert cluster.dispatcher is not None
            dispatcher = cluster.dispatcher.get_self_gateway(DispatcherGateway)
            cluster.job_client.submit_job_detached(graph).result(60)
            started = time.monotonic()
            while (t := time.monotonic() - started) < args.seconds:
                details = dispatcher.request_job_details(graph.job_id).result(30)
                sources = [v for v in details.vertices if v.name.startswith("Source")]
                sinks = [v for v in details.vertices if not v.name.startswith("Source")]
                files, size = exchange_usage(work / "tmp")
                samples.append(
                    Sample(
                        t,
                        sum(v.metrics.records_in for v in sources),
                        sum(v.metrics.records_in for v in sinks),
                        files,
                        size,
                        rss_bytes(),
                        jvm_rss(jvm_pid),
                        sum(v.metrics.backpressured_ms for v in sources),
                    )
                )
                time.sleep(args.interval)
            dispatcher.cancel_job(graph.job_id).result(30)
        return samples
    finally:
        shutil.rmtree(work, ignore_errors=True)


def table(name: str, samples: list[Sample], every: float) -> str:
    lines = [
        f"### {name}",
        "",
        "| t (s) | read by sources | read by sink | exchange files | exchange MiB | "
        "Python RSS MiB | JVM RSS MiB | sources back-pressured (s) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    next_t = 0.0
    for s in samples:
        if s.t + 1e-9 < next_t and s is not samples[-1]:
            continue
        next_t = s.t + every
        jvm = f"{s.jvm_rss / MiB:.0f}" if s.jvm_rss >= 0 else "-"
        lines.append(
            f"| {s.t:.0f} | {s.read} | {s.sunk} | {s.files} | {s.exchange_bytes / MiB:.2f} | "
            f"{s.rss / MiB:.0f} | {jvm} | {s.back_pressured_ms / 1000:.1f} |"
        )
    return "\n".join(lines)


def svg(runs: dict[str, list[Sample]], path: Path) -> None:
    """Two panels: exchange MiB and records read by the sources, against time."""
    width, height, pad = 720, 260, 50
    colors = {"flow control on": "#1f77b4", "flow control off": "#d62728"}
    panels = [
        ("exchange store (MiB)", lambda s: s.exchange_bytes / MiB),
        ("records read by the sources", lambda s: float(s.read)),
    ]
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height * len(panels)}" font-family="sans-serif" font-size="12">',
        '<rect width="100%" height="100%" fill="white"/>',
    ]
    t_max = max(s.t for samples in runs.values() for s in samples) or 1.0
    for i, (title, value) in enumerate(panels):
        top = i * height
        v_max = max(value(s) for samples in runs.values() for s in samples) or 1.0
        x0, y0, w, h = pad + 20, top + 30, width - pad - 40, height - 80

        def xy(s: Sample, value=value, v_max=v_max, x0=x0, y0=y0, w=w, h=h) -> str:  # type: ignore[no-untyped-def]
            return f"{x0 + w * s.t / t_max:.1f},{y0 + h - h * value(s) / v_max:.1f}"

        parts.append(f'<text x="{x0}" y="{top + 18}" font-weight="bold">{title}</text>')
        parts.append(
            f'<polyline points="{x0},{y0} {x0},{y0 + h} {x0 + w},{y0 + h}" fill="none" '
            'stroke="black"/>'
        )
        parts.append(f'<text x="{x0 - 5}" y="{y0 + 4}" text-anchor="end">{v_max:,.4g}</text>')
        parts.append(f'<text x="{x0 - 5}" y="{y0 + h}" text-anchor="end">0</text>')
        parts.append(f'<text x="{x0 + w}" y="{y0 + h + 16}" text-anchor="end">{t_max:.0f} s</text>')
        for j, (name, samples) in enumerate(runs.items()):
            points = " ".join(xy(s) for s in samples)
            color = colors.get(name, "black")
            parts.append(
                f'<polyline points="{points}" fill="none" stroke="{color}" stroke-width="2"/>'
            )
            parts.append(f'<text x="{x0 + 10}" y="{y0 + 16 + 14 * j}" fill="{color}">{name}</text>')
    parts.append("</svg>")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(parts) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--sink-delay", type=float, default=1.0)
    parser.add_argument("--max-records", type=int, default=5_000)
    parser.add_argument("--window", type=int, default=4)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--table-every", type=float, default=5.0)
    parser.add_argument("--svg", type=Path, default=ROOT / "docs" / "images" / "backpressure.svg")
    args = parser.parse_args()
    messages = flight_messages(ROOT / "data" / "flights")
    broker = start_broker()
    spark = create_spark_session(Configuration({"spark.master": "local[2]"}), "bench-bp")
    try:
        runs = {
            "flow control on": run(spark, broker.bootstrap_servers, messages, args, True),
            "flow control off": run(spark, broker.bootstrap_servers, messages, args, False),
        }
    finally:
        stop_spark_session(spark)
        broker.close()
    print(
        f"{len(messages)} flights over 2 topics; sink {args.sink_delay} s per part of <= "
        f"{args.max_records} records; window {args.window} bundles; {args.seconds:.0f} s each\n"
    )
    for name, samples in runs.items():
        print(table(name, samples, args.table_every))
        print()
    svg(runs, args.svg)
    print(f"plot: {args.svg}")


if __name__ == "__main__":
    main()
