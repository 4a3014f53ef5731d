"""``millrace cluster start|stop``, ``millrace jobmanager start`` and ``millrace taskmanager
start``: a standalone cluster.

``cluster token`` prints the REST API's bearer token (:func:`rest_token` of the secret).
``cluster start`` runs the JobManager process (Dispatcher, ResourceManager, REST API) in the
background, plus ``--taskmanagers N`` TaskManager processes on this machine, and returns once
they run; ``--foreground`` runs the JobManager in this process instead (for supervisors and
tests). ``taskmanager start`` does the same for one TaskManager. ``cluster stop`` stops, by
their recorded pids, the processes of this machine's cluster directory (TaskManagers first),
with SIGTERM and, after a grace period, SIGKILL.

With ``high-availability.type: zookeeper``, ``cluster start`` starts the first JobManager and
``jobmanager start`` adds a standby (on any free RPC and REST port unless ``-D`` sets them);
they elect their leader on ZooKeeper, and TaskManagers and clients find it there.

A secret given by value (``-D security.cluster-secret=...``) reaches the processes started
here through their environment (``MILLRACE_CLUSTER_SECRET``), never their command line, which
every local user can read (issue 9). A foreground process moves it from its environment into
its configuration at start, so the processes it starts in turn (Spark's JVM) do not inherit it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from millrace.cli.cli_configuration import (
    ConfigFile,
    DynamicProperties,
    configure_logging,
    load_configuration_or_exit,
)
from millrace.cli.remote_cluster import resolve_jobmanager
from millrace.config import (
    ClusterOptions,
    Configuration,
    HighAvailabilityMode,
    HighAvailabilityOptions,
    JobManagerOptions,
    RestOptions,
    SecurityOptions,
)
from millrace.errors import ConfigError, HighAvailabilityError
from millrace.rpc.tcp.transport_security import SECRET_ENVIRONMENT_VARIABLE, TransportSecurity
from millrace.runtime.dispatcher.rest_endpoint import rest_token
from millrace.runtime.entrypoint.cluster_files import ClusterFiles, ProcessInfo

__all__ = ["cluster_app", "jobmanager_app", "taskmanager_app"]

cluster_app = typer.Typer(no_args_is_help=True, help="Start or stop a standalone cluster.")
taskmanager_app = typer.Typer(no_args_is_help=True, help="Run a TaskManager process.")
jobmanager_app = typer.Typer(
    no_args_is_help=True, help="Run a standby JobManager process (high availability)."
)

_START_TIMEOUT = 60.0  # seconds a background process gets to come up
_STOP_GRACE = 30.0  # seconds between SIGTERM and SIGKILL

Foreground = Annotated[
    bool, typer.Option("--foreground", help="Run in this process instead of the background.")
]


@cluster_app.command("start")
def cluster_start(
    dynamic: DynamicProperties = [],  # noqa: B006 (typer reads the default)
    config_file: ConfigFile = None,
    taskmanagers: Annotated[
        int, typer.Option("--taskmanagers", min=0, help="TaskManagers to start on this machine.")
    ] = 1,
    foreground: Foreground = False,
) -> None:
    """Start the JobManager (and TaskManagers) of a standalone session cluster."""
    console = Console()
    conf = load_configuration_or_exit(console, config_file, dynamic)
    if foreground:
        conf = _secret_from_environment(conf)
        from millrace.runtime.entrypoint.standalone_session_cluster_entrypoint import (
            StandaloneSessionClusterEntrypoint,
        )

        configure_logging(conf, "jobmanager", stderr=True)
        raise typer.Exit(_run_process(console, StandaloneSessionClusterEntrypoint(conf).run))
    files = ClusterFiles(conf)
    running = files.jobmanager()
    if running is not None:
        console.print(
            f"[red]a JobManager already runs:[/] pid {running.pid} at {running.rpc_address}"
        )
        raise typer.Exit(1)
    jobmanager = _spawn(console, conf, ["cluster", "start", "--foreground"], dynamic, config_file)
    console.print(
        f"JobManager (pid {jobmanager.pid}) at {jobmanager.rpc_address}, REST API at "
        f"{jobmanager.rest_url or 'the address it publishes in ZooKeeper once it leads'}"
    )
    for _ in range(taskmanagers):
        _start_taskmanager_daemon(console, conf, jobmanager.rpc_address, dynamic, config_file)


@cluster_app.command("stop")
def cluster_stop(
    dynamic: DynamicProperties = [],  # noqa: B006
    config_file: ConfigFile = None,
) -> None:
    """Stop the TaskManagers and the JobManager recorded in this machine's cluster directory."""
    console = Console()
    conf = load_configuration_or_exit(console, config_file, dynamic)
    processes = ClusterFiles(conf).processes()
    if not processes:
        console.print("no cluster process runs here")
        return
    for info in processes:  # TaskManagers first
        os.kill(info.pid, signal.SIGTERM)
    for info in processes:
        outcome = _await_exit(info.pid, _STOP_GRACE)
        console.print(f"stopped {info.kind} (pid {info.pid}, {info.rpc_address}): {outcome}")


