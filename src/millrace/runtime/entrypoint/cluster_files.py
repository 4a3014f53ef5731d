"""ClusterFiles: what the processes of a standalone cluster on this machine leave for the CLI.

Under ``<io.tmp.dirs>/cluster/``: the secret (``secret``, see TransportSecurity), and one JSON
file per running process, ``jobmanager-<pid>.json`` (several with high availability: the leader
and its standbys) and ``taskmanager-<pid>.json``, holding its pid and addresses.
``millrace cluster stop`` signals the processes listed there; ``millrace taskmanager start`` and
``millrace run`` find the JobManager there when no ``--jobmanager`` is given.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from millrace.config import ClusterOptions, Configuration

__all__ = ["ClusterFiles", "ProcessInfo"]


@dataclass(frozen=True)
class ProcessInfo:
    """One cluster process on this machine.

    Attributes:
        kind: ``jobmanager`` or ``taskmanager``.
        pid: Its process id.
        rpc_address: ``host:port`` of its RPC service.
        rest_url: ``http://host:port`` of the REST API (JobManager only), else "".
        metrics_url: ``http://host:port/metrics`` of its Prometheus reporter, else "".
    """

    kind: str
    pid: int
    rpc_address: str
    rest_url: str = ""
    metrics_url: str = ""


class ClusterFiles:
    """The cluster directory of one configuration.

    Args:
        configuration: ``io.tmp.dirs`` locates the directory.

    Threading:
        Any thread; each file is written atomically (write, then rename).
    """

    def __init__(self, configuration: Configuration) -> None:
        self.directory = Path(configuration.get(ClusterOptions.TMP_DIR)).resolve() / "cluster"

    def _path(self, info: ProcessInfo) -> Path:
        return self.directory / f"{info.kind}-{info.pid}.json"

    def register(self, info: ProcessInfo) -> None:
        """Record a started process."""
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self._path(info)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(info)))
        tmp.replace(path)

    def unregister(self, info: ProcessInfo) -> None:
        """Forget a process (it stopped)."""
        path = self._path(info)
        try:
            if json.loads(path.read_text()).get("pid") == info.pid:
                path.unlink()
        except (FileNotFoundError, ValueError):
            pass

    def processes(self) -> list[ProcessInfo]:
        """Recorded processes that still run (stale files are removed); TaskManagers first."""
        found = []
        for path in sorted(self.directory.glob("*.json")):
            try:
                info = ProcessInfo(**json.loads(path.read_text()))
            except (OSError, ValueError, TypeError):
                continue
            if _alive(info.pid):
                found.append(info)
            else:
                path.unlink(missing_ok=True)
        return sorted(found, key=lambda i: i.kind == "jobmanager")

    def jobmanager(self) -> ProcessInfo | None:
        """The running JobManager recorded here, if any."""
        return next((p for p in self.processes() if p.kind == "jobmanager"), None)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs and is a millrace process (not a recycled pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True
    return b"millrace" in cmdline
