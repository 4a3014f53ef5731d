"""Side outputs: dead letters (malformed records) and late records, written by Spark.

Layout: ``<pipeline.side-output.dir>/<job name>/dead-letters/`` and ``.../late/``, Parquet with
columns ``source`` (split), ``reason``, ``record`` (the original text, or the row as JSON),
``subtask``; one file per subtask and bundle that had such records (its Observation said so),
so the common case costs no extra Spark job.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from millrace.config import Configuration, PipelineOptions

__all__ = ["side_output_dir", "write_side_output"]


def side_output_dir(configuration: Configuration, job_name: str, tag: str) -> str:
    """Directory of side output ``tag`` of job ``job_name``."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", job_name) or "job"
    return str(Path(configuration.get(PipelineOptions.SIDE_OUTPUT_DIR)) / safe / tag)


def write_side_output(frame: Any, directory: str, source: Any, subtask: int, name: str) -> int:
    """Write ``frame`` (columns ``reason``, ``record``) as ``<directory>/<name>.parquet``.

    One Spark job collects the rows as Arrow; pyarrow writes the file (subtasks write
    concurrently into one directory, which Spark's own writer does not allow).

    Args:
        frame: Rows to write (``pyspark.sql.DataFrame``).
        directory: Target directory (created).
        source: Column (string) naming each row's input file or split.
        subtask: The writing subtask's index.
        name: File name without suffix, unique per subtask and bundle.

    Returns:
        Rows written.
    """
    import pyarrow.parquet as pq
    from pyspark.sql import functions as F

    table = frame.select(
        source.alias("source"), "reason", "record", F.lit(subtask).alias("subtask")
    ).toArrow()
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    tmp = target / f".{name}.parquet.tmp"
    pq.write_table(table, tmp)
    tmp.replace(target / f"{name}.parquet")
    return table.num_rows
