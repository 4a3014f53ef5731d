"""Transformations -> JobGraph: operator chaining, the keyed exchange, invalid pipelines."""

from __future__ import annotations

import pytest

from millrace import (
    Configuration,
    FileSource,
    ParquetSink,
    StreamExecutionEnvironment,
    session,
    sliding,
    tumbling,
)
from millrace.api.job_graph_generator import SOURCE_TASK, WINDOW_TASK
from millrace.api.operators import (
    LocalWindowAggregateOperator,
    SinkOperator,
    SourceOperator,
    TransformOperator,
    WindowAggregateOperator,
    WindowAssignOperator,
)
from millrace.errors import ConfigError, PipelineError, UserCodeError
from millrace.runtime.jobgraph import DistributionPattern, JobGraph, JobVertex, OperatorKind

pytestmark = [pytest.mark.slow, pytest.mark.spark]


@pytest.fixture
def env(spark):
    return StreamExecutionEnvironment(Configuration({"parallelism.default": 3}), spark)


def source(env):
    return env.from_source(FileSource.parquet("in"), event_time="ts", name="src")


def test_keyed_window_makes_two_chained_vertices_joined_by_a_hash_edge(env) -> None:
    from pyspark.sql import functions as F

    (
        source(env)
        .transform(lambda df: df)
        .key_by("k")
        .window(tumbling("1 day"))
        .agg(F.count("*").alias("n"))
        .transform(lambda df: df)
        .sink_to(ParquetSink("out"))
    )
    graph = env.get_job_graph("job")

    first, second = graph.vertices
    assert [type(op.deserialize()) for op in first.operators] == [
        SourceOperator,
        TransformOperator,
        LocalWindowAggregateOperator,
        SinkOperator,  # the source's side outputs: dead letters
        SinkOperator,  # and late records
    ]
    assert [op.kind for op in first.operators][-2:] == [OperatorKind.SIDE_OUTPUT] * 2
    assert [type(op.deserialize()) for op in second.operators] == [
        WindowAggregateOperator,
        TransformOperator,
        SinkOperator,
    ]
    assert (first.invokable, second.invokable) == (SOURCE_TASK, WINDOW_TASK)
    assert first.is_source and not second.is_source
    assert (first.parallelism, second.parallelism) == (3, 3)
    (edge,) = graph.edges
    assert (edge.source, edge.target) == (first.vertex_id, second.vertex_id)
    assert edge.pattern is DistributionPattern.HASH and edge.key_columns == ("k",)
    assert graph.slots_required() == 3


def test_non_decomposable_aggregate_ships_records(env) -> None:
    from pyspark.sql import functions as F

    (
        source(env)
        .key_by("k")
        .window(tumbling("1 h"))
        .agg(F.count_distinct("x").alias("d"))
        .sink_to(ParquetSink("out"))
    )
    first, _ = env.get_job_graph("job").vertices
    assert isinstance(first.operators[-3].deserialize(), WindowAssignOperator)


def test_source_straight_into_a_sink_is_one_vertex(env) -> None:
    source(env).transform(lambda df: df).sink_to(ParquetSink("out"))
    (vertex,) = env.get_job_graph("job").vertices
    assert [op.kind for op in vertex.operators] == [
        OperatorKind.SOURCE,
        OperatorKind.TRANSFORM,
        OperatorKind.SINK,
        OperatorKind.SIDE_OUTPUT,
        OperatorKind.SIDE_OUTPUT,
    ]


def test_every_source_vertex_chains_its_side_outputs_as_sinks(env, tmp_path) -> None:
    source(env).transform(lambda df: df).sink_to(ParquetSink("out"))
    (vertex,) = env.get_job_graph("a job").vertices
    side = [op.deserialize() for op in vertex.operators if op.kind is OperatorKind.SIDE_OUTPUT]
    assert [s.side_output for s in side] == ["dead-letters", "late"]
    assert [s.sink.path.rsplit("/", 2)[-2:] for s in side] == [
        ["a_job", "dead-letters"],
        ["a_job", "late"],
    ]
    assert all(s.sink.mode == "append" for s in side)
    assert "Side output" not in vertex.name  # not part of what the vertex does


def test_no_sink_is_an_error(env) -> None:
    source(env)
    with pytest.raises(PipelineError, match="no sink"):
        env.get_job_graph("job")


def test_window_needs_event_time(env) -> None:
    from pyspark.sql import functions as F

    (
        env.from_source(FileSource.parquet("in"))
        .key_by("k")
        .window(tumbling("1 day"))
        .agg(F.count("*").alias("n"))
        .sink_to(ParquetSink("out"))
    )
    with pytest.raises(PipelineError, match="event_time"):
        env.get_job_graph("job")


def test_parallelism_change_without_key_by_is_an_error(env) -> None:
    source(env).transform(lambda df: df).set_parallelism(1).sink_to(ParquetSink("out"))
    with pytest.raises(PipelineError, match="only key_by"):
        env.get_job_graph("job")


