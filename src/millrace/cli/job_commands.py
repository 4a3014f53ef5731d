"""``millrace list`` and ``millrace cancel``: jobs of a standalone cluster, over RPC."""

from __future__ import annotations

import datetime as dt
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from millrace.cli.cli_configuration import (
    ConfigFile,
    DynamicProperties,
    load_configuration_or_exit,
)
from millrace.cli.remote_cluster import RemoteCluster, resolve_jobmanager
from millrace.config import Configuration, RpcOptions
from millrace.errors import ConfigError, MillraceError
from millrace.runtime.job_result import JobDetails

__all__ = ["cancel", "list_jobs"]

JobManager = Annotated[
    str | None, typer.Option("--jobmanager", "-m", help="HOST:PORT of the JobManager.")
]


def list_jobs(
    jobmanager: JobManager = None,
    dynamic: DynamicProperties = [],  # noqa: B006 (typer reads the default)
    config_file: ConfigFile = None,
) -> None:
    """List the cluster's jobs: running ones and those that ended."""
    console = Console()
    conf = load_configuration_or_exit(console, config_file, dynamic)
    jobs = _with_dispatcher(console, conf, jobmanager, lambda d: d.list_jobs())
    table = Table(title=f"{len(jobs)} jobs")
    for column in ("job id", "name", "status", "started (UTC)", "duration s", "restarts"):
        table.add_column(column)
    for job in sorted(jobs, key=lambda j: j.start_time):
        started = dt.datetime.fromtimestamp(job.start_time, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
        table.add_row(
            job.job_id, job.name, job.status.name, started, f"{job.duration:.1f}", str(job.restarts)
        )
    console.print(table)


def cancel(
    job_id: Annotated[str, typer.Argument(help="Job id, or a unique prefix of it.")],
    jobmanager: JobManager = None,
    dynamic: DynamicProperties = [],  # noqa: B006
    config_file: ConfigFile = None,
) -> None:
    """Cancel a running job: its tasks stop everywhere and it ends CANCELED."""
    console = Console()
    conf = load_configuration_or_exit(console, config_file, dynamic)
    jobs: list[JobDetails] = _with_dispatcher(console, conf, jobmanager, lambda d: d.list_jobs())
    matches = [j for j in jobs if j.job_id.startswith(job_id)]
    if len(matches) != 1:
        console.print(f"[red]{len(matches)} jobs match {job_id!r}[/]; give more of the id")
        raise typer.Exit(1)
    job = matches[0]
    _with_dispatcher(console, conf, jobmanager, lambda d: d.cancel_job(job.job_id))
    console.print(f"cancelled job {job.job_id} ({job.name})")


def _with_dispatcher(console: Console, conf: Configuration, jobmanager: str | None, call):  # type: ignore[no-untyped-def]
    """Run ``call(dispatcher_gateway)`` and wait for its reply; exit 1 on failure."""
    try:
        address = resolve_jobmanager(conf, jobmanager)
        with RemoteCluster(conf, address) as cluster:
            return call(cluster.dispatcher()).result(conf.get(RpcOptions.ASK_TIMEOUT))
    except (ConfigError, ValueError) as error:
        console.print(f"[red]configuration error:[/] {error}")
        raise typer.Exit(2) from None
    except (MillraceError, TimeoutError) as error:
        console.print(f"[red]error:[/] {error}")
        raise typer.Exit(1) from None
