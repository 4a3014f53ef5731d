"""``millrace``: run jobs on an embedded cluster or a standalone one, and operate the latter.

``millrace run JOB.py [ARGS...] [-D key=value]... [--config FILE.yaml]`` starts a MiniCluster
(Dispatcher, ResourceManager, TaskManagers, one SparkSession), runs the script with an execution
environment bound to it, shows progress, prints a summary and shuts everything down. With
``--jobmanager HOST:PORT`` the script's jobs go to that standalone cluster instead (waiting for
them, or not with ``--detached``). ``cluster start|stop``, ``taskmanager start``, ``list`` and
``cancel`` operate a standalone cluster; ``zookeeper start|stop`` runs a local ZooKeeper
server for its high availability; ``spark-cluster start|stop`` a Spark standalone cluster for
its data plane (``-D spark.master=spark://HOST:PORT``). Exit codes: 0 success, 1 job or
script failure (root cause printed), 2 bad configuration or usage.
"""

from __future__ import annotations

import os
import runpy
import sys
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from millrace.api.stream_execution_environment import clear_context, set_context
from millrace.cli.cli_configuration import (
    ConfigFile,
    DynamicProperties,
    configure_logging,
    load_configuration,
    load_configuration_or_exit,
)
from millrace.cli.cluster_commands import cluster_app, jobmanager_app, taskmanager_app
from millrace.cli.job_commands import cancel, list_jobs, modify, rescale, savepoint
from millrace.cli.job_summary import print_summary
from millrace.cli.progress import DetachedExecutor, EmbeddedClusterExecutor, ProgressExecutor
from millrace.cli.remote_cluster import RemoteCluster, resolve_jobmanager
from millrace.cli.spark_cluster_commands import spark_cluster_app
from millrace.cli.zookeeper_commands import zookeeper_app
from millrace.config import (
    CheckpointingOptions,
    Configuration,
    HighAvailabilityMode,
    HighAvailabilityOptions,
    SparkOptions,
    all_options,
)
from millrace.errors import ConfigError, HighAvailabilityError, JobExecutionError, MillraceError
from millrace.runtime.minicluster import MiniCluster

__all__ = ["app", "load_configuration"]

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Millrace: Flink's runtime in Python, pipelines on Apache Spark.",
)
app.add_typer(cluster_app, name="cluster")
app.add_typer(taskmanager_app, name="taskmanager")
app.add_typer(jobmanager_app, name="jobmanager")
app.add_typer(zookeeper_app, name="zookeeper")
app.add_typer(spark_cluster_app, name="spark-cluster")
app.command("list")(list_jobs)
app.command("cancel")(cancel)
app.command("savepoint")(savepoint)
app.command("modify")(modify)
app.command("rescale")(rescale)


@app.callback()
def _main() -> None:
    """Millrace command line."""


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def run(
    script: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="The job script.")],
    args: Annotated[
        list[str] | None, typer.Argument(help="Arguments passed to the script (sys.argv).")
    ] = None,
    dynamic: DynamicProperties = [],  # noqa: B006 (typer reads the default)
    config_file: ConfigFile = None,
    jobmanager: Annotated[
        str | None,
        typer.Option("--jobmanager", "-m", help="HOST:PORT of a standalone cluster's JobManager."),
    ] = None,
    detached: Annotated[
        bool, typer.Option("--detached", "-d", help="Submit and return (needs --jobmanager).")
    ] = False,
    from_savepoint: Annotated[
        str | None,
        typer.Option("--from-savepoint", "-s", help="Start from this savepoint or checkpoint."),
    ] = None,
) -> None:
    """Run JOB.py on an embedded cluster (or a standalone one) and print a summary."""
    console = Console()
    if from_savepoint:
        dynamic = [*dynamic, f"{CheckpointingOptions.SAVEPOINT_PATH.key}={from_savepoint}"]
    conf = load_configuration_or_exit(console, config_file, dynamic)
    # With ZooKeeper HA the cluster's leader is found there: no --jobmanager needed.
    remote = jobmanager is not None or (
        conf.get(HighAvailabilityOptions.TYPE) is HighAvailabilityMode.ZOOKEEPER
    )
    if detached and not remote:
        console.print(
            "[red]--detached needs --jobmanager HOST:PORT[/] or high-availability settings (an "
            "embedded cluster ends with the command)"
        )
        raise typer.Exit(2)
    log_file = configure_logging(conf, "client")
    started = time.monotonic()
    if not remote:
        code, spark_seconds = _run_embedded(console, conf, script, args or [])
    else:
        code, spark_seconds = _run_remote(console, conf, script, args or [], jobmanager, detached)
    total = time.monotonic() - started
    console.print(f"wall time {total:.1f} s (Spark start {spark_seconds:.1f} s); log: {log_file}")
    raise typer.Exit(code)


