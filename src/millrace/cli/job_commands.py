"""``millrace list``, ``cancel``, ``savepoint``, ``modify`` and ``rescale``: jobs of a standalone
cluster, over RPC."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from concurrent.futures import Future
from typing import Annotated, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from millrace.cli.cli_configuration import (
    ConfigFile,
    DynamicProperties,
    load_configuration_or_exit,
)
from millrace.cli.remote_cluster import RemoteCluster, resolve_jobmanager
from millrace.cli.transform_file import load_transform
from millrace.config import Configuration, RpcOptions
from millrace.errors import ConfigError, MillraceError
from millrace.runtime.dispatcher.dispatcher_gateway import DispatcherGateway
from millrace.runtime.job_result import JobDetails
from millrace.runtime.jobmaster.job_change import JobChangeRequest, JobChangeResult

__all__ = ["cancel", "list_jobs", "modify", "rescale", "savepoint"]

R = TypeVar("R")

_SAVEPOINT_WAIT = 3600.0  # seconds a savepoint may take

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
    with_savepoint: Annotated[
        bool, typer.Option("--savepoint", "-s", help="Take a savepoint first (Flink's cancel -s).")
    ] = False,
    target_directory: Annotated[
        str | None,
        typer.Option("--target-directory", help="Where the savepoint goes (state.savepoints.dir)."),
    ] = None,
    jobmanager: JobManager = None,
    dynamic: DynamicProperties = [],  # noqa: B006
    config_file: ConfigFile = None,
) -> None:
    """Cancel a running job: its tasks stop everywhere and it ends CANCELED."""
    console = Console()
    conf = load_configuration_or_exit(console, config_file, dynamic)
    job = _resolve_job(console, conf, jobmanager, job_id)
    if with_savepoint:
        location = _with_dispatcher(
            console,
            conf,
            jobmanager,
            lambda d: d.trigger_savepoint(
                job.job_id, target_directory, True, timeout=_SAVEPOINT_WAIT
            ),
            _SAVEPOINT_WAIT,
        )
        console.print(f"savepoint of job {job.job_id} at {location}")
    else:
        _with_dispatcher(console, conf, jobmanager, lambda d: d.cancel_job(job.job_id))
    console.print(f"cancelled job {job.job_id} ({job.name})")


def savepoint(
    job_id: Annotated[str, typer.Argument(help="Job id, or a unique prefix of it.")],
    target_directory: Annotated[
        str | None, typer.Argument(help="Where it goes (default state.savepoints.dir).")
    ] = None,
    jobmanager: JobManager = None,
    dynamic: DynamicProperties = [],  # noqa: B006
    config_file: ConfigFile = None,
) -> None:
    """Take a savepoint of a running job; print where it lies (for run --from-savepoint)."""
    console = Console()
    conf = load_configuration_or_exit(console, config_file, dynamic)
    job = _resolve_job(console, conf, jobmanager, job_id)
    location = _with_dispatcher(
        console,
        conf,
        jobmanager,
        lambda d: d.trigger_savepoint(job.job_id, target_directory, False, timeout=_SAVEPOINT_WAIT),
        _SAVEPOINT_WAIT,
    )
    console.print(f"savepoint of job {job.job_id} ({job.name}) at {location}")


def modify(
    job_id: Annotated[str, typer.Argument(help="Job id, or a unique prefix of it.")],
    replace: Annotated[
        str,
        typer.Option(
            "--replace",
            help="NAME=FILE.py:FUNCTION: the chained transform named NAME runs FUNCTION of FILE.",
        ),
    ],
    jobmanager: JobManager = None,
    dynamic: DynamicProperties = [],  # noqa: B006
    config_file: ConfigFile = None,
) -> None:
    """Replace a transform's function in a running job, at a savepoint: records before its
    barrier went through the old function, records after it go through the new one; window and
    keyed state are kept. Prints the downtime."""
    console = Console()
    try:
        name, payload = load_transform(replace)
    except MillraceError as error:
        console.print(f"[red]error:[/] {error}")
        raise typer.Exit(2) from None
    conf = load_configuration_or_exit(console, config_file, dynamic)
    _change(console, conf, jobmanager, job_id, JobChangeRequest(transform=name, payload=payload))


def rescale(
    job_id: Annotated[str, typer.Argument(help="Job id, or a unique prefix of it.")],
    parallelism: Annotated[
        int, typer.Option("--parallelism", "-p", min=1, help="The new parallelism.")
    ],
    vertex: Annotated[
        str | None,
        typer.Option("--vertex", help="Only this vertex (id, id prefix or name); default all."),
    ] = None,
    jobmanager: JobManager = None,
    dynamic: DynamicProperties = [],  # noqa: B006
    config_file: ConfigFile = None,
) -> None:
    """Change the parallelism of a running job at a savepoint (key groups redistributed, state
    kept; Flink's rescaling). Prints the downtime."""
    console = Console()
    conf = load_configuration_or_exit(console, config_file, dynamic)
    request = JobChangeRequest(parallelism=parallelism, vertex=vertex or "")
    _change(console, conf, jobmanager, job_id, request)


def _change(
    console: Console,
    conf: Configuration,
    jobmanager: str | None,
    job_id: str,
    request: JobChangeRequest,
) -> None:
    job = _resolve_job(console, conf, jobmanager, job_id)
    result: JobChangeResult = _with_dispatcher(
        console,
        conf,
        jobmanager,
        lambda d: d.change_job(job.job_id, request, timeout=_SAVEPOINT_WAIT),
        _SAVEPOINT_WAIT,
    )
    console.print(f"job {job.job_id} ({job.name}): {result.change}")
    console.print(f"  from savepoint {result.checkpoint_id} at {result.savepoint}")
    console.print(f"  {result.downtime()}")


def _resolve_job(
    console: Console, conf: Configuration, jobmanager: str | None, job_id: str
) -> JobDetails:
    """The one job whose id starts with ``job_id``; exit 1 otherwise."""
    jobs: list[JobDetails] = _with_dispatcher(console, conf, jobmanager, lambda d: d.list_jobs())
    matches = [j for j in jobs if j.job_id.startswith(job_id)]
    if len(matches) != 1:
        console.print(f"[red]{len(matches)} jobs match {job_id!r}[/]; give more of the id")
        raise typer.Exit(1)
    return matches[0]


def _with_dispatcher(
    console: Console,
    conf: Configuration,
    jobmanager: str | None,
    call: Callable[[DispatcherGateway], Future[R]],
    wait: float | None = None,
) -> R:
    """Run ``call(dispatcher_gateway)`` and wait for its reply (``wait`` s, default the ask
    timeout); exit 1 on failure, 2 on a bad configuration."""
    try:
        address = resolve_jobmanager(conf, jobmanager)
        with RemoteCluster(conf, address) as cluster:
            return call(cluster.dispatcher()).result(wait or conf.get(RpcOptions.ASK_TIMEOUT))
    except (ConfigError, ValueError) as error:
        console.print(f"[red]configuration error:[/] {error}")
        raise typer.Exit(2) from None
    except (MillraceError, TimeoutError) as error:
        console.print(f"[red]error:[/] {error}")
        raise typer.Exit(1) from None
