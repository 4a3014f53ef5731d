"""JobGraph vertices of pipelines with several inputs: union and the two-input joins.

A multi-input vertex has several JobEdges into it; its input gate takes channels from every
producer subtask of every edge, and each edge names which input it feeds (``input_index``).

* ``a.union(b, ...)`` then ``key_by(...)``: every input's source chain (with the transforms
  after the union chained in) ends in the keyed exchange and HASH-partitions into the one keyed
  vertex (edges of input 0), which is built as for a single source.
* ``a.union(b, ...)`` then sinks: every input's source chain ends in a REBALANCE exchange into
  one sink vertex (``ForwardStreamTask``). The sinks are written by that vertex only, so each
  sink's two-phase commit covers one vertex's staged data, as with a single input (a sink
  written from several vertices would commit twice under one checkpoint id).
* joins: each input's source chain ends in the key-group partitioning of its keys (input 0:
  ``where``/the first stream, input 1: ``equal_to``/the second); the join vertex chains the
  join, the transforms after it and the sinks.

An input of a union or join is a linear chain from a source (or a union of such chains);
windows, running aggregates and joins before a union or join are refused.
"""

from __future__ import annotations

from millrace.api.job_graph_generator import (
    FORWARD_TASK,
    INTERVAL_JOIN_TASK,
    SOURCE_TASK,
    WINDOW_JOIN_TASK,
    build_vertices,
    check_parallelism,
    finish_vertex,
)
from millrace.api.join_operators import (
    INTERVAL_ASSIGNER,
    IntervalJoinOperator,
    RebalanceOperator,
    WindowJoinOperator,
)
from millrace.api.multi_input_transformations import (
    IntervalJoinTransformation,
    MultiInputTransformation,
    UnionTransformation,
    WindowJoinTransformation,
)
from millrace.api.operators import SinkOperator, SourceOperator, TransformOperator
from millrace.api.operators import WindowAssignOperator as _Assign
from millrace.api.transformations import (
    KeyByTransformation,
    SinkTransformation,
    SourceTransformation,
    Transformation,
    TransformTransformation,
)
from millrace.errors import PipelineError
from millrace.runtime.jobgraph import DistributionPattern, JobEdge, JobVertex

__all__ = ["build_multi_input_vertices"]


def build_multi_input_vertices(
    chain: list[Transformation],
    default_p: int,
    max_p: int,
    vertices: list[JobVertex],
    edges: list[JobEdge],
    side_outputs: list[SinkOperator],
    seen: set[int],
    bounded: bool,
) -> None:
    """Append the vertices and edges of ``chain`` (a multi-input transformation, then a linear
    tail ending in sinks) and of its inputs; ``bounded``: every source of the job is bounded.

    Raises:
        PipelineError: If an input is not a linear chain from a source (or a union of such),
            a join input has no event time, or the tail holds what cannot follow (a key_by
            after a join).
    """
    head = chain[0]
    assert isinstance(head, MultiInputTransformation)
    tail = chain[1:]
    if isinstance(head, UnionTransformation):
        branches = [b for t in head.inputs for b in _branches(t, seen)]
        if any(isinstance(t, KeyByTransformation) for t in tail):
            _keyed_union(branches, tail, default_p, max_p, vertices, edges, side_outputs, bounded)
        else:
            _union_into_sinks(head, branches, tail, default_p, vertices, edges, side_outputs)
    elif isinstance(head, WindowJoinTransformation | IntervalJoinTransformation):
        _join(head, tail, default_p, max_p, vertices, edges, side_outputs, seen)
    else:
        raise PipelineError(f"unsupported transformation {head.name!r}")


# Inputs ----------------------------------------------------------------------------------------


def _branches(node: Transformation, seen: set[int]) -> list[list[Transformation]]:
    """The linear chains from a source that feed ``node`` (several through a union)."""
    chain: list[Transformation] = []
    current: Transformation | None = node
    while current is not None and not isinstance(current, MultiInputTransformation):
        _visit(current, seen)
        if not isinstance(current, SourceTransformation | TransformTransformation):
            raise PipelineError(
                f"{current.name!r} before a union or join is not supported yet: union and "
                "join inputs are sources with transform()s"
            )
        chain.append(current)
        current = current.input
    chain.reverse()
    if current is None:
        return [chain]
    if not isinstance(current, UnionTransformation):
        raise PipelineError(f"the output of {current.name!r} cannot be unioned or joined again yet")
    return [[*branch, *chain] for branch in _union_branches(current, seen)]


def _union_branches(union: UnionTransformation, seen: set[int]) -> list[list[Transformation]]:
    _visit(union, seen)
    return [branch for t in union.inputs for branch in _branches(t, seen)]


def _visit(node: Transformation, seen: set[int]) -> None:
    if node.id in seen:
        raise PipelineError(
            f"{node.name!r} feeds more than one downstream operator; branching pipelines are "
            "not supported yet (several sinks of one stream are): build one pipeline per sink"
        )
    seen.add(node.id)


def _source_chain(branch: list[Transformation], default_p: int) -> tuple[JobVertex, list[object]]:
    """The source vertex of ``branch`` (source, transforms) and its operators so far."""
    source = branch[0]
    assert isinstance(source, SourceTransformation)
    vertex = JobVertex(
        source.name, source.parallelism or default_p, SOURCE_TASK, is_source=True
    )  # finish_vertex sets the operators
    operators: list[object] = [
        SourceOperator(
            source.source,
            source.event_time,
            source.max_out_of_orderness_ms,
            source.name,
            source.idle_timeout_ms,
        )
    ]
    for t in branch[1:]:
        assert isinstance(t, TransformTransformation)
        check_parallelism(t, vertex)
        operators.append(TransformOperator(t.fn, t.name))
    return vertex, operators


