"""Side outputs: dead letters (malformed records) and late records, written by Spark.

Layout: ``<pipeline.side-output.dir>/<job name>/dead-letters/`` and ``.../late/``, Parquet with
columns ``source`` (split), ``reason``, ``record`` (the original text, or the row as JSON),
``subtask``. Written only when a bundle had such records (its Observation said so), so the
common case costs no extra Spark job.
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


def write_side_output(frame: Any, directory: str, source: str, subtask: int) -> None:
    """Append ``frame`` (columns ``reason``, ``record``) under ``directory``: one Spark job."""
    from pyspark.sql import functions as F

    (frame.select(F.lit(source).alias("source"), "reason", "record",
                  F.lit(subtask).alias("subtask"))
     .coalesce(1).write.mode("append").parquet(directory))
