"""Choosing a job's runtime mode (Flink's ``execution.runtime-mode``), in the client.

``STREAMING`` runs any job; ``BATCH`` runs a job whose sources are all bounded stage by stage;
``AUTOMATIC`` is BATCH when every source is bounded, else STREAMING (Flink's rule). The mode is
resolved when the JobGraph is built, so a pipeline that cannot run in the mode asked for fails in
``execute()`` before a cluster or Spark job starts, and the JobGraph carries the resolved mode
(never AUTOMATIC) to the JobMaster and the tasks.
"""

from __future__ import annotations

from collections.abc import Iterable

from millrace.api.transformations import SinkTransformation, SourceTransformation, Transformation
from millrace.config import ExecutionOptions, RuntimeExecutionMode
from millrace.errors import PipelineError
from millrace.runtime.source.split_enumerator import Boundedness

__all__ = ["resolve_runtime_mode", "sources_of"]


def sources_of(sinks: Iterable[SinkTransformation]) -> list[SourceTransformation]:
    """The source transformations the pipelines of ``sinks`` read, each once, in order."""
    found: dict[int, SourceTransformation] = {}
    stack: list[Transformation] = list(sinks)
    while stack:
        node = stack.pop()
        if isinstance(node, SourceTransformation):
            found.setdefault(node.id, node)
        inputs = getattr(node, "inputs", None) or ([node.input] if node.input else [])
        stack.extend(inputs)
    return sorted(found.values(), key=lambda t: t.id)


def resolve_runtime_mode(
    mode: RuntimeExecutionMode, sources: Iterable[SourceTransformation]
) -> RuntimeExecutionMode:
    """The mode a job runs in: STREAMING or BATCH.

    Args:
        mode: The mode asked for (``execution.runtime-mode`` or ``env.set_runtime_mode``).
        sources: The job's sources.

    Returns:
        ``mode`` itself for STREAMING and BATCH; for AUTOMATIC, BATCH when every source is
        bounded (``Source.boundedness``), else STREAMING.

    Raises:
        PipelineError: If ``mode`` is BATCH and a source is unbounded (Flink refuses the same).
    """
    unbounded = [t for t in sources if t.source.boundedness is not Boundedness.BOUNDED]
    if mode is RuntimeExecutionMode.AUTOMATIC:
        return RuntimeExecutionMode.STREAMING if unbounded else RuntimeExecutionMode.BATCH
    if mode is RuntimeExecutionMode.BATCH and unbounded:
        names = ", ".join(repr(t.name) for t in unbounded)
        raise PipelineError(
            f"{ExecutionOptions.RUNTIME_MODE.key}=BATCH needs bounded sources, but {names} "
            "is unbounded: run the job in STREAMING (or AUTOMATIC) mode, or read a bounded "
            "source (e.g. FileSource instead of DirectorySource or KafkaSource)"
        )
    return mode
