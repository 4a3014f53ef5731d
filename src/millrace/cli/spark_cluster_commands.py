"""``millrace spark-cluster start|stop``: a Spark standalone cluster on this machine for the data
plane (issue 15), from the jars pyspark ships: no Spark download.

``spark-cluster start`` starts a :class:`SparkStandaloneCluster` (a Master and ``--workers``
Workers, with ``--connect-port`` a Spark Connect server too, each in a session of its own: they
outlive the command) with its state, logs and PID files in ``--dir`` (default
``<io.tmp.dirs>/spark-cluster``), waits until the Master lists every Worker ALIVE (and the
Connect server listens) and prints the settings that run Millrace's Spark sessions on it. Started
again while it runs, it says so and exits 0. ``spark-cluster stop`` stops the Connect server,
the Workers (with the executors they launched) and the Master of that directory by their PIDs:
SIGTERM, then SIGKILL after a grace period; with nothing running it says so and exits 0. Exit
codes: 0 success, 1 the cluster cannot start or stop, 2 bad configuration or usage.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from millrace.cli.cli_configuration import ConfigFile, DynamicProperties, load_configuration_or_exit
from millrace.config import ClusterOptions
from millrace.errors import LocalServerError
from millrace.spark.standalone_cluster import SparkStandaloneCluster

__all__ = ["spark_cluster_app"]

spark_cluster_app = typer.Typer(
    no_args_is_help=True,
    help="Start or stop a Spark standalone cluster (master and workers) on this machine.",
)

Directory = Annotated[
    Path | None,
    typer.Option(
        "--dir",
        file_okay=False,
        help="The cluster's directory (state, logs, pid files); default "
        "<io.tmp.dirs>/spark-cluster.",
    ),
]


@spark_cluster_app.command("start")
def spark_cluster_start(
    workers: Annotated[int, typer.Option("--workers", min=1, help="Spark workers.")] = 2,
    cores: Annotated[int, typer.Option("--cores", min=1, help="Cores of each worker.")] = 1,
    memory: Annotated[
        str, typer.Option("--memory", help="Executor memory each worker offers, e.g. 2g.")
    ] = "1g",
    host: Annotated[str, typer.Option("--host", help="Address every process binds.")] = (
        "127.0.0.1"
    ),
    port: Annotated[
        int, typer.Option("--port", min=1, max=65535, help="The master's port.")
    ] = 7077,
    webui_port: Annotated[
        int, typer.Option("--webui-port", min=1, max=65535, help="The master's web UI port.")
    ] = 8080,
    connect_port: Annotated[
        int,
        typer.Option(
            "--connect-port",
            min=0,
            max=65535,
            help="Also start a Spark Connect server on this port (Spark's is 15002); 0: none.",
        ),
    ] = 0,
    directory: Directory = None,
    dynamic: DynamicProperties = [],  # noqa: B006 (typer reads the default)
    config_file: ConfigFile = None,
) -> None:
    """Start a Spark standalone master and its workers (and a Connect server) in the
    background."""
    console = Console()
    where = _directory(console, directory, dynamic, config_file)
    running = SparkStandaloneCluster.running_in(where)
    if running is not None:
        console.print(f"a Spark cluster already runs at {running.master_url} ({where})")
        _print_settings(console, running)
        return
    cluster = SparkStandaloneCluster(
        where,
        workers=workers,
        cores=cores,
        memory=memory,
        host=host,
        port=port,
        webui_port=webui_port,
        connect_port=connect_port or None,
    )
    try:
        with console.status(f"Starting a Spark master and {workers} workers..."):
            cluster.start()
    except LocalServerError as error:
        _fail(console, "start", error)
    console.print(
        f"Spark master (pid {cluster.pid('master')}) at {cluster.master_url}, web UI "
        f"http://{host}:{webui_port}, {workers} workers x {cores} cores; logs in {where}",
        soft_wrap=True,
    )
    if cluster.connect_url is not None:
        console.print(
            f"Spark Connect server (pid {cluster.pid('connect')}) at {cluster.connect_url}",
            soft_wrap=True,
        )
    _print_settings(console, cluster)


@spark_cluster_app.command("stop")
def spark_cluster_stop(
    directory: Directory = None,
    dynamic: DynamicProperties = [],  # noqa: B006
    config_file: ConfigFile = None,
) -> None:
    """Stop the Spark cluster of the directory (workers, their executors, the master)."""
    console = Console()
    where = _directory(console, directory, dynamic, config_file)
    cluster = SparkStandaloneCluster.running_in(where)
    if cluster is None:
        console.print(f"no Spark cluster runs in {where}")
        return
    try:
        cluster.stop()
    except LocalServerError as error:
        _fail(console, "stop", error)
    console.print(f"stopped the Spark cluster at {cluster.master_url}")


def _fail(console: Console, action: str, error: LocalServerError) -> NoReturn:
    console.print(
        f"[red]cannot {action} the Spark cluster:[/] {escape(str(error))}",
        highlight=False,
        soft_wrap=True,
    )
    raise typer.Exit(1) from None


def _directory(
    console: Console, directory: Path | None, dynamic: list[str], config_file: Path | None
) -> Path:
    """``directory``, else ``<io.tmp.dirs>/spark-cluster`` of the configuration; absolute."""
    if directory is not None:
        return directory.resolve()
    conf = load_configuration_or_exit(console, config_file, dynamic)
    return (Path(conf.get(ClusterOptions.TMP_DIR)) / "spark-cluster").resolve()


def _print_settings(console: Console, cluster: SparkStandaloneCluster) -> None:
    if cluster.connect_url is not None:  # the server's application holds every core
        console.print("Run Millrace's Spark sessions through its Spark Connect server with:")
        console.print(f"  -D spark.remote={cluster.connect_url}", highlight=False, soft_wrap=True)
        return
    console.print("Run Millrace's Spark sessions on it with:")
    console.print(
        f"  -D spark.master={cluster.master_url} -D spark.cores.max=1 "
        "-D spark.executor.memory=512m",
        highlight=False,
        soft_wrap=True,
    )