@cluster_app.command("token")
def cluster_token(
    dynamic: DynamicProperties = [],  # noqa: B006
    config_file: ConfigFile = None,
) -> None:
    """Print the REST API's bearer token of this cluster (from its secret): what the dashboard's
    token field and ``Authorization: Bearer`` of REST writes take."""
    console = Console()
    conf = load_configuration_or_exit(console, config_file, dynamic)
    try:
        secret = TransportSecurity.from_configuration(conf).secret
    except ConfigError as error:
        console.print(f"[red]no cluster secret here:[/] {error}")
        raise typer.Exit(1) from None
    print(rest_token(secret))


@jobmanager_app.command("start")
def jobmanager_start(
    dynamic: DynamicProperties = [],  # noqa: B006
    config_file: ConfigFile = None,
    foreground: Foreground = False,
) -> None:
    """Start another JobManager: a standby that takes over when the leader fails."""
    console = Console()
    conf = load_configuration_or_exit(console, config_file, dynamic)
    if conf.get(HighAvailabilityOptions.TYPE) is not HighAvailabilityMode.ZOOKEEPER:
        console.print(
            "[red]a standby JobManager needs high availability:[/] -D high-availability.type="
            "zookeeper with high-availability.zookeeper.quorum and high-availability.storageDir"
        )
        raise typer.Exit(2)
    ports = [
        f"{option.key}=0"
        for option in (JobManagerOptions.RPC_PORT, RestOptions.PORT)
        if not conf.contains(option)
    ]
    dynamic = [*dynamic, *ports]
    conf = conf.with_overrides(Configuration.parse_dynamic_properties(ports))
    if foreground:
        conf = _secret_from_environment(conf)
        from millrace.runtime.entrypoint.standalone_session_cluster_entrypoint import (
            StandaloneSessionClusterEntrypoint,
        )

        configure_logging(conf, "jobmanager", stderr=True)
        raise typer.Exit(_run_process(console, StandaloneSessionClusterEntrypoint(conf).run))
    started = _spawn(console, conf, ["jobmanager", "start", "--foreground"], dynamic, config_file)
    console.print(f"standby JobManager (pid {started.pid}) at {started.rpc_address}")


@taskmanager_app.command("start")
def taskmanager_start(
    jobmanager: Annotated[
        str | None, typer.Option("--jobmanager", "-m", help="HOST:PORT of the JobManager.")
    ] = None,
    slots: Annotated[
        int | None, typer.Option("--slots", min=1, help="taskmanager.numberOfTaskSlots")
    ] = None,
    dynamic: DynamicProperties = [],  # noqa: B006
    config_file: ConfigFile = None,
    foreground: Foreground = False,
) -> None:
    """Start a TaskManager that registers at the JobManager."""
    console = Console()
    if slots is not None:
        dynamic = [*dynamic, f"{ClusterOptions.NUM_TASK_SLOTS.key}={slots}"]
    conf = load_configuration_or_exit(console, config_file, dynamic)
    try:
        address = resolve_jobmanager(conf, jobmanager)
    except ValueError as error:
        console.print(f"[red]{error}[/]")
        raise typer.Exit(2) from None
    if foreground:
        conf = _secret_from_environment(conf)
        from millrace.runtime.taskexecutor.task_manager_runner import TaskManagerRunner
        from millrace.spark.spark_task_runtime import SparkTaskRuntime

        configure_logging(conf, "taskmanager", stderr=True)
        runtime = SparkTaskRuntime(conf, app_name="millrace-taskmanager", warm_up=True)
        raise typer.Exit(_run_process(console, TaskManagerRunner(conf, address, runtime).run))
    _start_taskmanager_daemon(console, conf, address, dynamic, config_file)