def test_branching_is_rejected(env) -> None:
    stream = source(env)
    stream.sink_to(ParquetSink("a"))
    stream.transform(lambda df: df).sink_to(ParquetSink("b"))
    with pytest.raises(PipelineError, match="more than one downstream"):
        env.get_job_graph("job")


def test_several_sinks_of_one_stream_chain_into_one_vertex(env) -> None:
    stream = source(env).transform(lambda df: df)
    stream.sink_to(ParquetSink("a"))
    stream.sink_to(ParquetSink("b"))
    (vertex,) = env.get_job_graph("job").vertices
    assert [op.kind for op in vertex.operators][-4:-2] == [OperatorKind.SINK, OperatorKind.SINK]


def test_vertex_ids_are_stable_across_builds_and_ignore_sink_targets(spark) -> None:
    from pyspark.sql import functions as F

    def build(out: str, parallelism: int) -> list[str]:
        env = StreamExecutionEnvironment(Configuration(), spark)
        (
            source(env)
            .key_by("k")
            .window(tumbling("1 day"))
            .agg(F.count("*").alias("n"))
            .set_parallelism(parallelism)
            .sink_to(ParquetSink(out))
        )
        return [v.vertex_id for v in env.get_job_graph("job").vertices]

    first, second = build("out-1", 2), build("out-2", 3)
    assert first == second and len(set(first)) == 2


def test_api_rejects_bad_arguments(env) -> None:
    stream = source(env)
    with pytest.raises(TypeError):
        stream.transform("not a function")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        stream.key_by()
    with pytest.raises(ValueError):
        stream.key_by("k").window(tumbling("1 day")).agg()


def test_operators_travel_as_user_code_with_exact_spark_columns(env) -> None:
    from pyspark.sql import functions as F

    threshold = 15  # captured by the closure, travels by value
    (
        source(env)
        .transform(lambda df: df.where(F.col("d") > threshold), name="late ones")
        .key_by("k")
        .window(tumbling("1 day"))
        .agg(F.sum(F.col("a b") * 2).alias("x y"), F.avg("d").alias("avg d"))
        .sink_to(ParquetSink("out"))
    )
    first, second = env.get_job_graph("job").vertices

    assert [op.kind for op in first.operators] == [
        OperatorKind.SOURCE,
        OperatorKind.TRANSFORM,
        OperatorKind.PARTITION,
        OperatorKind.SIDE_OUTPUT,
        OperatorKind.SIDE_OUTPUT,
    ]
    assert second.operators[-1].name.startswith("Sink: parquet at /")
    window = second.operators[0].deserialize()
    assert window.plan.decomposable and window.plan.names == ("x y", "avg d")
    assert str(window.plan.columns[0]) == str(F.sum(F.col("a b") * 2).alias("x y"))
    transform = first.operators[1].deserialize()
    frame = env.spark.createDataFrame([(10,), (20,)], "d int")
    assert [r.d for r in transform.fn(frame).collect()] == [20]


def test_user_code_capturing_the_spark_session_is_rejected_with_advice(env) -> None:
    spark = env.spark
    stream = source(env).transform(lambda df: df.join(spark.range(3), "id"))
    stream.sink_to(ParquetSink("out"))
    with pytest.raises(UserCodeError, match=r"SparkSession .*df\.sparkSession"):
        env.get_job_graph("job")


def test_a_pandas_window_function_buffers_records_and_carries_its_parsed_schema(env) -> None:
    from pyspark.sql.types import StructType

    (
        source(env)
        .key_by("k")
        .window(session("1 h"))
        .allowed_lateness("10 min")
        .apply_in_pandas(lambda pdf: pdf, "k string, n long")
        .sink_to(ParquetSink("out"))
    )
    first, second = env.get_job_graph("job").vertices
    assign = first.operators[1].deserialize()
    window = second.operators[0].deserialize()
    assert isinstance(assign, WindowAssignOperator)
    assert (assign.window, assign.lateness_ms) == (session("1 h"), 600_000)
    assert window.plan is None and window.lateness_ms == 600_000
    assert isinstance(window.function.schema, StructType)
    assert window.function.schema.fieldNames() == ["k", "n"]


def test_sliding_partials_are_computed_before_the_exchange(env) -> None:
    from pyspark.sql import functions as F

    source(env).key_by("k").window(sliding("1 day", "6 h")).agg(F.count("*")).sink_to(
        ParquetSink("out")
    )
    first, _ = env.get_job_graph("job").vertices
    local = first.operators[1].deserialize()
    assert isinstance(local, LocalWindowAggregateOperator)
    assert local.window == sliding("1 day", "6 h")


