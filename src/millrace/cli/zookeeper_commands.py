"""``millrace zookeeper start|stop``: a standalone ZooKeeper server for high availability on
this machine (Flink's ``start-zookeeper-quorum.sh``, for a quorum of one).

``zookeeper start`` runs a :class:`LocalZooKeeper` in the background (its own session: it
outlives the command) with its data, log and PID file in ``--data-dir`` (default
``<io.tmp.dirs>/zookeeper``), waits until it serves and prints the settings that point a cluster
at it. Started again while it runs, it says so and exits 0. ``zookeeper stop`` stops the server
of that directory by the PID in its PID file (only if that PID still runs the directory's
``QuorumPeerMain``): SIGTERM, then SIGKILL after a grace period; with no server running it says
so and exits 0. The znodes stay in the directory for the next start. Exit codes: 0 success,
1 the server cannot start or stop, 2 bad configuration or usage.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from millrace.cli.cli_configuration import ConfigFile, DynamicProperties, load_configuration_or_exit
from millrace.config import ClusterOptions, HighAvailabilityMode, HighAvailabilityOptions
from millrace.errors import LocalServerError
from millrace.runtime.highavailability.local_zookeeper import DEFAULT_JAR_DIR, LocalZooKeeper

__all__ = ["zookeeper_app"]

zookeeper_app = typer.Typer(
    no_args_is_help=True, help="Start or stop a local ZooKeeper server for high availability."
)

DataDir = Annotated[
    Path | None,
    typer.Option(
        "--data-dir",
        file_okay=False,
        help="The server's directory (zoo.cfg, data, log, pid file); default "
        "<io.tmp.dirs>/zookeeper.",
    ),
]


@zookeeper_app.command("start")
def zookeeper_start(
    port: Annotated[
        int, typer.Option("--port", min=1, max=65535, help="Client port (on 127.0.0.1).")
    ] = 2181,
    data_dir: DataDir = None,
    jar_dir: Annotated[
        Path, typer.Option("--jar-dir", file_okay=False, help="Directory of ZooKeeper's jars.")
    ] = DEFAULT_JAR_DIR,
    dynamic: DynamicProperties = [],  # noqa: B006 (typer reads the default)
    config_file: ConfigFile = None,
) -> None:
    """Start a standalone ZooKeeper server in the background."""
    console = Console()
    directory = _directory(console, data_dir, dynamic, config_file)
    running = LocalZooKeeper.running_in(directory)
    if running is not None:
        elsewhere = f" (not on port {port})" if running.port != port else ""
        console.print(
            f"ZooKeeper already runs (pid {running.pid}) at {running.connect_string}"
            f"{elsewhere}, data in {directory}",
            soft_wrap=True,
        )
        _print_settings(console, running)
        return
    server = LocalZooKeeper(directory, port=port, jar_dir=jar_dir)
    try:
        with console.status(f"Starting ZooKeeper on {server.connect_string}..."):
            server.start()
    except LocalServerError as error:
        console.print(
            f"[red]cannot start ZooKeeper:[/] {escape(str(error))}", highlight=False, soft_wrap=True
        )
        raise typer.Exit(1) from None
    console.print(
        f"ZooKeeper (pid {server.pid}) at {server.connect_string}, data in {directory}, "
        f"log {server.log_file}",
        soft_wrap=True,
    )
    _print_settings(console, server)


@zookeeper_app.command("stop")
def zookeeper_stop(
    data_dir: DataDir = None,
    dynamic: DynamicProperties = [],  # noqa: B006
    config_file: ConfigFile = None,
) -> None:
    """Stop the ZooKeeper server of the data directory (its znodes are kept)."""
    console = Console()
    directory = _directory(console, data_dir, dynamic, config_file)
    server = LocalZooKeeper.running_in(directory)
    if server is None:
        console.print(f"no ZooKeeper runs in {directory}")
        return
    pid = server.pid
    try:
        server.stop()
    except LocalServerError as error:
        console.print(
            f"[red]cannot stop ZooKeeper:[/] {escape(str(error))}", highlight=False, soft_wrap=True
        )
        raise typer.Exit(1) from None
    console.print(f"stopped ZooKeeper (pid {pid}) at {server.connect_string}")


def _directory(
    console: Console, data_dir: Path | None, dynamic: list[str], config_file: Path | None
) -> Path:
    """``data_dir``, else ``<io.tmp.dirs>/zookeeper`` of the configuration; absolute."""
    if data_dir is not None:
        return data_dir.resolve()
    conf = load_configuration_or_exit(console, config_file, dynamic)
    return (Path(conf.get(ClusterOptions.TMP_DIR)) / "zookeeper").resolve()


def _print_settings(console: Console, server: LocalZooKeeper) -> None:
    console.print("Point a cluster at it with:")
    console.print(
        f"  -D {HighAvailabilityOptions.TYPE.key}={HighAvailabilityMode.ZOOKEEPER.value} "
        f"-D {HighAvailabilityOptions.ZOOKEEPER_QUORUM.key}={server.connect_string}",
        highlight=False,
        soft_wrap=True,
    )
