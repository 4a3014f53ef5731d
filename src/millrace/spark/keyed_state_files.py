"""Keyed state as Parquet files: live state files, checkpoint snapshots, restore by key group.

A keyed task (a window, a running aggregate) keeps its state as Parquet files of rows that
carry their key group (``__kg``), in the exchange store (Spark reads them when a window
fires). A snapshot concatenates the live rows into one file under the
checkpoint directory with pyarrow (no Spark job) and names its key-group range; a restored
task takes the rows of its own key groups from every restored file, whatever parallelism wrote
them, so a savepoint restores at another parallelism (Flink's key groups).
"""

from __future__ import annotations

import os
from typing import Any

from millrace.config import CheckpointingOptions
from millrace.runtime.checkpoint.checkpoint_storage import task_state_path
from millrace.runtime.checkpoint.key_groups import KeyGroupRange
from millrace.runtime.checkpoint.task_state_snapshot import KeyedStateHandle, TaskStateSnapshot
from millrace.runtime.deployment import TaskDeploymentDescriptor
from millrace.runtime.io import exchange_store
from millrace.spark.windowing import KEY_GROUP

__all__ = [
    "concat_tables",
    "key_group_tables",
    "read_key_groups",
    "remove_file",
    "write_snapshot",
    "write_state_file",
]


def concat_tables(paths: list[str]) -> Any:
    """The rows of the Parquet files ``paths`` (of the exchange store) as one
    ``pyarrow.Table``, or None if none."""
    import pyarrow as pa

    if not paths:
        return None
    return pa.concat_tables(
        [exchange_store.read_parquet(p) for p in paths], promote_options="default"
    )


def write_state_file(table: Any, directory: str, name: str) -> str:
    """Write ``table`` (``pyarrow.Table``) as ``directory/name`` in the exchange store;
    returns its name there.

    Raises:
        OSError: If the store cannot be written.
    """
    path = exchange_store.join(directory, name)
    exchange_store.write_parquet(table, path)
    return path


def write_snapshot(
    table: Any,
    configuration: Any,
    tdd: TaskDeploymentDescriptor,
    checkpoint_id: int,
    key_groups: KeyGroupRange,
    part: str = "",
) -> tuple[KeyedStateHandle, ...]:
    """Write ``table`` (``pyarrow.Table`` or None) as the task's keyed state of
    ``checkpoint_id`` under ``execution.checkpointing.dir`` (fsspec); ``part`` tells apart
    several files of one task (e.g. ``-in0``, ``-in1`` of a two-input operator).

    Returns:
        One handle naming the file and ``key_groups``, or none for an empty table.

    Raises:
        OSError: If the file cannot be written (the task declines the checkpoint).
    """
    import fsspec
    import pyarrow.parquet as pq

    if table is None or table.num_rows == 0:
        return ()
    path = task_state_path(
        configuration.get(CheckpointingOptions.CHECKPOINTS_DIR),
        tdd.job_id,
        checkpoint_id,
        tdd.vertex_id,
        tdd.subtask_index,
        tdd.attempt_id,
    )
    if part:
        path = f"{path.removesuffix('.parquet')}{part}.parquet"
    fs, target = fsspec.core.url_to_fs(path)
    fs.makedirs(os.path.dirname(target), exist_ok=True)
    with fs.open(target, "wb") as f:
        pq.write_table(table, f)
    return (
        KeyedStateHandle(path, key_groups.start, key_groups.end, table.num_rows, fs.size(target)),
    )


def key_group_tables(snapshot: TaskStateSnapshot, key_groups: KeyGroupRange) -> list[Any]:
    """The rows of ``key_groups`` in each restored keyed state file, one ``pyarrow.Table`` per
    file that may hold some (its schema metadata kept).

    Raises:
        OSError: If a restored file cannot be read (the restore fails the task).
    """
    import fsspec
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    tables = []
    for handle in snapshot.keyed_state:
        if handle.key_group_end < key_groups.start or handle.key_group_start > key_groups.end:
            continue
        with fsspec.open(handle.path, "rb") as f:
            table = pq.read_table(f)
        groups = table.column(KEY_GROUP)
        mine = pc.and_(
            pc.greater_equal(groups, key_groups.start), pc.less_equal(groups, key_groups.end)
        )
        tables.append(table.filter(mine))
    return tables


def read_key_groups(snapshot: TaskStateSnapshot, key_groups: KeyGroupRange) -> Any:
    """The rows of ``key_groups`` in the restored keyed state files (``pyarrow.Table``), or
    None when there are none.

    Raises:
        OSError: If a restored file cannot be read (the restore fails the task).
    """
    import pyarrow as pa

    tables = key_group_tables(snapshot, key_groups)
    restored = pa.concat_tables(tables, promote_options="default") if tables else None
    return restored if restored is not None and restored.num_rows else None


def remove_file(path: str) -> None:
    """Delete a state or exchange file of the exchange store; one already gone is fine."""
    exchange_store.remove_file(path)
