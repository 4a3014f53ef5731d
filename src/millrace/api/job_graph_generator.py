"""Turns a pipeline's Transformations into a JobGraph with operator chaining.

Chaining (seed 002): consecutive operators with a forward connection and equal parallelism run in
one task, so each bundle of a subtask costs one Spark job for the whole chain. A ``key_by`` ends a
chain with a HASH edge. Before a keyed window with decomposable aggregates, the upstream chain
ends with a local pre-aggregation (Flink's local-global aggregation).

Every operator is serialized here, in the client, exactly as it will travel to a remote
cluster (``SerializedOperator``), so the embedded cluster runs what a standalone one would.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from millrace.api.join_operators import IntervalJoinOperator, RebalanceOperator, WindowJoinOperator
from millrace.api.keyed_chaining import chain_keyed_stages, chain_keyed_streaming_stages
from millrace.api.multi_input_transformations import MultiInputTransformation
from millrace.api.operators import (
    KeyedAggregateOperator,
    KeyedRecordsOperator,
    LocalKeyedAggregateOperator,
    LocalWindowAggregateOperator,
    PandasWindowFunction,
    SinkOperator,
    SourceOperator,
    TransformOperator,
    WindowAggregateOperator,
    WindowAssignOperator,
)
from millrace.api.transformations import (
    KeyByTransformation,
    KeyedAggregateTransformation,
    SinkTransformation,
    SourceTransformation,
    Transformation,
    TransformTransformation,
    WindowAggregateTransformation,
)
from millrace.errors import PipelineError
from millrace.runtime.jobgraph import (
    DistributionPattern,
    JobEdge,
    JobGraph,
    JobVertex,
    OperatorKind,
    SerializedOperator,
)
from millrace.runtime.source.split_enumerator import Boundedness
from millrace.types import JobVertexId

if TYPE_CHECKING:  # imported when needed: it imports pyspark
    from millrace.spark.aggregation import AggregatePlan

__all__ = [
    "BATCH_TASKS",
    "FORWARD_TASK",
    "INTERVAL_JOIN_TASK",
    "KEYED_AGGREGATE_TASK",
    "SOURCE_TASK",
    "WINDOW_JOIN_TASK",
    "WINDOW_TASK",
    "generate_job_graph",
]

SOURCE_TASK = "millrace.spark.source_stream_task:SourceStreamTask"
WINDOW_TASK = "millrace.spark.window_stream_task:WindowStreamTask"
KEYED_AGGREGATE_TASK = "millrace.spark.keyed_aggregate_stream_task:KeyedAggregateStreamTask"
FORWARD_TASK = "millrace.spark.forward_stream_task:ForwardStreamTask"
WINDOW_JOIN_TASK = "millrace.spark.window_join_stream_task:WindowJoinStreamTask"
INTERVAL_JOIN_TASK = "millrace.spark.interval_join_stream_task:IntervalJoinStreamTask"
BATCH_TASKS = {
    SOURCE_TASK: "millrace.spark.batch_source_task:BatchSourceTask",
    WINDOW_TASK: "millrace.spark.batch_window_task:BatchWindowTask",
    KEYED_AGGREGATE_TASK: "millrace.spark.batch_keyed_aggregate_task:BatchKeyedAggregateTask",
    FORWARD_TASK: "millrace.spark.batch_forward_task:BatchForwardTask",
    WINDOW_JOIN_TASK: "millrace.spark.batch_two_input_task:BatchWindowJoinTask",
    INTERVAL_JOIN_TASK: "millrace.spark.batch_two_input_task:BatchIntervalJoinTask",
}
"""The task each streaming task becomes in BATCH mode (``execution.runtime-mode``); a vertex
whose task has no entry is refused in BATCH mode (``PipelineError``)."""


def generate_job_graph(
    name: str,
    sinks: list[SinkTransformation],
    default_parallelism: int,
    max_parallelism: int,
    side_outputs: Mapping[str, Any] | None = None,
    batch: bool = False,
    chain_keyed: bool = True,
) -> JobGraph:
    """Build the JobGraph of the pipelines ending in ``sinks``.

    Args:
        name: The job's name.
        sinks: The pipelines' sinks.
        default_parallelism: Parallelism of operators that set none.
        max_parallelism: Key groups (``pipeline.max-parallelism``).
        side_outputs: Tag (``dead-letters``, ``late``) -> the sink every source vertex writes
            that side output to; chained into each source vertex as SIDE_OUTPUT operators.
        batch: Build the BATCH form (``BATCH_TASKS``: each stage runs to its end; a keyed
            stage of parallelism 1 fed by a source of parallelism 1 is chained into it,
            ``api/keyed_chaining.py``).
        chain_keyed: In STREAMING, chain a window or running aggregate of parallelism 1 into
            the source of parallelism 1 feeding it (``pipeline.chain-keyed-stages``,
            ``api/keyed_chaining.py``).

    Raises:
        PipelineError: If the pipeline has no sink, branches, or uses a construct that cannot be
            chained (a parallelism change without key_by, a window without event time), or
            ``batch`` and an operator has no BATCH form.
        UserCodeError: If an operator's user code cannot be serialized.
    """
    import millrace.spark.column_serde  # noqa: F401  (ships Spark columns with the operators)

    if not sinks:
        raise PipelineError("the pipeline has no sink: call sink_to() before execute()")
    vertices: list[JobVertex] = []
    edges: list[JobEdge] = []
    seen: set[int] = set()
    fan_out: dict[int, list[SinkTransformation]] = {}  # several sinks of one stream
    for sink in sinks:
        fan_out.setdefault(sink.input.id if sink.input else sink.id, []).append(sink)
    extra = [
        SinkOperator(sink, f"Side output: {tag}", side_output=tag)
        for tag, sink in (side_outputs or {}).items()
    ]
    chains = [[*_linearize(group[0], seen), *group[1:]] for group in fan_out.values()]
    bounded = all(
        source.source.boundedness is Boundedness.BOUNDED
        for chain in chains
        for source in _sources(chain[0])
    )
    for chain in chains:
        if isinstance(chain[0], MultiInputTransformation):  # union, joins: own module
            from millrace.api.multi_input_graph import build_multi_input_vertices

            build_multi_input_vertices(
                chain, default_parallelism, max_parallelism, vertices, edges, extra, seen, bounded
            )
            continue
        _build_vertices(
            chain, default_parallelism, max_parallelism, vertices, edges, extra, bounded=bounded
        )
    if batch:
        for vertex in vertices:
            if vertex.invokable not in BATCH_TASKS:
                raise PipelineError(
                    f"{vertex.name!r} ({vertex.invokable}) cannot run in BATCH mode yet: set "
                    "execution.runtime-mode=STREAMING"
                )
            vertex.invokable = BATCH_TASKS[vertex.invokable]
        chain_keyed_stages(vertices, edges)  # a HASH edge between two single subtasks
    graph = _with_stable_ids(JobGraph(name, vertices, edges, max_parallelism=max_parallelism))
    if not batch and chain_keyed:  # after the ids: checkpoints name both vertices as unchained
        chain_keyed_streaming_stages(graph.vertices, graph.edges)
    return graph


def _sources(head: Transformation | None) -> list[SourceTransformation]:
    """The sources upstream of ``head``, through the inputs of unions and joins."""
    if isinstance(head, SourceTransformation):
        return [head]
    if isinstance(head, MultiInputTransformation):
        return [s for t in head.inputs for s in _sources(t)]
    return _sources(head.input) if head is not None else []


def _with_stable_ids(graph: JobGraph) -> JobGraph:
    """Give every vertex an id derived from its position and its chained operators (not its
    sinks' targets), so that a savepoint of one run restores into the next run of the same
    pipeline, at any parallelism."""
    renamed = {}
    for index, vertex in enumerate(graph.vertices):
        parts = [str(index), vertex.invokable]
        parts += [op.name for op in vertex.operators if not op.kind.writes]
        digest = hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32]
        renamed[vertex.vertex_id] = JobVertexId(digest)
        vertex.vertex_id = JobVertexId(digest)
    graph.edges = [
        JobEdge(renamed[e.source], renamed[e.target], e.pattern, e.key_columns, e.input_index)
        for e in graph.edges
    ]
    return graph


def _linearize(sink: SinkTransformation, seen: set[int]) -> list[Transformation]:
    chain: list[Transformation] = []
    node: Transformation | None = sink
    while node is not None:
        if node.id in seen:
            raise PipelineError(
                f"{node.name!r} feeds more than one downstream operator; branching pipelines are "
                "not supported yet (several sinks of one stream are): build one pipeline per "
                "sink"
            )
        seen.add(node.id)
        chain.append(node)
        node = node.input
    chain.reverse()
    if not isinstance(chain[0], SourceTransformation | MultiInputTransformation):
        raise PipelineError(f"pipeline of {sink.name!r} does not start at a source")
    return chain


def _build_vertices(
    chain: list[Transformation],
    default_p: int,
    max_p: int,
    vertices: list[JobVertex],
    edges: list[JobEdge],
    side_outputs: list[SinkOperator],
    *,
    bounded: bool,
) -> None:
    source = chain[0]
    assert isinstance(source, SourceTransformation)
    event_time = source.event_time
    parallelism = source.parallelism or default_p
    operators: list[object] = [
        SourceOperator(
            source.source,
            event_time,
            source.max_out_of_orderness_ms,
            source.name,
            source.idle_timeout_ms,
        )
    ]
    current = JobVertex(source.name, parallelism, SOURCE_TASK, is_source=True)  # _finish: operators
    source_side_outputs = side_outputs
    upsert_keys: tuple[str, ...] | None = None  # set while the stream is an updating one
    i = 1
    while i < len(chain):
        t = chain[i]
        if isinstance(t, TransformTransformation):
            _check_parallelism(t, current)
            operators.append(TransformOperator(t.fn, t.name))
        elif isinstance(t, SinkTransformation):
            _check_parallelism(t, current)
            operators.append(SinkOperator(_sink_for(t, upsert_keys), t.name))
        elif isinstance(t, KeyByTransformation):
            keyed = chain[i + 1] if i + 1 < len(chain) else None
            if any(
                isinstance(op, WindowAggregateOperator | KeyedAggregateOperator) for op in operators
            ):
                raise PipelineError(
                    f"{t.name}: keying the output of a window or an aggregate again is not "
                    "supported yet; aggregate once per pipeline"
                )
            if isinstance(keyed, KeyedAggregateTransformation):
                plan = _aggregate_plan(keyed.aggregates)
                operators.append(
                    LocalKeyedAggregateOperator(t.keys, plan)
                    if plan.decomposable
                    else KeyedRecordsOperator(t.keys)
                )
                current = _next_vertex(
                    current,
                    operators,
                    source_side_outputs,
                    vertices,
                    edges,
                    t,
                    keyed,
                    default_p,
                    max_p,
                    KEYED_AGGREGATE_TASK,
                )
                source_side_outputs = []
                operators = [KeyedAggregateOperator(t.keys, plan, keyed.name, bounded)]
                upsert_keys = None if bounded else t.keys
                i += 2
                continue
            window = keyed
            if not isinstance(window, WindowAggregateTransformation):
                raise PipelineError(
                    f"{t.name} must be followed by .agg(...), .window(...).agg(...) or "
                    ".window(...).apply_in_pandas(...)"
                )
            if event_time is None:
                raise PipelineError(
                    f"{window.name} needs event time: pass event_time= to env.from_source()"
                )
            window_plan, function = _window_function(window)
            lateness = window.lateness_ms
            operators.append(
                LocalWindowAggregateOperator(
                    t.keys, window.window, event_time, window_plan, lateness
                )
                if window_plan is not None and window_plan.decomposable
                else WindowAssignOperator(t.keys, window.window, event_time, lateness)
            )
            current = _next_vertex(
                current,
                operators,
                source_side_outputs,
                vertices,
                edges,
                t,
                window,
                default_p,
                max_p,
                WINDOW_TASK,
            )
            source_side_outputs = []
            operators = [
                WindowAggregateOperator(
                    t.keys, window.window, window_plan, window.name, lateness, function
                )
            ]
            i += 1
        else:
            raise PipelineError(f"unsupported transformation {t.name!r}")
        i += 1
    _finish(current, [*operators, *source_side_outputs], vertices)


def _next_vertex(
    current: JobVertex,
    operators: list[object],
    side_outputs: list[SinkOperator],
    vertices: list[JobVertex],
    edges: list[JobEdge],
    key_by: KeyByTransformation,
    keyed: Transformation,
    default_p: int,
    max_p: int,
    invokable: str,
) -> JobVertex:
    """Close ``current`` with ``operators`` and open the keyed vertex that ``keyed`` runs in,
    behind a HASH edge on ``key_by``'s keys."""
    _finish(current, [*operators, *side_outputs], vertices)
    parallelism = keyed.parallelism or default_p
    if parallelism > max_p:
        raise PipelineError(
            f"{keyed.name}: parallelism {parallelism} exceeds pipeline.max-parallelism={max_p}"
        )
    nxt = JobVertex(keyed.name, parallelism, invokable)
    edges.append(JobEdge(current.vertex_id, nxt.vertex_id, DistributionPattern.HASH, key_by.keys))
    return nxt


def _sink_for(t: SinkTransformation, upsert_keys: tuple[str, ...] | None) -> Any:
    """The sink of ``t``; for an updating stream, the sink in upsert mode on ``upsert_keys``.

    Raises:
        PipelineError: If the stream is updating and the sink accepts only appends.
    """
    if upsert_keys is None:
        return t.sink
    with_upsert_keys = getattr(t.sink, "with_upsert_keys", None)
    if with_upsert_keys is None:
        raise PipelineError(
            f"{t.name}: the stream is an updating one (a running aggregate by "
            f"{', '.join(upsert_keys)} over an unbounded source emits new values for its keys "
            f"at every checkpoint) and {t.sink.describe()} accepts only appends. Write it to a "
            "sink that upserts (PostgresSink), window the aggregate (.window(...).agg(...)), or "
            "read bounded sources only (the job then writes one final row per key)"
        )
    return with_upsert_keys(upsert_keys)


_KINDS: dict[type, OperatorKind] = {
    SourceOperator: OperatorKind.SOURCE,
    TransformOperator: OperatorKind.TRANSFORM,
    LocalWindowAggregateOperator: OperatorKind.PARTITION,
    WindowAssignOperator: OperatorKind.PARTITION,
    LocalKeyedAggregateOperator: OperatorKind.PARTITION,
    KeyedRecordsOperator: OperatorKind.PARTITION,
    WindowAggregateOperator: OperatorKind.WINDOW,
    KeyedAggregateOperator: OperatorKind.AGGREGATE,
    SinkOperator: OperatorKind.SINK,
    WindowJoinOperator: OperatorKind.WINDOW,
    IntervalJoinOperator: OperatorKind.WINDOW,
    RebalanceOperator: OperatorKind.PARTITION,
}


def _finish(vertex: JobVertex, operators: list[object], vertices: list[JobVertex]) -> None:
    names = [getattr(op, "name", type(op).__name__.removesuffix("Operator")) for op in operators]
    vertex.operators = tuple(
        SerializedOperator.of(_kind(op), name, op)
        for op, name in zip(operators, names, strict=True)
    )
    vertex.name = " -> ".join(
        name
        for op, name in zip(operators, names, strict=True)
        if _kind(op) is not OperatorKind.SIDE_OUTPUT
    )
    vertices.append(vertex)


def _kind(op: object) -> OperatorKind:
    if isinstance(op, SinkOperator) and op.side_output is not None:
        return OperatorKind.SIDE_OUTPUT
    return _KINDS[type(op)]


def _check_parallelism(t: Transformation, vertex: JobVertex) -> None:
    if t.parallelism is not None and t.parallelism != vertex.parallelism:
        raise PipelineError(
            f"{t.name!r} has parallelism {t.parallelism} but its input has "
            f"{vertex.parallelism}; only key_by() may change the parallelism"
        )


def _aggregate_plan(aggregates: tuple[object, ...]) -> AggregatePlan:
    from millrace.spark.aggregation import AggregatePlan

    return AggregatePlan.of(aggregates)


def _window_function(
    window: WindowAggregateTransformation,
) -> tuple[AggregatePlan | None, PandasWindowFunction | None]:
    """The aggregate plan of ``agg``, or the pandas function of ``apply_in_pandas`` with its
    schema parsed (Spark's DDL parser: the SparkSession that builds the pipeline runs).

    Raises:
        PipelineError: If the DDL schema does not parse.
    """
    if window.pandas_function is None:
        return _aggregate_plan(window.aggregates), None
    fn, schema = window.pandas_function
    if isinstance(schema, str):
        from pyspark.sql.types import StructType, _parse_datatype_string

        try:
            parsed = _parse_datatype_string(schema)
        except Exception as error:
            raise PipelineError(
                f"{window.name}: the schema {schema!r} is not a Spark DDL schema such as "
                f"'origin string, flights long': {str(error).splitlines()[0]}"
            ) from error
        if not isinstance(parsed, StructType):
            raise PipelineError(
                f"{window.name}: the schema {schema!r} must list columns, e.g. 'n long'"
            )
        schema = parsed
    return None, PandasWindowFunction(fn, schema)


# The chain building that the vertices of unions and joins reuse (api/multi_input_graph.py).
build_vertices = _build_vertices
finish_vertex = _finish
check_parallelism = _check_parallelism
