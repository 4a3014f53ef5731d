"""ParquetSink: Parquet files, exactly once, with two-phase commit (Flink's FileSink).

Each write stages one pending file under ``<path>/.pending/<job id>/``; a checkpoint lists the
pending files written before its barrier, and once it is complete the JobMaster commits them:
each is renamed to ``<path>/part-<job>-<subtask>-<attempt>-<sequence>.parquet`` and
``_SUCCESS`` is touched. A rename of a file already committed is skipped, so a commit replayed
after a failure is a no-op; pending files that no completed checkpoint lists are deleted when
the job restores, fails or is cancelled. ``mode="overwrite"`` removes the previous output's
files when the job starts (Flink's InitializeOnMaster). File operations go through fsspec;
bundles reach the files as Arrow tables, never row by row.
"""

from __future__ import annotations

import posixpath
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from millrace.api.connector.sink import SinkWrite
from millrace.connectors.file_formats import absolute_local_path
from millrace.connectors.staged_files import make_durable
from millrace.errors import CheckpointError

__all__ = ["ParquetSink"]

_MODES = ("overwrite", "append")


@dataclass(frozen=True)
class ParquetSink:
    """Parquet files under ``path``.

    Args:
        path: Output directory (local path, made absolute here, or fsspec URL).
        mode: ``overwrite`` (default) replaces earlier output when the job starts; ``append``
            adds files.

    Raises:
        ValueError: For an unknown mode.
    """

    path: str
    mode: str = "overwrite"

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", absolute_local_path(self.path))
        if self.mode not in _MODES:
            raise ValueError(f"ParquetSink mode must be one of {_MODES}, got {self.mode!r}")

    def describe(self) -> str:
        return f"parquet at {self.path}"

    def _fs(self) -> tuple[Any, str]:
        import fsspec

        return fsspec.core.url_to_fs(self.path)

    def _pending_dir(self, root: str, job_id: str) -> str:
        return posixpath.join(root, ".pending", job_id)

    def initialize_global(self, job_id: str) -> None:
        """JobMaster, before deployment: create the directory, drop this job's pending files
        and, in overwrite mode, the previous output. Blocking I/O."""
        fs, root = self._fs()
        fs.makedirs(root, exist_ok=True)
        pending = self._pending_dir(root, job_id)
        if fs.exists(pending):
            fs.rm(pending, recursive=True)
        if self.mode == "overwrite":
            for name in fs.ls(root, detail=False):
                base = posixpath.basename(name)
                if base.startswith("part-") or base == "_SUCCESS":
                    fs.rm(name)

    def write(
        self, table: Any, job_id: str, subtask: int, sequence: int, attempt_id: str
    ) -> SinkWrite:
        """Task thread: stage an Arrow table as one pending file.

        The file is named by subtask, attempt and sequence, so attempts of a restarted job
        never collide, and a zombie of a failed attempt writes only files nobody commits.
        """
        import pyarrow.parquet as pq

        if table.num_rows == 0:
            return SinkWrite(0, None)
        fs, root = self._fs()
        directory = self._pending_dir(root, job_id)
        fs.makedirs(directory, exist_ok=True)
        name = f"part-{job_id[:8]}-{subtask:05d}-{attempt_id[:8]}-{sequence:06d}.parquet"
        tmp = posixpath.join(directory, f".{name}.{attempt_id}.tmp")
        with fs.open(tmp, "wb") as f:
            pq.write_table(table, f)
        staged = posixpath.join(directory, f"{name}.{attempt_id}")
        fs.mv(tmp, staged)
        return SinkWrite(table.num_rows, staged)

    def pre_commit(self, job_id: str, checkpoint_id: int, pending: Sequence[str]) -> None:
        """Task thread, at a barrier: make the staged files durable (``staged_files``).

        Raises:
            CheckpointError: If a staged file is missing.
            OSError: If a file cannot be synced.
        """
        fs, _ = self._fs()
        make_durable(fs, pending, self.describe())

    def commit(self, job_id: str, commit_id: int, pending: Sequence[str]) -> None:
        """JobMaster: move ``pending`` into place (idempotent), then touch ``_SUCCESS``.

        Raises:
            CheckpointError: If a pending file is neither staged nor committed (lost).
        """
        fs, root = self._fs()
        fs.makedirs(root, exist_ok=True)  # a resumed job did not initialize it
        for staged in pending:
            name = posixpath.basename(staged).rsplit(".", 1)[0]
            final = posixpath.join(root, name)
            if fs.exists(staged):
                fs.mv(staged, final)
            elif not fs.exists(final):
                raise CheckpointError(
                    f"{self.describe()}: staged file {staged} of commit {commit_id} is gone"
                )
        fs.touch(posixpath.join(root, "_SUCCESS"))

    def pending(self, job_id: str, attempt_ids: Collection[str]) -> list[str]:
        """The staged files written by ``attempt_ids``."""
        fs, root = self._fs()
        directory = self._pending_dir(root, job_id)
        if not fs.exists(directory):
            return []
        found = []
        for name in sorted(fs.ls(directory, detail=False)):
            base = posixpath.basename(name)
            if not base.startswith("part-"):
                continue
            attempt = base.rsplit(".", 1)[1]
            if attempt in attempt_ids:
                found.append(name)
        return found

    def abort(self, job_id: str, keep: Collection[str] = ()) -> None:
        """Drop the job's staged files except ``keep``."""
        fs, root = self._fs()
        directory = self._pending_dir(root, job_id)
        if fs.exists(directory):
            kept = set(keep)
            for name in fs.ls(directory, detail=False):
                if name not in kept:
                    fs.rm(name, recursive=True)
            if not fs.ls(directory, detail=False):
                fs.rm(directory, recursive=True)
        pending = posixpath.join(root, ".pending")
        if fs.exists(pending) and not fs.ls(pending, detail=False):
            fs.rm(pending, recursive=True)
