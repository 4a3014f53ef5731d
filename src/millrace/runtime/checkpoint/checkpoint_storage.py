"""Checkpoint storage: where checkpoints live and their metadata, through fsspec.

Layout (any fsspec URL every process can reach; a local directory by default)::

    <state.checkpoints.dir>/<job id>/chk-<n>/_metadata              written by the JobMaster
    <state.checkpoints.dir>/<job id>/chk-<n>/<vertex id>/<subtask>-<attempt>.parquet
                                                                      written by each task
    <state.savepoints.dir>/savepoint-<job id[:8]>-<n>-<random>/      self-contained copy

``_metadata`` is JSON a person can read: the job, the checkpoint id and times, and per vertex
and subtask the state handles (keyed-state files with key-group ranges, source split positions,
staged sink data), and the sink commits of earlier checkpoints not known to be done when it
completed (committed first, each under its own id, whenever this one is). A savepoint copies
the keyed-state files next to its metadata and names them relative to it, so it can be moved
and restored by another job, at another parallelism.
"""

from __future__ import annotations

import dataclasses
import json
import posixpath
import time
from dataclasses import dataclass, field
from typing import Any

from millrace.errors import CheckpointError
from millrace.runtime.checkpoint.task_state_snapshot import KeyedStateHandle, TaskStateSnapshot
from millrace.runtime.io.input_split import InputSplit, SplitState
from millrace.runtime.io.partition_events import MIN_WATERMARK
from millrace.types import ExecutionAttemptId, JobId, JobVertexId, new_id

__all__ = [
    "METADATA_FILE",
    "CheckpointMetadata",
    "CheckpointStorage",
    "SinkCommit",
    "VertexState",
    "task_state_path",
]

METADATA_FILE = "_metadata"
_FORMAT = "millrace-checkpoint-v1"


def task_state_path(
    checkpoints_dir: str,
    job_id: JobId,
    checkpoint_id: int,
    vertex_id: JobVertexId,
    subtask_index: int,
    attempt_id: ExecutionAttemptId,
) -> str:
    """Where a task writes its keyed state for a checkpoint (the layout above)."""
    return posixpath.join(
        checkpoints_dir.rstrip("/"),
        job_id,
        f"chk-{checkpoint_id}",
        vertex_id,
        f"{subtask_index:03d}-{attempt_id[:8]}.parquet",
    )


@dataclass(frozen=True)
class VertexState:
    """The state of one JobVertex in a checkpoint.

    Attributes:
        vertex_id: The vertex (stable across runs of the same pipeline).
        name: Its chain name.
        parallelism: Its parallelism when the checkpoint was taken.
        subtasks: Subtask index -> its snapshot.
        finished_splits: Source splits finished before the job last restored (carried over,
            so that every checkpoint names all finished splits).
        unassigned_splits: Source splits restored at a position that the SourceCoordinator
            still held, not yet handed to a subtask, when the checkpoint was triggered (Flink's
            coordinator checkpoint): a subtask that snapshots before it asks for its splits
            does not name them, and without this they would restart from their beginning.
    """

    vertex_id: JobVertexId
    name: str
    parallelism: int
    subtasks: dict[int, TaskStateSnapshot] = field(default_factory=dict)
    finished_splits: tuple[str, ...] = ()
    unassigned_splits: tuple[SplitState, ...] = ()


@dataclass(frozen=True)
class SinkCommit:
    """What committing one completed checkpoint makes visible.

    Attributes:
        job_id: The job that took the checkpoint (commits are idempotent per job, id).
        checkpoint_id: The commit id.
        pending: (vertex id, chain position of the sink) -> staged data handles.
    """

    job_id: JobId
    checkpoint_id: int
    pending: dict[tuple[str, int], tuple[str, ...]]


@dataclass(frozen=True)
class CheckpointMetadata:
    """A completed checkpoint or savepoint, as written to ``_metadata``.

    Attributes:
        job_id, job_name: The job that took it.
        checkpoint_id: Its id.
        timestamp_ms: When it was triggered (epoch ms).
        completed_ms: When its last acknowledgement arrived (epoch ms).
        is_savepoint: Whether a user asked for it.
        max_parallelism: Key groups of the job.
        vertices: Per vertex, the subtasks' states.
        location: The directory holding ``_metadata`` (set when read or written).
        earlier_commits: Sink commits of earlier checkpoints of the job that were not known
            to be done when this one completed (a commit failed or had not run yet): Flink
            keeps such committables in the next checkpoint's state. Committing this checkpoint
            commits them first, so a restore of it never loses them.
    """

    job_id: JobId
    job_name: str
    checkpoint_id: int
    timestamp_ms: int
    completed_ms: int
    is_savepoint: bool
    max_parallelism: int
    vertices: list[VertexState]
    location: str = ""
    earlier_commits: tuple[SinkCommit, ...] = ()

    @property
    def state_size_bytes(self) -> int:
        return sum(s.state_size_bytes for v in self.vertices for s in v.subtasks.values())

    def vertex(self, vertex_id: JobVertexId) -> VertexState | None:
        return next((v for v in self.vertices if v.vertex_id == vertex_id), None)

    def sink_pending(self) -> dict[tuple[str, int], list[str]]:
        """(vertex id, operator position) -> staged sink data this checkpoint commits."""
        pending: dict[tuple[str, int], list[str]] = {}
        for vertex in self.vertices:
            for snapshot in vertex.subtasks.values():
                for operator, handles in snapshot.sink_pending.items():
                    pending.setdefault((vertex.vertex_id, operator), []).extend(handles)
        return pending

    def commits(self) -> list[SinkCommit]:
        """The sink commits to make for this checkpoint, in order: the earlier ones, then its
        own (empty ones left out)."""
        own = SinkCommit(
            self.job_id,
            self.checkpoint_id,
            {key: tuple(handles) for key, handles in self.sink_pending().items()},
        )
        return [c for c in (*self.earlier_commits, own) if c.pending]