def _secret_from_environment(conf: Configuration) -> Configuration:
    """``conf`` with the secret of ``MILLRACE_CLUSTER_SECRET`` (removed from this process's
    environment, so that its children do not inherit it), unless ``conf`` sets one."""
    secret = os.environ.pop(SECRET_ENVIRONMENT_VARIABLE, "")
    if not secret or conf.get(SecurityOptions.CLUSTER_SECRET):
        return conf
    return conf.with_overrides({SecurityOptions.CLUSTER_SECRET.key: secret})


def _run_process(console: Console, run: Callable[[], int]) -> int:
    try:
        return int(run())
    except ConfigError as error:
        console.print(f"[red]configuration error:[/] {error}")
        return 2
    except (OSError, HighAvailabilityError) as error:
        console.print(f"[red]cannot start:[/] {error}")
        return 1


def _start_taskmanager_daemon(
    console: Console,
    conf: Configuration,
    jobmanager: str,
    dynamic: list[str],
    config_file: Path | None,
) -> None:
    command = ["taskmanager", "start", "--foreground", "--jobmanager", jobmanager]
    info = _spawn(console, conf, command, dynamic, config_file)
    console.print(f"TaskManager (pid {info.pid}) at {info.rpc_address}")


def _spawn(
    console: Console,
    conf: Configuration,
    command: list[str],
    dynamic: list[str],
    config_file: Path | None,
) -> ProcessInfo:
    """Run ``millrace <command>`` in a new session in the background; wait until it records
    itself in the cluster directory."""
    log_dir = Path(conf.get(ClusterOptions.TMP_DIR)) / "log"
    log_dir.mkdir(parents=True, exist_ok=True)
    out = log_dir / f"{command[0]}-{time.strftime('%Y%m%d-%H%M%S')}.out"
    args = [sys.executable, "-m", "millrace.cli.main", *command]
    environment = dict(os.environ)
    secret_key = SecurityOptions.CLUSTER_SECRET.key
    for pair in dynamic:
        key, _, value = pair.partition("=")
        if key.strip() == secret_key:  # never on a command line: every local user sees those
            environment[SECRET_ENVIRONMENT_VARIABLE] = value.strip()
            continue
        args += ["-D", pair]
    if config_file is not None:
        args += ["--config", str(config_file)]
    with open(out, "ab") as sink:
        process = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=sink,
            start_new_session=True,
            env=environment,
        )
    files = ClusterFiles(conf)
    deadline = time.monotonic() + _START_TIMEOUT
    while time.monotonic() < deadline:
        info = next((p for p in files.processes() if p.pid == process.pid), None)
        if info is not None:
            return info
        if process.poll() is not None:
            break
        time.sleep(0.1)
    if process.poll() is None:
        process.kill()
    console.print(f"[red]{' '.join(command[:2])} failed[/]; its output ({out}):")
    console.print(out.read_text()[-3000:], markup=False, highlight=False)
    raise typer.Exit(1)


def _await_exit(pid: int, grace: float) -> str:
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not _running(pid):
            return "exited"
        time.sleep(0.1)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return "exited"
    return f"killed after {grace:.0f} s"


def _running(pid: int) -> bool:
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)  # our own child: reap it
        if waited == pid:
            return False
    except ChildProcessError:
        pass
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"
