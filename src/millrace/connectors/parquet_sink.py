"""ParquetSink: writes a stream's rows as Parquet files, visible only when the job succeeds.

Each subtask writes its bundles as pending files under ``<path>/.pending/<job id>/``; when every
task of the job FINISHED, the JobMaster commits them (``finalize_global``: rename into ``path``
and write ``_SUCCESS``). A failed or cancelled job leaves no visible partial output (its pending
files are removed by ``abort_global``). ``mode="overwrite"`` removes the previous output's
files when the job starts (Flink's InitializeOnMaster / FinalizeOnMaster). File operations go
through fsspec; bundles reach the files as Arrow tables (``DataFrame.toArrow``), never row by
row.
"""

from __future__ import annotations

import posixpath
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from millrace.connectors.file_source import absolute_local_path

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

    def initialize_global(self, job_id: str) -> None:
        """JobMaster, before deployment: create the directory and, in overwrite mode, remove
        the previous output. Blocking I/O."""
        fs, root = self._fs()
        fs.makedirs(root, exist_ok=True)
        pending = posixpath.join(root, ".pending", job_id)
        if fs.exists(pending):
            fs.rm(pending, recursive=True)
        if self.mode == "overwrite":
            for name in fs.ls(root, detail=False):
                base = posixpath.basename(name)
                if base.startswith("part-") or base == "_SUCCESS":
                    fs.rm(name)

    def abort_global(self, job_id: str) -> None:
        """JobMaster, when the job failed or was cancelled: drop its pending files."""
        fs, root = self._fs()
        self._remove_pending(fs, root, job_id)

    @staticmethod
    def _remove_pending(fs: Any, root: str, job_id: str) -> None:
        pending = posixpath.join(root, ".pending")
        directory = posixpath.join(pending, job_id)
        if fs.exists(directory):
            fs.rm(directory, recursive=True)
        if fs.exists(pending) and not fs.ls(pending, detail=False):
            fs.rm(pending, recursive=True)

    def write(self, table: Any, job_id: str, subtask: int, sequence: int, attempt_id: str) -> int:
        """Task thread: write an Arrow table as one pending file; returns its rows.

        Args:
            table: ``pyarrow.Table``.
            job_id: The job (pending files are per job).
            subtask: Writing subtask index.
            sequence: The subtask's bundle number (unique per subtask and attempt).
            attempt_id: The writing Execution attempt; only files of the attempts that
                finished the job are committed, so a zombie of a failed attempt cannot add rows.
        """
        import pyarrow.parquet as pq

        if table.num_rows == 0:
            return 0
        fs, root = self._fs()
        directory = posixpath.join(root, ".pending", job_id)
        fs.makedirs(directory, exist_ok=True)
        name = f"part-{job_id[:8]}-{subtask:05d}-{sequence:06d}.{attempt_id}.parquet"
        tmp = posixpath.join(directory, f".{name}.tmp")
        with fs.open(tmp, "wb") as f:
            pq.write_table(table, f)
        fs.mv(tmp, posixpath.join(directory, name))
        return table.num_rows

    def finalize_global(self, job_id: str, attempt_ids: Collection[str]) -> None:
        """JobMaster, after every task FINISHED: make the files written by ``attempt_ids``
        visible as ``part-<job>-<subtask>-<sequence>.parquet``; drop any other (idempotent)."""
        fs, root = self._fs()
        directory = posixpath.join(root, ".pending", job_id)
        if fs.exists(directory):
            for name in sorted(fs.ls(directory, detail=False)):
                base = posixpath.basename(name)
                stem, _, attempt = base.removesuffix(".parquet").rpartition(".")
                if stem.startswith("part-") and attempt in attempt_ids:
                    fs.mv(name, posixpath.join(root, stem + ".parquet"))
        self._remove_pending(fs, root, job_id)
        fs.touch(posixpath.join(root, "_SUCCESS"))