class CheckpointStorage:
    """Reads and writes checkpoint metadata and discards checkpoints.

    Args:
        checkpoints_dir: ``state.checkpoints.dir``.
        savepoints_dir: ``state.savepoints.dir``.

    Threading:
        Any thread; every method does blocking I/O (the JobMaster's I/O executor).
    """

    def __init__(self, checkpoints_dir: str, savepoints_dir: str) -> None:
        self.checkpoints_dir = checkpoints_dir.rstrip("/")
        self.savepoints_dir = savepoints_dir.rstrip("/")

    def checkpoint_directory(self, job_id: JobId, checkpoint_id: int) -> str:
        return posixpath.join(self.checkpoints_dir, job_id, f"chk-{checkpoint_id}")

    def write(self, metadata: CheckpointMetadata, directory: str) -> CheckpointMetadata:
        """Write ``metadata`` as ``<directory>/_metadata`` (atomically: write, then rename).

        Returns:
            The metadata with its ``location``.

        Raises:
            CheckpointError: If the directory or the file cannot be written (the message names
                the directory; the OSError is the cause).
        """
        located = dataclasses.replace(metadata, location=directory)
        text = json.dumps(
            _to_json(located, relative_to=directory if metadata.is_savepoint else None), indent=1
        )
        try:
            fs, root = _fs(directory)
            fs.makedirs(root, exist_ok=True)
            tmp = posixpath.join(root, f".{METADATA_FILE}.{new_id()[:8]}")
            with fs.open(tmp, "w") as f:
                f.write(text)
            fs.mv(tmp, posixpath.join(root, METADATA_FILE))
        except OSError as error:
            raise CheckpointError(f"cannot write {directory}: {_os_error(error)}") from error
        return located

    def write_savepoint(
        self, metadata: CheckpointMetadata, target: str | None
    ) -> CheckpointMetadata:
        """Copy the keyed state of ``metadata`` into a new savepoint directory under ``target``
        (default ``state.savepoints.dir``) and write its metadata there.

        Returns:
            The savepoint's metadata, located in its directory.

        Raises:
            CheckpointError: If the savepoint directory or a file in it cannot be written (the
                message names the directory; the OSError is the cause).
        """
        base = (target or self.savepoints_dir).rstrip("/")
        directory = posixpath.join(
            base, f"savepoint-{metadata.job_id[:8]}-{metadata.checkpoint_id}-{new_id()[:6]}"
        )
        try:
            return self._write_savepoint(metadata, directory)
        except OSError as error:
            raise CheckpointError(
                f"cannot write savepoint {directory}: {_os_error(error)}"
            ) from error

    def _write_savepoint(self, metadata: CheckpointMetadata, directory: str) -> CheckpointMetadata:
        fs, root = _fs(directory)
        fs.makedirs(root, exist_ok=True)
        vertices = []
        for vertex in metadata.vertices:
            subtasks = {}
            for index, snapshot in vertex.subtasks.items():
                handles = []
                for handle in snapshot.keyed_state:
                    name = f"{vertex.vertex_id}-{posixpath.basename(handle.path)}"
                    copy = posixpath.join(directory, name)
                    _copy(handle.path, copy)
                    handles.append(dataclasses.replace(handle, path=copy))
                subtasks[index] = dataclasses.replace(
                    snapshot, keyed_state=tuple(handles), sink_pending={}
                )
            vertices.append(dataclasses.replace(vertex, subtasks=subtasks))
        return self.write(
            dataclasses.replace(metadata, vertices=vertices, is_savepoint=True), directory
        )

    def read(self, path: str) -> CheckpointMetadata:
        """The metadata at ``path`` (a checkpoint or savepoint directory, or its ``_metadata``).

        Raises:
            CheckpointError: If there is no metadata there or it is not Millrace's.
        """
        directory = (
            path[: -len(METADATA_FILE)].rstrip("/") if path.endswith(METADATA_FILE) else path
        )
        fs, root = _fs(directory)
        try:
            with fs.open(posixpath.join(root, METADATA_FILE), "r") as f:
                data = json.load(f)
        except (OSError, ValueError) as error:
            raise CheckpointError(f"no checkpoint metadata at {path!r}: {error}") from error
        if data.get("format") != _FORMAT:
            raise CheckpointError(f"{path!r} is not a Millrace checkpoint ({data.get('format')!r})")
        return _from_json(data, directory)

    def discard(self, metadata: CheckpointMetadata) -> None:
        """Delete a checkpoint's directory (never a savepoint's)."""
        if metadata.is_savepoint or not metadata.location:
            return
        fs, root = _fs(metadata.location)
        if fs.exists(root):
            fs.rm(root, recursive=True)

    def discard_directory(self, directory: str) -> None:
        """Delete what an aborted checkpoint's tasks wrote."""
        fs, root = _fs(directory)
        if fs.exists(root):
            fs.rm(root, recursive=True)


