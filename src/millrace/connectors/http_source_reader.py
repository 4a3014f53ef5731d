"""HttpSourceReader: reads an HttpSource's log from its checkpointed offset, in bundles.

The split is the log directory; its position is the offset of the next record to read, always
a segment boundary (a bundle takes whole segments). Each poll lists the segments at or after
the position and hands Spark the next ones (at least one, at most about
``execution.bundle.max-records`` records) as one ``spark.read.text`` over their files, parsed
with ``from_json`` (PERMISSIVE, a corrupt-record column): Python never touches a record. A line
that is not JSON, or JSON that does not fit the schema, becomes a dead letter with the reason.
"""

from __future__ import annotations

import time
from typing import Any

from millrace.api.connector.source import SourceBundle, SourceReaderContext
from millrace.connectors.http_source_log import Segment, list_segments, truncation_mark
from millrace.errors import PipelineError
from millrace.runtime.io.input_split import InputSplit, SplitState

__all__ = ["CORRUPT", "RAW", "SPLIT", "HttpSourceReader", "http_schema"]

RAW = "__http_raw"
SPLIT = "__http_split"
CORRUPT = "__http_corrupt"
_PARSED = "__http_parsed"
_POLL_INTERVAL = 0.05  # seconds between listings of an idle log


def http_schema(schema: Any) -> Any:
    """``schema`` (DDL string or StructType) as a StructType (needs a SparkSession for DDL).

    Raises:
        PipelineError: If a field name starts with ``__http_`` (reserved).
    """
    from typing import cast

    from pyspark.sql.types import StructType

    struct = cast(StructType, StructType.fromDDL(schema)) if isinstance(schema, str) else schema
    reserved = [f.name for f in struct.fields if f.name.startswith("__http_")]
    if reserved:
        raise PipelineError(f"field names starting with __http_ are reserved: {reserved}")
    return struct


class HttpSourceReader:
    """Reads the one split of an HttpSource (the log), from its position on.

    Args:
        schema: The records' schema (DDL string or StructType).
        context: The task's reader context.

    Threading:
        The source task's thread only.
    """

    def __init__(self, schema: Any, context: SourceReaderContext) -> None:
        self._spark = context.spark
        self._schema = http_schema(schema)
        self._max_records = context.max_records
        self._state: SplitState | None = None

    def add_split(self, split: InputSplit, position: int) -> None:
        """The log to read, from offset ``position``.

        Raises:
            PipelineError: If records at ``position`` were truncated already (a restore of a
                checkpoint older than the log's last committed one).
        """
        mark = truncation_mark(split.path)
        if position < mark:
            raise PipelineError(
                f"the HttpSource log {split.path} was truncated to offset {mark}; records from "
                f"{position} on, which the restored checkpoint needs, are gone"
            )
        self._state = SplitState(split, position)

    def wants_splits(self) -> bool:
        """Always: after the log the enumerator answers None with MAX_WATERMARK, which lets
        the subtask's watermark follow the log's records (the bound that came with the log is
        MIN: its event times are unknown before reading)."""
        return True

    def poll(self, timeout: float) -> SourceBundle | None:
        """The next segments as one bundle, or None if none appears within ``timeout`` s.

        Raises:
            PipelineError: If the segment at the position is missing (log damaged).
            OSError: If the log cannot be listed.
        """
        deadline = time.monotonic() + timeout
        while True:
            state = self._state
            segments = self._next_segments(state) if state is not None else []
            if segments:
                break
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            time.sleep(min(left, _POLL_INTERVAL))
        assert state is not None
        end = segments[-1].end
        self._state = SplitState(state.split, end)
        return self._bundle(state.split, segments, end)

    def _next_segments(self, state: SplitState) -> list[Segment]:
        position = state.position
        after = [s for s in list_segments(state.split.path) if s.end > position]
        if not after:
            return []
        if after[0].first != position:
            raise PipelineError(
                f"the HttpSource log {state.split.path} has no segment starting at offset "
                f"{position} (the first after it starts at {after[0].first})"
            )
        chosen: list[Segment] = []
        records = 0
        for segment in after:
            if chosen and records + segment.records > self._max_records:
                break
            chosen.append(segment)
            records += segment.records
        return chosen

    def _bundle(self, split: InputSplit, segments: list[Segment], end: int) -> SourceBundle:
        from pyspark.sql import functions as F
        from pyspark.sql.types import StringType, StructField, StructType

        schema = self._schema
        with_corrupt = StructType([*schema.fields, StructField(CORRUPT, StringType(), True)])
        options = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}
        frame = (
            self._spark.read.text([s.url for s in segments])
            .select(F.col("value").alias(RAW), F.lit(split.split_id).alias(SPLIT))
            .select("*", F.from_json(F.col(RAW), with_corrupt, options).alias(_PARSED))
        )
        corrupt = F.col(f"{_PARSED}.{CORRUPT}")
        fields = [
            F.when(corrupt.isNull(), F.col(f"{_PARSED}.`{f.name}`")).alias(f.name)
            for f in schema.fields
        ]
        frame = frame.select(*fields, corrupt.alias(CORRUPT), RAW, SPLIT)
        raw = F.col(RAW)
        reason = F.when(
            F.col(CORRUPT).isNotNull(),
            F.when(F.try_parse_json(raw).isNull(), F.lit("line is not valid JSON")).otherwise(
                F.lit(
                    "JSON line does not fit the schema (not an object, or a field's type differs)"
                )
            ),
        )
        return SourceBundle(
            frame,
            [SplitState(split, end)],
            split_column=SPLIT,
            malformed_reason=reason,
            raw_record=raw,
            available_at_ms=round(time.time() * 1000),
            internal_columns=(CORRUPT, RAW, SPLIT),
        )

    def snapshot(self) -> list[SplitState]:
        return [self._state] if self._state is not None else []

    def is_finished(self) -> bool:
        return False

    def close(self) -> None:
        self._state = None