def test_window_functions_reject_bad_arguments_before_anything_runs(env) -> None:
    windowed = source(env).key_by("k").window(session("1 h"))
    with pytest.raises(TypeError, match=r"pandas\.DataFrame"):
        windowed.apply_in_pandas("not a function", "n long")
    with pytest.raises(TypeError, match="DDL string"):
        windowed.apply_in_pandas(lambda pdf: pdf, ["n"])
    with pytest.raises(ValueError, match="output schema"):
        windowed.apply_in_pandas(lambda pdf: pdf, " ")
    with pytest.raises(ConfigError):
        windowed.allowed_lateness("soon")
    with pytest.raises(TypeError, match="sliding"):
        source(env).key_by("k").window("1 h")
    bad = source(env).key_by("k").window(sliding("1 h", "10 min"))
    bad.apply_in_pandas(lambda pdf: pdf, "n lung").sink_to(ParquetSink("out2"))
    with pytest.raises(PipelineError, match="'n lung' is not a Spark DDL schema"):
        env.get_job_graph("job")


def keyed_pipeline(spark, mode: str, source_p: int, keyed_p: int, **settings: object) -> JobGraph:
    """src -> before -> window(1 day) -> after -> parquet, as a JobGraph."""
    from pyspark.sql import functions as F

    settings = {"parallelism.default": keyed_p, **settings}
    env = StreamExecutionEnvironment(Configuration(settings), spark)
    env.set_runtime_mode(mode)
    (
        env.from_source(FileSource.parquet("in"), event_time="ts", name="src")
        .set_parallelism(source_p)
        .transform(lambda df: df, name="before")
        .key_by("k")
        .window(tumbling("1 day"))
        .agg(F.count("*").alias("n"))
        .transform(lambda df: df, name="after")
        .sink_to(ParquetSink("out"))
    )
    return env.get_job_graph("job")


@pytest.mark.parametrize(
    ("mode", "source_p", "keyed_p", "chained"),
    [
        ("BATCH", 1, 1, True),  # the HASH edge between two single subtasks is forward
        ("BATCH", 2, 2, False),
        ("BATCH", 1, 2, False),
        ("BATCH", 2, 1, False),
        ("STREAMING", 1, 1, True),
        ("STREAMING", 2, 2, False),
        ("STREAMING", 1, 2, False),
    ],
)
def test_a_keyed_stage_of_one_subtask_is_chained_into_its_source_of_one(
    spark, mode, source_p, keyed_p, chained
) -> None:
    from millrace.api.keyed_chaining import KEYED_CHAIN_TASK

    graph = keyed_pipeline(spark, mode, source_p, keyed_p)
    task = KEYED_CHAIN_TASK
    if mode == "STREAMING":
        task = "millrace.spark.keyed_chain_stream_task:WindowChainStreamTask"
    if not chained:
        assert len(graph.vertices) == 2 and len(graph.edges) == 1
        assert task not in [v.invokable for v in graph.vertices]
        assert all(v.chained_keyed is None for v in graph.vertices)
        return
    (vertex,) = graph.vertices
    assert not graph.edges and vertex.is_source and vertex.invokable == task
    assert [type(op.deserialize()) for op in vertex.operators] == [
        SourceOperator,
        TransformOperator,
        LocalWindowAggregateOperator,
        WindowAggregateOperator,
        TransformOperator,
        SinkOperator,
        SinkOperator,  # the source's side outputs, last
        SinkOperator,
    ]
    assert [op.kind for op in vertex.operators][-2:] == [OperatorKind.SIDE_OUTPUT] * 2
    assert vertex.name.startswith("src -> before -> ") and "-> after -> " in vertex.name


def test_a_streaming_keyed_chain_splits_back_into_the_vertices_it_was_chained_from(spark) -> None:
    """Same ids, chains, names and edge as the job built unchained; sinks keep their keys."""
    (chain,) = keyed_pipeline(spark, "STREAMING", 1, 1).vertices
    apart = keyed_pipeline(spark, "STREAMING", 1, 1, **{"pipeline.chain-keyed-stages": False})
    vertices, edges = chain.unchained()
    assert [v.vertex_id for v in vertices] == [v.vertex_id for v in apart.vertices]
    assert edges == apart.edges

    def shape(v: JobVertex) -> tuple:  # payloads: each build pickles its own lambdas
        return (
            v.name,
            v.parallelism,
            v.invokable,
            v.is_source,
            [(o.kind, o.name) for o in v.operators],
        )

    assert [shape(v) for v in vertices] == [shape(v) for v in apart.vertices]
    sinks = [i for i, op in enumerate(chain.operators) if op.kind.writes]
    unchained = {
        (v.vertex_id, i)
        for v in apart.vertices
        for i, op in enumerate(v.operators)
        if op.kind.writes
    }
    assert {chain.unchained_position(i) for i in sinks} == unchained
    assert chain.unchained_position(0) == (chain.vertex_id, 0)
