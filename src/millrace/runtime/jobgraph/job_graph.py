"""JobGraph: the job as submitted — JobVertices (chains of operators) joined by JobEdges.

A JobVertex is what one task runs: a chain of operators (seed 002: operator chaining) executed by
an invokable of the data plane. Each operator is user code serialized by the client
(:class:`SerializedOperator`); the runtime reads only the kind and name, loads source and sink
connectors in the JobMaster, and leaves the rest to ``millrace.spark`` in the tasks.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from millrace.runtime.jobgraph.user_code import deserialize_user_code, serialize_user_code
from millrace.types import JobId, JobVertexId, new_id

__all__ = [
    "ChainedKeyedStage",
    "DistributionPattern",
    "JobEdge",
    "JobGraph",
    "JobVertex",
    "OperatorKind",
    "SerializedOperator",
]


class OperatorKind(enum.Enum):
    """What a chained operator does, as far as the runtime needs to know.

    SOURCE reads input splits (its connector enumerates them in the JobMaster); SINK writes
    output and SIDE_OUTPUT writes a source's dead letters or late records (their connectors are
    prepared and committed by the JobMaster alike); the others run only in tasks.
    """

    SOURCE = "SOURCE"
    TRANSFORM = "TRANSFORM"
    PARTITION = "PARTITION"
    WINDOW = "WINDOW"
    AGGREGATE = "AGGREGATE"
    SINK = "SINK"
    SIDE_OUTPUT = "SIDE_OUTPUT"

    @property
    def writes(self) -> bool:
        """Whether the operator's connector is a two-phase-commit sink (SINK, SIDE_OUTPUT)."""
        return self in (OperatorKind.SINK, OperatorKind.SIDE_OUTPUT)


@dataclass(frozen=True)
class SerializedOperator:
    """One chained operator as user-code bytes (Flink's serialized operator in StreamConfig).

    Attributes:
        kind: What the operator does.
        name: Operator name shown to users, e.g. ``Sink: parquet at out/delays``.
        payload: The operator descriptor pickled by ``serialize_user_code``.
    """

    kind: OperatorKind
    name: str
    payload: bytes

    @classmethod
    def of(cls, kind: OperatorKind, name: str, operator: object) -> SerializedOperator:
        """Serialize ``operator``.

        Raises:
            UserCodeError: If the operator references something that cannot be serialized.
        """
        return cls(kind, name, serialize_user_code(operator, f"operator {name!r}"))

    def deserialize(self) -> Any:
        """The operator descriptor.

        Raises:
            UserCodeError: If it cannot be loaded in this process.
        """
        return deserialize_user_code(self.payload, f"operator {self.name!r}")


class DistributionPattern(enum.Enum):
    """How a producer's records reach the consumer's subtasks.

    FORWARD: subtask i -> subtask i (equal parallelism). HASH: by key group of the key columns
    (Flink's KeyGroupStreamPartitioner). REBALANCE: producer subtask i -> consumer subtask
    ``i % parallelism`` (a union feeding sinks; Flink's RebalancePartitioner, per bundle).
    Whatever the pattern, every consumer subtask has a channel from every producer subtask
    (watermarks and barriers reach all of them); the producer picks the data's target.
    """

    FORWARD = "FORWARD"
    HASH = "HASH"
    REBALANCE = "REBALANCE"


@dataclass(frozen=True)
class JobEdge:
    """A data exchange from ``source`` to ``target``.

    Args:
        source: Producing JobVertex id.
        target: Consuming JobVertex id.
        pattern: Distribution pattern of the exchange.
        key_columns: Key columns for HASH (empty for FORWARD).
        input_index: Which input of ``target`` the edge feeds (Flink's type number of a
            two-input operator: 0 = first, 1 = second); the edges of a union share one.
    """

    source: JobVertexId
    target: JobVertexId
    pattern: DistributionPattern
    key_columns: tuple[str, ...] = ()
    input_index: int = 0


