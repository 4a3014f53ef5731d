"""Side outputs: dead letters (malformed records) and late records, exactly once.

Layout: ``<pipeline.side-output.dir>/<job name>/dead-letters/`` and ``.../late/``, Parquet with
columns ``source`` (split), ``reason``, ``record`` (the original text, or the row as JSON),
``subtask``. Every source vertex has one ParquetSink (append mode) per side output, chained
into it when the JobGraph is built as a SIDE_OUTPUT operator tagged ``DEAD_LETTERS`` or
``LATE``, an ordinary sink to the runtime: a source task stages a file for a bundle that had
such records (its Observation said so, so the common case costs no extra Spark job), the next
checkpoint lists it, and the JobMaster commits it with the job's other sinks (two-phase commit).
A replay after a restore therefore writes no record twice; a bounded job's last files are
committed when it finishes, and a failed job's uncommitted ones are dropped like its other
staged output.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from millrace.api.connector.source import SourceBundle
from millrace.config import Configuration, PipelineOptions
from millrace.connectors.parquet_sink import ParquetSink

__all__ = [
    "DEAD_LETTERS",
    "LATE",
    "side_output_dir",
    "side_output_rows",
    "side_output_sinks",
    "source_column",
]

DEAD_LETTERS = "dead-letters"
"""Tag of a source vertex's dead-letter sink (``SinkOperator.side_output``)."""
LATE = "late"
"""Tag of a source vertex's late-record sink."""


def side_output_dir(configuration: Configuration, job_name: str, tag: str) -> str:
    """Directory of side output ``tag`` (``dead-letters`` or ``late``) of job ``job_name``."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", job_name) or "job"
    return str(Path(configuration.get(PipelineOptions.SIDE_OUTPUT_DIR)) / safe / tag)


def side_output_sinks(configuration: Configuration, job_name: str) -> dict[str, ParquetSink]:
    """Tag -> the side-output sink of every source vertex of job ``job_name`` (chained into
    the source vertices when the JobGraph is built, from the client's configuration)."""
    return {
        tag: ParquetSink(side_output_dir(configuration, job_name, tag), mode="append")
        for tag in (DEAD_LETTERS, LATE)
    }


def side_output_rows(frame: Any, source: Any, subtask: int) -> Any:
    """``frame`` (columns ``reason``, ``record``) as side-output rows: ``source`` (a string
    Column naming each row's split), ``reason``, ``record``, ``subtask``. Lazy."""
    from pyspark.sql import functions as F

    return frame.select(source.alias("source"), "reason", "record", F.lit(subtask).alias("subtask"))


def source_column(bundle: SourceBundle) -> Any:
    """The ``source`` Column of a bundle's side-output rows: Spark's input file name of each
    row, else (and for files the reader wrote for Spark itself, ``scans_own_files``) the
    bundle's splits. Lazy."""
    from pyspark.sql import functions as F

    splits = F.lit(", ".join(s.split.describe() for s in bundle.progress))
    if bundle.scans_own_files:
        return splits
    return F.coalesce(F.nullif(F.input_file_name(), F.lit("")), splits)