def _run_embedded(
    console: Console, conf: Configuration, script: Path, args: list[str]
) -> tuple[int, float]:
    from millrace.spark.spark_task_runtime import SparkTaskRuntime

    started = time.monotonic()
    runtime = SparkTaskRuntime(conf)
    cluster = MiniCluster(conf, runtime)
    spark_seconds = 0.0
    try:
        # Spark first: the script's aggregate columns need a SparkContext. The cluster starts
        # with the first job, once its pipeline passed the JobGraph generator's checks.
        with console.status("Starting Spark..."):
            runtime.start()
            spark = runtime.get()
        spark_seconds = time.monotonic() - started
        console.print(f"Spark {spark.version} ({spark_seconds:.1f} s)")
        executor = EmbeddedClusterExecutor(cluster, console)
        set_context(conf, spark, executor)
        code = _run_script(console, script, args)
        for job_graph, result in executor.runs:
            print_summary(console, job_graph, result, conf)
    finally:
        clear_context()
        with console.status("Stopping the cluster..."):
            cluster.close()
    return code, spark_seconds


def _run_remote(
    console: Console,
    conf: Configuration,
    script: Path,
    args: list[str],
    jobmanager: str | None,
    detached: bool,
) -> tuple[int, float]:
    """Build the jobs here and submit them to the cluster. The script's columns are built
    without a JVM: through the cluster's Connect session (``spark.remote``), else as Spark
    Connect expressions that need no session (the TaskManagers plan them in their own Spark,
    ``millrace.spark.connect_planner``)."""
    from millrace.runtime.jobgraph.user_code import add_user_code_root
    from millrace.spark.spark_session import BackgroundSparkSession

    try:
        address = resolve_jobmanager(conf, jobmanager)
        remote = RemoteCluster(conf, address).start()
    except (ConfigError, ValueError) as error:
        console.print(f"[red]configuration error:[/] {error}")
        raise typer.Exit(2) from None
    except HighAvailabilityError as error:
        console.print(f"[red]no JobManager found:[/] {error}")
        raise typer.Exit(1) from None
    started = time.monotonic()
    spark: BackgroundSparkSession | None = None
    session = None
    try:
        if conf.get(SparkOptions.REMOTE):
            spark = BackgroundSparkSession(conf, app_name="millrace-client")
            with console.status("Opening the Spark Connect session..."):
                spark.start()
                session = spark.get()
            spark_seconds = time.monotonic() - started
            shown = f"Spark Connect {session.version} ({spark_seconds:.1f} s)"
        else:
            # pyspark.sql.functions build Connect columns in this process: no JVM here
            os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
            spark_seconds = 0.0
            shown = "no local Spark: columns built as Spark Connect expressions"
        console.print(f"JobManager {address}; {shown}")
        add_user_code_root(str(script.resolve().parent))
        executor = (
            DetachedExecutor(remote.job_client, console)
            if detached
            else ProgressExecutor(remote.job_client, console)
        )
        set_context(conf, session, executor)
        code = _run_script(console, script, args)
        for job_graph, result in getattr(executor, "runs", []):
            print_summary(console, job_graph, result, conf)
    finally:
        clear_context()
        remote.close()
        if spark is not None:
            spark.stop()
    return code, spark_seconds


def _run_script(console: Console, script: Path, args: list[str]) -> int:
    """Run the job script as ``__main__``; returns the exit code it earned."""
    sys.argv = [str(script), *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))  # as `python JOB.py` does
    try:
        runpy.run_path(str(script), run_name="__main__")
    except JobExecutionError as error:
        console.print(f"[red]job failed:[/] {error.root_cause}")
        return 1
    except MillraceError as error:
        console.print(f"[red]error:[/] {error}")
        return 1
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    except Exception:  # the user's script failed: show its traceback
        console.print_exception(max_frames=8)
        return 1
    finally:
        sys.path.pop(0)
    return 0


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
        shown = "(derived)" if callable(default) else str(getattr(default, "value", default))
        table.add_row(option.key, shown, option.description)
    console.print(table)
    console.print("Any other spark.* key is passed to the SparkSession.")


if __name__ == "__main__":
    app()
