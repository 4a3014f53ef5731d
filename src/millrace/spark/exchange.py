"""The exchange store: bundles handed from producer to consumer subtasks as Parquet files.

A producer collects a bundle's output as one Arrow table (one Spark job), splits it by the
``__target`` column with Arrow compute, and writes one file per consumer subtask under the
job's directory in the exchange store (:mod:`~millrace.runtime.io.exchange_store`: a local
directory or an fsspec URL). Consumers receive file names, never records.
"""

from __future__ import annotations

from typing import Any

from millrace.runtime.io import exchange_store
from millrace.runtime.io.partition_events import DataBundle
from millrace.spark.windowing import TARGET, WINDOW_END, WINDOW_START

__all__ = ["window_end_range_ms", "write_exchange_files", "write_rebalanced"]


def write_exchange_files(
    table: Any, directory: str, prefix: str, num_targets: int, window_size_ms: int | None
) -> list[tuple[int, DataBundle]]:
    """Write ``table`` (``pyarrow.Table`` with ``__target``) as one file per target subtask
    under ``directory`` (a path or URL of the exchange store).

    The bundles carry the range of their rows' window ends: ``__we`` where the rows have
    one (sessions), else ``__ws`` + ``window_size_ms``.

    Returns:
        ``(target, DataBundle)`` for every target that received rows.

    Raises:
        OSError: If the store cannot be written.
    """
    import pyarrow.compute as pc

    out = []
    targets = table.column(TARGET)
    for target in range(num_targets):
        part = table.filter(pc.equal(targets, target)).drop_columns([TARGET])
        if part.num_rows == 0:
            continue
        path = exchange_store.join(directory, f"{prefix}-to{target:03d}.parquet")
        size = exchange_store.write_parquet(part, path)
        low, high = window_end_range_ms(part, window_size_ms)
        out.append((target, DataBundle(path, part.num_rows, low, high, size)))
    return out


def window_end_range_ms(table: Any, window_size_ms: int | None) -> tuple[int | None, int | None]:
    """Smallest and largest window end (epoch ms) of ``table``'s rows (``pyarrow.Table`` with
    ``__ws``, and ``__we`` for sessions), or ``(None, None)`` when unknown."""
    import pyarrow.compute as pc

    if WINDOW_END in table.column_names:
        bounds = pc.min_max(table.column(WINDOW_END))
        size = 0
    elif window_size_ms is not None and WINDOW_START in table.column_names:
        bounds = pc.min_max(table.column(WINDOW_START))
        size = window_size_ms
    else:
        return None, None
    low, high = bounds["min"].as_py(), bounds["max"].as_py()
    if low is None or high is None:
        return None, None
    return low // 1000 + size, high // 1000 + size


def write_rebalanced(table: Any, environment: Any, sequence: int) -> int:
    """Write a bundle's ``table`` (``pyarrow.Table``) as one exchange file for consumer
    subtask ``subtask_index % consumers`` (REBALANCE edge) and emit it there.

    Args:
        table: The bundle's rows.
        environment: The producer's ``TaskEnvironment``.
        sequence: The bundle's number in this subtask.

    Returns:
        The number of rows written (nothing is written or emitted for an empty table).
    """
    if table.num_rows == 0:
        return 0
    tdd = environment.tdd
    target = tdd.subtask_index % tdd.num_subpartitions
    path = exchange_store.join(
        exchange_store.partition_directory(environment.working_dir, tdd.vertex_id, tdd.attempt_id),
        f"{tdd.subtask_index:03d}-{sequence:06d}-to{target:03d}.parquet",
    )
    size = exchange_store.write_parquet(table, path)
    environment.emit(target, DataBundle(path, table.num_rows, size_bytes=size))
    return int(table.num_rows)
