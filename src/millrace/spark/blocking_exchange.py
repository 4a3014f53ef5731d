"""Blocking exchanges of BATCH mode (Flink's BLOCKING result partitions) in the exchange store.

A producer subtask writes its whole output under ``<working dir>/exchange/<vertex>/<attempt>/``,
one file per consumer subtask (``...-to<consumer>.parquet``), and leaves an empty ``_partition``
file there even when it writes nothing. A consumer is deployed once every producer FINISHED and
finds its files there, by the producer attempts its input channels name, instead of pulling
events from the producers' TaskManagers: the files outlive a lost TaskManager and stay until the
job ends, so a failed consumer can run again from them (region failover).
"""

from __future__ import annotations

from millrace.errors import PipelineError
from millrace.runtime.deployment import TaskDeploymentDescriptor
from millrace.runtime.io import exchange_store

__all__ = ["blocking_channel_files", "blocking_input_files", "exchange_rows"]


def blocking_input_files(working_dir: str, tdd: TaskDeploymentDescriptor) -> list[str]:
    """The exchange files the producer attempts of ``tdd``'s input channels wrote for its
    subtask, of every channel, sorted (arguments and errors: ``blocking_channel_files``)."""
    return sorted(p for files in blocking_channel_files(working_dir, tdd) for p in files)


def blocking_channel_files(working_dir: str, tdd: TaskDeploymentDescriptor) -> list[list[str]]:
    """The exchange files written for ``tdd``'s subtask, per input channel (in the order of
    ``tdd.input_channels``, so ``input_index`` tells each list's input), each list sorted.

    Args:
        working_dir: The job's directory in the exchange store (a path or fsspec URL).
        tdd: The consumer subtask's deployment (input channels, subtask index).

    Raises:
        PipelineError: If a producer attempt has no directory in the store (it did not finish
            here, or the store was cleaned).

    Threading:
        Any thread (lists files; reads none).
    """
    exchange = exchange_store.join(working_dir, "exchange")
    per_channel: list[list[str]] = []
    for channel in tdd.input_channels:
        directory = exchange_store.join(exchange, "*", channel.partition_id)
        if not exchange_store.glob(exchange_store.join(directory, exchange_store.PARTITION_MARKER)):
            raise PipelineError(
                f"the exchange store {exchange} holds no output of producer attempt "
                f"{channel.partition_id}",
                tdd.task_name,
            )
        files = exchange_store.glob(
            exchange_store.join(directory, f"*-to{tdd.subtask_index:03d}.parquet")
        )
        per_channel.append(files)
    return per_channel


def exchange_rows(paths: list[str]) -> int:
    """Rows of the Parquet files ``paths``, from their footers (no Spark job)."""
    return sum(exchange_store.parquet_rows(path) for path in paths)
