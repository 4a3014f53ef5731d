"""The summary ``millrace run`` prints for each job it ran."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from millrace.config import Configuration, PipelineOptions
from millrace.runtime.executiongraph import IOMetrics
from millrace.runtime.job_result import JobResult, JobResultSuccess
from millrace.runtime.jobgraph import JobGraph, OperatorKind

__all__ = ["print_summary", "time_shares"]


def time_shares(metrics: IOMetrics) -> str:
    """``"; busy 58%, idle 40%, back-pressured 2%"``: how the vertex's subtasks spent their
    RUNNING time (Flink's busy, idle and back-pressured time, summed over the subtasks); ""
    before any was measured."""
    total = metrics.busy_ms + metrics.idle_ms + metrics.backpressured_ms
    if total <= 0:
        return ""
    busy, idle, pressed = (
        metrics.busy_ms / total,
        metrics.idle_ms / total,
        metrics.backpressured_ms / total,
    )
    return f"; busy {busy:.0%}, idle {idle:.0%}, back-pressured {pressed:.0%}"


def print_summary(
    console: Console, job_graph: JobGraph, result: JobResult, conf: Configuration
) -> None:
    """Status, duration, per-vertex counters and time shares, and rows written of one job."""
    if not isinstance(result, JobResultSuccess):
        console.print(
            f"[red]{job_graph.name} {result.status.name}[/] after "
            f"{result.duration:.1f} s: {result.root_cause}"
        )
        return
    restarts = result.details.restarts
    console.print(
        f"[bold green]{job_graph.name} FINISHED[/] in {result.duration:.1f} s "
        f"(job {job_graph.job_id}" + (f", {restarts} restarts)" if restarts else ")")
    )
    for i, (vertex, details) in enumerate(
        zip(job_graph.vertices, result.details.vertices, strict=True), start=1
    ):
        m = result.accumulators[details.name]
        console.print(
            f"  [{i}] {vertex.name.replace(' -> ', ' → ')} (parallelism {vertex.parallelism})",
            highlight=False,
            markup=False,
        )
        console.print(
            f"      records in {m.records_in:,}, out {m.records_out:,}; dead letters "
            f"{m.dead_letters:,}, late {m.late_records:,}; Spark jobs {m.bundles:,}"
            + time_shares(m),
            highlight=False,
        )
    for vertex in job_graph.vertices:
        for op in vertex.operators:
            if op.kind is OperatorKind.SINK:
                rows = result.accumulators[vertex.name].records_out
                console.print(f"rows written: {rows:,} -> {op.name.removeprefix('Sink: ')}")
    dead = sum(m.dead_letters for m in result.accumulators.values())
    late = sum(m.late_records for m in result.accumulators.values())
    if dead or late:
        console.print(
            f"side outputs: {dead:,} dead letters, {late:,} late records under "
            f"{Path(conf.get(PipelineOptions.SIDE_OUTPUT_DIR)) / job_graph.name}"
        )