def _transforms_and_sinks(tail: list[Transformation], after: str) -> list[Transformation]:
    for t in tail:
        if not isinstance(t, TransformTransformation | SinkTransformation):
            raise PipelineError(f"{t.name!r} after {after} is not supported yet")
    return tail


# Union -----------------------------------------------------------------------------------------


def _keyed_union(
    branches: list[list[Transformation]],
    tail: list[Transformation],
    default_p: int,
    max_p: int,
    vertices: list[JobVertex],
    edges: list[JobEdge],
    side_outputs: list[SinkOperator],
    bounded: bool,
) -> None:
    """Each branch, with the tail, built as a single-source pipeline; the keyed vertices of
    all branches but the first are dropped and their exchanges redirected to the first's."""
    sources: list[JobVertex] = []
    downstream: list[JobVertex] = []
    for i, branch in enumerate(branches):
        built: list[JobVertex] = []
        built_edges: list[JobEdge] = []
        build_vertices(
            [*branch, *tail], default_p, max_p, built, built_edges, side_outputs, bounded=bounded
        )
        source = built[0]
        exchange = [e for e in built_edges if e.source == source.vertex_id]
        assert len(exchange) == 1, "a keyed pipeline's source vertex has one exchange"
        if i == 0:
            keyed = exchange[0].target
            downstream = built[1:]
            edges.extend(built_edges)
        else:
            edges.append(
                JobEdge(source.vertex_id, keyed, exchange[0].pattern, exchange[0].key_columns)
            )
        sources.append(source)
    vertices.extend([*sources, *downstream])


def _union_into_sinks(
    union: UnionTransformation,
    branches: list[list[Transformation]],
    tail: list[Transformation],
    default_p: int,
    vertices: list[JobVertex],
    edges: list[JobEdge],
    side_outputs: list[SinkOperator],
) -> None:
    _transforms_and_sinks(tail, union.name)
    transforms = [t for t in tail if isinstance(t, TransformTransformation)]
    sinks = [t for t in tail if isinstance(t, SinkTransformation)]
    parallelism = {s.parallelism or default_p for s in sinks}
    if len(parallelism) != 1:
        raise PipelineError(
            f"the sinks of {union.name!r} have different parallelisms {sorted(parallelism)}; "
            "give them one"
        )
    names = ", ".join(s.name for s in sinks)
    consumer = JobVertex(names, parallelism.pop(), FORWARD_TASK)
    for branch in branches:
        source, operators = _source_chain([*branch, *transforms], default_p)
        finish_vertex(source, [*operators, RebalanceOperator(), *side_outputs], vertices)
        edges.append(JobEdge(source.vertex_id, consumer.vertex_id, DistributionPattern.REBALANCE))
    finish_vertex(consumer, [SinkOperator(s.sink, s.name) for s in sinks], vertices)


# Joins -----------------------------------------------------------------------------------------


def _join(
    join: WindowJoinTransformation | IntervalJoinTransformation,
    tail: list[Transformation],
    default_p: int,
    max_p: int,
    vertices: list[JobVertex],
    edges: list[JobEdge],
    side_outputs: list[SinkOperator],
    seen: set[int],
) -> None:
    parallelism = join.parallelism or default_p
    if parallelism > max_p:
        raise PipelineError(
            f"{join.name}: parallelism {parallelism} exceeds pipeline.max-parallelism={max_p}"
        )
    operator: WindowJoinOperator | IntervalJoinOperator
    if isinstance(join, WindowJoinTransformation):
        keys = (join.left_keys, join.right_keys)
        inputs = join.inputs
        window = join.window
        operator = WindowJoinOperator(*keys, window, join.suffix, join.name)
        consumer = JobVertex(join.name, parallelism, WINDOW_JOIN_TASK)
    else:
        left, right = join.keyed_inputs
        for key_by in (left, right):
            _visit(key_by, seen)
        keys = (left.keys, right.keys)
        inputs = (left.input, right.input)  # type: ignore[assignment]  # key_by has an input
        window = INTERVAL_ASSIGNER
        operator = IntervalJoinOperator(*keys, join.lower_ms, join.upper_ms, join.suffix, join.name)
        consumer = JobVertex(join.name, parallelism, INTERVAL_JOIN_TASK)
    for side, (side_input, side_keys) in enumerate(zip(inputs, keys, strict=True)):
        for branch in _branches(side_input, seen):
            source, operators = _source_chain(branch, default_p)
            event_time = branch[0].event_time  # type: ignore[attr-defined]  # a source
            if event_time is None:
                which = ("first", "second")[side]
                raise PipelineError(
                    f"{join.name} needs event time on its {which} input "
                    f"({branch[0].name!r}): pass event_time= to env.from_source()"
                )
            assign = _Assign(side_keys, window, event_time)
            finish_vertex(source, [*operators, assign, *side_outputs], vertices)
            edges.append(
                JobEdge(
                    source.vertex_id,
                    consumer.vertex_id,
                    DistributionPattern.HASH,
                    side_keys,
                    side,
                )
            )
    chained: list[object] = [operator]
    for t in _transforms_and_sinks(tail, join.name):
        check_parallelism(t, consumer)
        if isinstance(t, TransformTransformation):
            chained.append(TransformOperator(t.fn, t.name))
        else:
            assert isinstance(t, SinkTransformation)
            chained.append(SinkOperator(t.sink, t.name))
    finish_vertex(consumer, chained, vertices)
