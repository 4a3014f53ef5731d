"""JobChangeRequest and its plan: what a live change of a running job does to its JobGraph.

Two changes (issue 13; seed 001's dynamic DAG, with state kept): replace the function of a
chained ``transform`` by its operator name (``millrace modify``), and set the parallelism of one
vertex or of all of them (``millrace rescale``, REST ``PATCH /jobs/{id}/rescaling``).
:func:`plan_change` checks a request against the JobGraph and returns what to set on which
vertex; :class:`~millrace.runtime.jobmaster.live_job_changes.LiveJobChanges` applies it at a
savepoint. Pure functions of their arguments; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from millrace.errors import JobChangeError
from millrace.runtime.jobgraph import (
    DistributionPattern,
    JobEdge,
    JobGraph,
    JobVertex,
    OperatorKind,
    SerializedOperator,
)
from millrace.types import JobVertexId

__all__ = ["ChainSplit", "JobChangeRequest", "JobChangeResult", "VertexChange", "plan_change"]


@dataclass(frozen=True)
class JobChangeRequest:
    """A live change of a running job: either ``transform`` with ``payload``, or ``parallelism``.

    Attributes:
        transform: Operator name of the chained ``transform`` whose function is replaced ("":
            no replacement).
        payload: The new ``TransformOperator`` pickled by ``serialize_user_code`` (the client
            ships the function as user code, like the rest of the job).
        parallelism: The new parallelism (0: unchanged; 1 .. the job's max parallelism).
        vertex: The vertex to rescale, by id, id prefix or name ("": every vertex).
    """

    transform: str = ""
    payload: bytes = b""
    parallelism: int = 0
    vertex: str = ""

    def describe(self) -> str:
        """``replace transform 'x'`` or ``rescale <vertex|every vertex> to N``."""
        if self.transform:
            return f"replace transform {self.transform!r}"
        return f"rescale {self.vertex or 'every vertex'} to parallelism {self.parallelism}"


@dataclass(frozen=True)
class JobChangeResult:
    """A change applied, with the JobMaster's timestamps of the switch (epoch ms).

    The downtime is from the stop (the savepoint complete, the old tasks cancelled) to every
    task of the changed job RUNNING (``running_ms``), or to every source task RUNNING
    (``sources_ms``) when the others had not run yet. Until the savepoint completes the old
    tasks go on processing the records before its barrier, so the savepoint's duration is not
    downtime; the first bundle of each new task (a Spark job) follows the downtime. Consumers
    deploy on their first input (Flink's lazy-from-sources), so with no input after the switch
    only the sources run.

    Attributes:
        job_id: The job (the same id before and after).
        change: What was changed (``JobChangeRequest.describe``).
        savepoint: The savepoint the changed job restored.
        checkpoint_id: Its checkpoint id.
        barrier_ms: When the savepoint's barrier was injected at the sources.
        stopped_ms: When the savepoint was complete and the old tasks were cancelled.
        sources_ms: When every source task of the changed job was RUNNING (reading again).
        running_ms: When every task of the changed job was RUNNING, or -1 (not yet).
    """

    job_id: str
    change: str
    savepoint: str
    checkpoint_id: int
    barrier_ms: int
    stopped_ms: int
    sources_ms: int
    running_ms: int

    @property
    def downtime_ms(self) -> int:
        """Stop to every task RUNNING (ms); to every source RUNNING if ``running_ms`` is -1."""
        return (self.running_ms if self.running_ms >= 0 else self.sources_ms) - self.stopped_ms

    def downtime(self) -> str:
        """The downtime and its parts, for people, e.g. ``downtime 1260 ms (stop to sources
        RUNNING 960 ms, to every task RUNNING 1260 ms; the savepoint before it 90 ms)``."""
        every = (
            f"{self.running_ms - self.stopped_ms} ms"
            if self.running_ms >= 0
            else "not yet: no input since, the downtime counts to the sources"
        )
        return (
            f"downtime {self.downtime_ms} ms (stop to sources RUNNING "
            f"{self.sources_ms - self.stopped_ms} ms, to every task RUNNING {every}; the savepoint "
            f"before it, records still processed, {self.stopped_ms - self.barrier_ms} ms)"
        )


@dataclass(frozen=True)
class VertexChange:
    """What a change sets on one vertex: its chain and its parallelism."""

    vertex: JobVertex
    operators: tuple[SerializedOperator, ...]
    parallelism: int

    def apply(self) -> None:
        """Set the vertex's chain and parallelism (the JobGraph's vertex, in place)."""
        self.vertex.operators = self.operators
        self.vertex.parallelism = self.parallelism


@dataclass(frozen=True)
class ChainSplit:
    """A rescale above 1 of a source vertex with a keyed vertex chained into it: the chain
    becomes the two vertices it was chained from (``JobVertex.unchained``), with their ids,
    so the savepoint taken before the change restores into them (``chained_state``)."""

    graph: JobGraph
    chain: JobVertex
    vertices: tuple[JobVertex, ...]
    edges: tuple[JobEdge, ...]

    def apply(self) -> None:
        """Put the two vertices and their edge in the JobGraph in place of the chain.

        Threading:
            The JobMaster's main thread, with the job stopped (``LiveJobChanges``).
        """
        at = self.graph.vertices.index(self.chain)
        self.graph.vertices[at : at + 1] = self.vertices
        self.graph.edges.extend(self.edges)


def plan_change(job_graph: JobGraph, request: JobChangeRequest) -> list[ChainSplit | VertexChange]:
    """The vertices ``request`` changes, checked against ``job_graph``.

    Returns:
        A ChainSplit per chained keyed vertex a rescale above 1 takes apart, then one
        VertexChange per vertex whose chain or parallelism changes (non-empty), to apply in
        this order.

    Raises:
        JobChangeError: If the request has neither or both changes; no chained transform, or
            several, is named ``request.transform``; the payload is empty; the parallelism is
            outside 1 .. ``max_parallelism``; no vertex matches ``request.vertex``; a FORWARD
            edge would join vertices of unequal parallelism; or nothing would change.
    """
    if bool(request.transform) == bool(request.parallelism):
        raise JobChangeError("a change replaces a transform or sets a parallelism (one of them)")
    if request.transform:
        return [_replacement(job_graph, request.transform, request.payload)]
    return _rescaling(job_graph, request.parallelism, request.vertex)


def _replacement(job_graph: JobGraph, name: str, payload: bytes) -> VertexChange:
    if not payload:
        raise JobChangeError(f"no function given for transform {name!r}")
    found = [
        (vertex, position)
        for vertex in job_graph.vertices
        for position, op in enumerate(vertex.operators)
        if op.kind is OperatorKind.TRANSFORM and op.name == name
    ]
    if not found:
        names = sorted(
            {
                op.name
                for v in job_graph.vertices
                for op in v.operators
                if op.kind is OperatorKind.TRANSFORM
            }
        )
        raise JobChangeError(
            f"job {job_graph.name!r} has no transform named {name!r} "
            f"(its transforms: {', '.join(map(repr, names)) or 'none'})"
        )
    if len(found) > 1:
        raise JobChangeError(
            f"job {job_graph.name!r} has {len(found)} transforms named {name!r}; "
            "give them distinct names (transform(fn, name=...))"
        )
    vertex, position = found[0]
    operators = list(vertex.operators)
    operators[position] = SerializedOperator(OperatorKind.TRANSFORM, name, payload)
    return VertexChange(vertex, tuple(operators), vertex.parallelism)


def _rescaling(
    job_graph: JobGraph, parallelism: int, selector: str
) -> list[ChainSplit | VertexChange]:
    if not 1 <= parallelism <= job_graph.max_parallelism:
        raise JobChangeError(
            f"parallelism must be 1 .. {job_graph.max_parallelism} (the job's max parallelism, "
            f"its number of key groups), got {parallelism}"
        )
    splits: list[ChainSplit] = []
    vertices: list[JobVertex] = []  # the vertices after the splits
    edges = list(job_graph.edges)
    for vertex in job_graph.vertices:
        halves, between = vertex.unchained()
        if (
            vertex.chained_keyed is not None
            and parallelism > 1
            and (not selector or any(_named(v, selector) for v in (vertex, *halves)))
        ):
            splits.append(ChainSplit(job_graph, vertex, tuple(halves), tuple(between)))
            vertices += halves
            edges += between
        else:
            vertices.append(vertex)
    targets = vertices
    if selector:
        targets = [v for v in vertices if _named(v, selector)]
        whole = [s for s in splits if _named(s.chain, selector)]
        if len(whole) == 1 and all(any(v is h for h in whole[0].vertices) for v in targets):
            targets = list(whole[0].vertices)  # the chain is named: both of its vertices
        elif len(targets) != 1:
            listed = ", ".join(f"{v.vertex_id[:8]} ({v.name})" for v in job_graph.vertices)
            raise JobChangeError(
                f"{len(targets)} vertices of job {job_graph.name!r} match {selector!r} "
                f"(its vertices: {listed})"
            )
    after: dict[JobVertexId, int] = {v.vertex_id: v.parallelism for v in vertices}
    after.update({v.vertex_id: parallelism for v in targets})
    names = {v.vertex_id: v.name for v in vertices}
    for edge in edges:
        if edge.pattern is DistributionPattern.FORWARD and after[edge.source] != after[edge.target]:
            raise JobChangeError(
                f"vertices {names[edge.source]!r} and {names[edge.target]!r} are joined FORWARD "
                "and must keep equal parallelism; rescale both (no --vertex)"
            )
    changes = [VertexChange(v, v.operators, parallelism) for v in targets]
    changes = [c for c in changes if c.vertex.parallelism != parallelism]
    if not changes:
        raise JobChangeError(f"job {job_graph.name!r} already runs at parallelism {parallelism}")
    return [*splits, *changes]


def _named(vertex: JobVertex, selector: str) -> bool:
    """Whether ``selector`` is ``vertex``'s name or a prefix of its id."""
    return vertex.name == selector or vertex.vertex_id.startswith(selector)
