"""``millrace``: run jobs on an embedded cluster.

``millrace run JOB.py [ARGS...] [-D key=value]... [--config FILE.yaml]`` starts a MiniCluster
(Dispatcher, ResourceManager, TaskManagers, one SparkSession), runs the script with an execution
environment bound to it, shows progress, prints a summary and shuts everything down. Exit codes:
0 success, 1 job or script failure (root cause printed), 2 bad configuration or usage.
"""

from __future__ import annotations

import difflib
import logging
import runpy
import sys
import time
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from millrace.api.stream_execution_environment import clear_context, set_context
from millrace.cli.progress import ProgressExecutor
from millrace.config import ClusterOptions, Configuration, PipelineOptions, all_options
from millrace.errors import ConfigError, JobExecutionError, MillraceError
from millrace.runtime.job_result import JobResultSuccess
from millrace.runtime.jobgraph import OperatorKind
from millrace.runtime.minicluster import MiniCluster

__all__ = ["app"]

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Millrace: Flink's runtime in Python, pipelines on Apache Spark.",
)


@app.callback()
def _main() -> None:
    """Millrace command line."""


def load_configuration(config_file: Path | None, dynamic: list[str]) -> Configuration:
    """Configuration from the YAML file and ``-D key=value`` pairs (later wins), validated.

    Raises:
        ConfigError: For a malformed pair, an unknown type of value or an invalid value.
    """
    conf = Configuration.from_yaml(config_file) if config_file else Configuration()
    conf = conf.with_overrides(Configuration.parse_dynamic_properties(dynamic))
    known = {option.key for option in all_options()}
    for key, value in conf.to_dict().items():
        if key not in known and not key.startswith("spark."):
            close = difflib.get_close_matches(key, sorted(known), n=1)
            hint = f"did you mean {close[0]!r}?" if close else "run `millrace config` for the list"
            raise ConfigError(key, value, f"a known configuration key ({hint})")
    conf.validate()
    return conf


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def run(
    script: Path = typer.Argument(..., exists=True, dir_okay=False, help="The job script."),
    args: list[str] = typer.Argument(None, help="Arguments passed to the script (sys.argv)."),
    dynamic: list[str] = typer.Option([], "-D", help="Configuration key=value (repeatable)."),
    config_file: Path = typer.Option(
        None, "--config", exists=True, dir_okay=False, help="YAML configuration file."
    ),
) -> None:
    """Run JOB.py on an embedded cluster and print a summary."""
    console = Console()
    try:
        conf = load_configuration(config_file, dynamic)
    except ConfigError as error:
        console.print(f"[red]configuration error:[/] {error}")
        raise typer.Exit(2) from None
    log_file = _configure_logging(conf)
    started = time.monotonic()
    cluster = MiniCluster(conf)
    code = 0
    try:
        with console.status("Starting the cluster and Spark..."):
            cluster.start()
            spark = cluster.spark()
        spark_seconds = time.monotonic() - started
        console.print(
            f"Cluster up: {len(cluster.task_executors)} TaskManagers x "
            f"{conf.get(ClusterOptions.NUM_TASK_SLOTS)} slots, Spark "
            f"{spark.version} ({spark_seconds:.1f} s)"
        )
        executor = ProgressExecutor(cluster.job_client, console)
        set_context(conf, spark, executor)
        sys.argv = [str(script), *(args or [])]
        try:
            runpy.run_path(str(script), run_name="__main__")
        except JobExecutionError as error:
            console.print(f"[red]job failed:[/] {error.root_cause}")
            code = 1
        except MillraceError as error:
            console.print(f"[red]error:[/] {error}")
            code = 1
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        except Exception:  # the user's script failed: show its traceback
            console.print_exception(max_frames=8)
            code = 1
        for job_graph, result in executor.runs:
            _print_summary(console, job_graph, result, conf)
    finally:
        clear_context()
        with console.status("Stopping the cluster..."):
            cluster.close()
    total = time.monotonic() - started
    console.print(f"wall time {total:.1f} s (Spark start {spark_seconds:.1f} s); log: {log_file}")
    raise typer.Exit(code)


@app.command("config")
def config_command() -> None:
    """List every configuration key with its default and meaning."""
    console = Console()
    table = Table(title="Millrace configuration (-D key=value or --config FILE.yaml)")
    table.add_column("key", no_wrap=True)
    table.add_column("default", no_wrap=True)
    table.add_column("description")
    for option in all_options():
        default = option.default
        shown = "(derived)" if callable(default) else str(default)
        table.add_row(option.key, shown, option.description)
    console.print(table)
    console.print("Any other spark.* key is passed to the SparkSession.")


def _configure_logging(conf: Configuration) -> Path:
    directory = Path(conf.get(ClusterOptions.TMP_DIR)) / "log"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"millrace-{time.strftime('%Y%m%d-%H%M%S')}.log"
    handler = logging.FileHandler(path)
    handler.setFormatter(
        logging.Formatter("%(asctime)s %(levelname)s [%(threadName)s] %(name)s: %(message)s")
    )
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    for noisy in ("py4j", "fsspec"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    return path


def _print_summary(console: Console, job_graph, result, conf: Configuration) -> None:  # type: ignore[no-untyped-def]
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
            f"{m.dead_letters:,}, late {m.late_records:,}; Spark jobs {m.bundles:,}",
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


if __name__ == "__main__":
    app()