def _os_error(error: OSError) -> str:
    """``strerror`` (and the file, if the error names one) of an OSError."""
    text = error.strerror or str(error) or type(error).__name__
    return f"{text}: {error.filename}" if error.filename else text


def _fs(url: str) -> tuple[Any, str]:
    import fsspec

    fs, path = fsspec.core.url_to_fs(url)
    return fs, str(path)


def _copy(source: str, target: str) -> None:
    import fsspec

    with fsspec.open(source, "rb") as src, fsspec.open(target, "wb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)


def _to_json(metadata: CheckpointMetadata, relative_to: str | None) -> dict[str, Any]:
    def path(p: str) -> str:
        if relative_to is not None and p.startswith(relative_to.rstrip("/") + "/"):
            return p[len(relative_to.rstrip("/")) + 1 :]
        return p

    return {
        "format": _FORMAT,
        "job_id": metadata.job_id,
        "job_name": metadata.job_name,
        "checkpoint_id": metadata.checkpoint_id,
        "timestamp_ms": metadata.timestamp_ms,
        "completed_ms": metadata.completed_ms,
        "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "is_savepoint": metadata.is_savepoint,
        "max_parallelism": metadata.max_parallelism,
        "vertices": [
            {
                "vertex_id": v.vertex_id,
                "name": v.name,
                "parallelism": v.parallelism,
                "finished_splits": list(v.finished_splits),
                "unassigned_splits": [dataclasses.asdict(x) for x in v.unassigned_splits],
                "subtasks": {
                    str(i): {
                        "watermark_ms": s.watermark_ms,
                        "keyed_state": [
                            {**dataclasses.asdict(h), "path": path(h.path)} for h in s.keyed_state
                        ],
                        "split_states": [dataclasses.asdict(x) for x in s.split_states],
                        "finished_splits": list(s.finished_splits),
                        "sink_pending": {str(k): list(h) for k, h in s.sink_pending.items()},
                    }
                    for i, s in sorted(v.subtasks.items())
                },
            }
            for v in metadata.vertices
        ],
        "earlier_commits": [
            {
                "job_id": c.job_id,
                "checkpoint_id": c.checkpoint_id,
                "pending": [[v, p, list(h)] for (v, p), h in sorted(c.pending.items())],
            }
            for c in metadata.earlier_commits
        ],
    }


def _from_json(data: dict[str, Any], location: str) -> CheckpointMetadata:
    def path(p: str) -> str:
        return p if "://" in p or p.startswith("/") else posixpath.join(location, p)

    vertices = []
    for v in data["vertices"]:
        subtasks = {}
        for index, s in v["subtasks"].items():
            subtasks[int(index)] = TaskStateSnapshot(
                keyed_state=tuple(
                    KeyedStateHandle(**{**h, "path": path(h["path"])}) for h in s["keyed_state"]
                ),
                split_states=tuple(_split_state(x) for x in s["split_states"]),
                finished_splits=tuple(s["finished_splits"]),
                sink_pending={int(k): tuple(h) for k, h in s["sink_pending"].items()},
                watermark_ms=s["watermark_ms"],
            )
        vertices.append(
            VertexState(
                v["vertex_id"],
                v["name"],
                v["parallelism"],
                subtasks,
                tuple(v.get("finished_splits", ())),
                tuple(_split_state(x) for x in v.get("unassigned_splits", ())),
            )
        )
    return CheckpointMetadata(
        job_id=data["job_id"],
        job_name=data["job_name"],
        checkpoint_id=data["checkpoint_id"],
        timestamp_ms=data["timestamp_ms"],
        completed_ms=data["completed_ms"],
        is_savepoint=data["is_savepoint"],
        max_parallelism=data["max_parallelism"],
        vertices=vertices,
        location=location,
        earlier_commits=tuple(
            SinkCommit(
                c["job_id"],
                c["checkpoint_id"],
                {(v, int(p)): tuple(h) for v, p, h in c["pending"]},
            )
            for c in data.get("earlier_commits", ())
        ),
    )


def _split_state(data: dict[str, Any]) -> SplitState:
    return SplitState(
        InputSplit(**data["split"]),
        data["position"],
        data["finished"],
        data.get("watermark_ms", MIN_WATERMARK),  # absent from checkpoints before it existed
    )