@dataclass(frozen=True)
class ChainedKeyedStage:
    """What a source vertex that has a keyed vertex chained into it (STREAMING, parallelism 1:
    the HASH edge is forward in effect) needs to split back into the two vertices.

    The chain's operators are ``source chain (source_operators), keyed chain (keyed_operators),
    the source's side outputs``. Split, the source vertex keeps the chain's id and the keyed
    vertex gets ``keyed_id`` again, so checkpoints, savepoints and sinks name both vertices as
    they would unchained (``api/keyed_chaining.py``).

    Args:
        keyed_id: The keyed vertex's stable id.
        keyed_name: Its name.
        keyed_invokable: Its task (``module:Class``).
        source_name: The source vertex's name before chaining.
        source_invokable: The source vertex's task before chaining.
        source_operators: How many operators of the chain are the source's (before the keyed
            ones; the side outputs at the end are the source's too).
        keyed_operators: How many operators follow them that are the keyed vertex's.
        key_columns: The HASH edge's key columns.
    """

    keyed_id: JobVertexId
    keyed_name: str
    keyed_invokable: str
    source_name: str
    source_invokable: str
    source_operators: int
    keyed_operators: int
    key_columns: tuple[str, ...]


@dataclass
class JobVertex:
    """One node of the JobGraph: a chain of operators run by ``invokable`` in each subtask.

    Args:
        name: Human-readable chain name, e.g. ``Source: files -> transform``.
        parallelism: Number of subtasks (>= 1).
        invokable: Dotted path ``module:Class`` of the data-plane task that runs the chain.
        operators: The chained operators, serialized, in order.
        is_source: Whether the vertex reads input splits (deployed eagerly).
        vertex_id: Unique id (generated).
        chained_keyed: The keyed vertex chained into this source vertex, or None.
    """

    name: str
    parallelism: int
    invokable: str
    operators: tuple[SerializedOperator, ...] = ()
    is_source: bool = False
    vertex_id: JobVertexId = field(default_factory=lambda: JobVertexId(new_id()))
    chained_keyed: ChainedKeyedStage | None = None

    def __post_init__(self) -> None:
        if self.parallelism < 1:
            raise ValueError(f"JobVertex {self.name!r}: parallelism must be >= 1")

    def unchained(self) -> tuple[list[JobVertex], list[JobEdge]]:
        """The vertices (and the edge between them) this vertex runs: itself and no edge, or,
        with a keyed vertex chained into it, the source and the keyed vertex as they were
        before chaining (the same ids, chains, names and parallelism)."""
        stage = self.chained_keyed
        if stage is None:
            return [self], []
        n, k = stage.source_operators, stage.keyed_operators
        source = JobVertex(
            stage.source_name,
            self.parallelism,
            stage.source_invokable,
            (*self.operators[:n], *self.operators[n + k :]),
            is_source=self.is_source,
            vertex_id=self.vertex_id,
        )
        keyed = JobVertex(
            stage.keyed_name,
            self.parallelism,
            stage.keyed_invokable,
            self.operators[n : n + k],
            vertex_id=stage.keyed_id,
        )
        edge = JobEdge(self.vertex_id, stage.keyed_id, DistributionPattern.HASH, stage.key_columns)
        return [source, keyed], [edge]

    def unchained_position(self, position: int) -> tuple[JobVertexId, int]:
        """The (vertex id, chain position) that chain position ``position`` has unchained:
        sinks and their staged data are keyed by it, whatever the chain's shape."""
        stage = self.chained_keyed
        if stage is None or position < stage.source_operators:
            return self.vertex_id, position
        keyed_end = stage.source_operators + stage.keyed_operators
        if position < keyed_end:
            return stage.keyed_id, position - stage.source_operators
        return self.vertex_id, position - stage.keyed_operators


@dataclass
class JobGraph:
    """The job a client submits: vertices in topological order and the edges between them.

    Args:
        name: Job name given to ``execute``.
        vertices: JobVertices, sources first, in topological order.
        edges: Data exchanges between vertices.
        max_parallelism: Number of key groups of keyed exchanges.
        job_id: Unique id (generated).
        configuration: The job's own settings (``Configuration.job_level``), applied over the
            cluster's configuration for this job.
        savepoint_path: A savepoint (or retained checkpoint) to start from, or None (Flink's
            SavepointRestoreSettings).
    """

    name: str
    vertices: list[JobVertex]
    edges: list[JobEdge]
    max_parallelism: int = 128
    job_id: JobId = field(default_factory=lambda: JobId(new_id()))
    configuration: dict[str, object] = field(default_factory=dict)
    savepoint_path: str | None = None

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
