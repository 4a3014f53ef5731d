"""JobGraph: the job as submitted — JobVertices (chains of operators) joined by JobEdges.

A JobVertex is what one task runs: a chain of operators (seed 002: operator chaining) executed by
an invokable of the data plane. The runtime treats the chain as opaque; only ``millrace.spark``
interprets it.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field

from millrace.types import JobId, JobVertexId, new_id

__all__ = ["DistributionPattern", "JobEdge", "JobGraph", "JobVertex"]


class DistributionPattern(enum.Enum):
    """How a producer's records reach the consumer's subtasks.

    FORWARD: subtask i -> subtask i (equal parallelism). HASH: by key group of the key columns
    (Flink's KeyGroupStreamPartitioner).
    """

    FORWARD = "FORWARD"
    HASH = "HASH"


@dataclass(frozen=True)
class JobEdge:
    """A data exchange from ``source`` to ``target``.

    Args:
        source: Producing JobVertex id.
        target: Consuming JobVertex id.
        pattern: Distribution pattern of the exchange.
        key_columns: Key columns for HASH (empty for FORWARD).
    """

    source: JobVertexId
    target: JobVertexId
    pattern: DistributionPattern
    key_columns: tuple[str, ...] = ()


@dataclass
class JobVertex:
    """One node of the JobGraph: a chain of operators run by ``invokable`` in each subtask.

    Args:
        name: Human-readable chain name, e.g. ``Source: files -> transform``.
        parallelism: Number of subtasks (>= 1).
        invokable: Dotted path ``module:Class`` of the data-plane task that runs the chain.
        operators: The chained operator descriptors, in order (opaque to the runtime).
        is_source: Whether the vertex reads input splits (deployed eagerly).
        vertex_id: Unique id (generated).
    """

    name: str
    parallelism: int
    invokable: str
    operators: Sequence[object] = ()
    is_source: bool = False
    vertex_id: JobVertexId = field(default_factory=lambda: JobVertexId(new_id()))

    def __post_init__(self) -> None:
        if self.parallelism < 1:
            raise ValueError(f"JobVertex {self.name!r}: parallelism must be >= 1")


@dataclass
class JobGraph:
    """The job a client submits: vertices in topological order and the edges between them.

    Args:
        name: Job name given to ``execute``.
        vertices: JobVertices, sources first, in topological order.
        edges: Data exchanges between vertices.
        max_parallelism: Number of key groups of keyed exchanges.
        job_id: Unique id (generated).
    """

    name: str
    vertices: list[JobVertex]
    edges: list[JobEdge]
    max_parallelism: int = 128
    job_id: JobId = field(default_factory=lambda: JobId(new_id()))

    def vertex(self, vertex_id: JobVertexId) -> JobVertex:
        """The vertex with ``vertex_id``.

        Raises:
            KeyError: If the graph has no such vertex.
        """
        for vertex in self.vertices:
            if vertex.vertex_id == vertex_id:
                return vertex
        raise KeyError(vertex_id)

    def inputs_of(self, vertex_id: JobVertexId) -> list[JobEdge]:
        return [e for e in self.edges if e.target == vertex_id]

    def outputs_of(self, vertex_id: JobVertexId) -> list[JobEdge]:
        return [e for e in self.edges if e.source == vertex_id]

    def slots_required(self) -> int:
        """Slots the job needs with slot sharing: one subtask of every vertex per slot."""
        return max(v.parallelism for v in self.vertices)
