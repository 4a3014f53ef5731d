"""Union and two-input joins -> JobGraph: several edges into one vertex, each with its input,
and the pipelines that cannot run refused before anything starts."""

from __future__ import annotations

import pytest

from millrace import Configuration, FileSource, ParquetSink, StreamExecutionEnvironment, tumbling
from millrace.api.job_graph_generator import (
    BATCH_TASKS,
    FORWARD_TASK,
    INTERVAL_JOIN_TASK,
    SOURCE_TASK,
    WINDOW_JOIN_TASK,
    WINDOW_TASK,
)
from millrace.api.join_operators import (
    INTERVAL_ASSIGNER,
    IntervalJoinOperator,
    RebalanceOperator,
    WindowJoinOperator,
)
from millrace.api.operators import (
    LocalWindowAggregateOperator,
    SinkOperator,
    SourceOperator,
    TransformOperator,
    WindowAggregateOperator,
    WindowAssignOperator,
)
from millrace.errors import PipelineError
from millrace.runtime.jobgraph import DistributionPattern
from millrace.spark.two_input_stream_task import joined_columns

pytestmark = [pytest.mark.slow, pytest.mark.spark]


@pytest.fixture
def env(spark):
    return StreamExecutionEnvironment(Configuration({"parallelism.default": 3}), spark)


def source(env, name, event_time="ts"):
    return env.from_source(FileSource.parquet(name), event_time=event_time, name=name)


def kinds(vertex):
    return [type(op.deserialize()) for op in vertex.operators]


def test_union_before_key_by_hash_partitions_every_input_into_one_keyed_vertex(env) -> None:
    from pyspark.sql import functions as F

    a = source(env, "a").transform(lambda df: df, name="ta")
    b = source(env, "b")
    (
        a.union(b)
        .transform(lambda df: df, name="after")
        .key_by("k")
        .window(tumbling("1 h"))
        .agg(F.max("x").alias("m"))
        .sink_to(ParquetSink("out"))
    )
    graph = env.get_job_graph("job")

    first, second, keyed = graph.vertices
    assert (first.invokable, second.invokable, keyed.invokable) == (
        SOURCE_TASK,
        SOURCE_TASK,
        WINDOW_TASK,
    )
    assert kinds(first)[:4] == [
        SourceOperator,
        TransformOperator,
        TransformOperator,
        LocalWindowAggregateOperator,
    ]
    assert kinds(second)[:3] == [SourceOperator, TransformOperator, LocalWindowAggregateOperator]
    assert kinds(keyed) == [WindowAggregateOperator, SinkOperator]
    assert [(e.source, e.target, e.pattern, e.key_columns) for e in graph.edges] == [
        (first.vertex_id, keyed.vertex_id, DistributionPattern.HASH, ("k",)),
        (second.vertex_id, keyed.vertex_id, DistributionPattern.HASH, ("k",)),
    ]


def test_union_into_a_sink_rebalances_into_one_sink_vertex(env) -> None:
    a, b, c = source(env, "a"), source(env, "b"), source(env, "c", event_time=None)
    a.union(b.union(c)).transform(lambda df: df, name="after").sink_to(ParquetSink("out"))
    graph = env.get_job_graph("job")

    *sources, sink = graph.vertices
    assert len(sources) == 3
    for vertex in sources:
        assert kinds(vertex)[:3] == [SourceOperator, TransformOperator, RebalanceOperator]
    assert sink.invokable == FORWARD_TASK
    assert kinds(sink) == [SinkOperator]
    assert {e.target for e in graph.edges} == {sink.vertex_id}
    assert {e.pattern for e in graph.edges} == {DistributionPattern.REBALANCE}


def test_window_join_feeds_its_inputs_keyed_by_their_own_keys(env) -> None:
    a, b, c = source(env, "a"), source(env, "b"), source(env, "c")
    a.union(c).join(b).where("x", "y").equal_to("u", "v").window(tumbling("1 h")).sink_to(
        ParquetSink("out")
    )
    graph = env.get_job_graph("job")

    *sources, join = graph.vertices
    assert join.invokable == WINDOW_JOIN_TASK
    assert kinds(join) == [WindowJoinOperator, SinkOperator]
    edges = {graph.vertex(e.source).name.split(" ")[0]: e for e in graph.edges}
    assert {name: (e.input_index, e.key_columns) for name, e in edges.items()} == {
        "a": (0, ("x", "y")),
        "c": (0, ("x", "y")),
        "b": (1, ("u", "v")),
    }
    assign = sources[0].operators[1].deserialize()
    assert assign == WindowAssignOperator(("x", "y"), tumbling("1 h"), "ts")


def test_interval_join_tags_rows_with_their_event_time_in_ms(env) -> None:
    a, b = source(env, "a"), source(env, "b", event_time="tb")
    a.key_by("k").interval_join(b.key_by("j")).between("-1 h", "30 min").transform(
        lambda df: df
    ).sink_to(ParquetSink("out"))
    graph = env.get_job_graph("job")

    _left, right, join = graph.vertices
    assert join.invokable == INTERVAL_JOIN_TASK
    operator = join.operators[0].deserialize()
    assert isinstance(operator, IntervalJoinOperator)
    assert (operator.lower_ms, operator.upper_ms) == (-3_600_000, 1_800_000)
    assert kinds(join) == [IntervalJoinOperator, TransformOperator, SinkOperator]
    assert right.operators[1].deserialize() == WindowAssignOperator(("j",), INTERVAL_ASSIGNER, "tb")
    assert [e.input_index for e in graph.edges] == [0, 1]


def test_join_inputs_need_event_time(env) -> None:
    a, b = source(env, "a"), source(env, "b", event_time=None)
    a.join(b).where("k").equal_to("k").window(tumbling("1 h")).sink_to(ParquetSink("out"))
    with pytest.raises(PipelineError, match="needs event time on its second input"):
        env.get_job_graph("job")


def test_mismatched_key_counts_fail_while_the_pipeline_is_built(env) -> None:
    a, b = source(env, "a"), source(env, "b")
    with pytest.raises(PipelineError, match="same number of keys"):
        a.join(b).where("k", "l").equal_to("k")
    with pytest.raises(PipelineError, match="same number of columns"):
        a.key_by("k").interval_join(b.key_by("k", "l"))
    with pytest.raises(PipelineError, match="swap them"):
        a.key_by("k").interval_join(b.key_by("k")).between("1 h", "-1 h")


def test_a_join_output_cannot_be_windowed_yet(env) -> None:
    from pyspark.sql import functions as F

    a, b = source(env, "a"), source(env, "b")
    joined = a.join(b).where("k").equal_to("k").window(tumbling("1 h"))
    joined.key_by("k").window(tumbling("1 h")).agg(F.count("*").alias("n")).sink_to(
        ParquetSink("out")
    )
    with pytest.raises(PipelineError, match="not supported yet"):
        env.get_job_graph("job")


def test_joined_columns_keep_equal_keys_once_and_suffix_other_clashes() -> None:
    got = joined_columns(
        ["k", "t", "x", "__ws", "__kg"],
        ["k", "t", "t_right", "y", "__ws"],
        ("k",),
        ("k",),
        "_right",
    )
    assert got == [
        ("l", "k", "k"),
        ("l", "t", "t"),
        ("l", "x", "x"),
        ("r", "t", "t_right"),
        ("r", "t_right", "t_right_right"),
        ("r", "y", "y"),
    ]


def test_union_before_a_running_aggregate_feeds_one_keyed_vertex(env) -> None:
    from pyspark.sql import functions as F

    source(env, "a").union(source(env, "b")).key_by("k").agg(F.sum("x").alias("s")).sink_to(
        ParquetSink("out")
    )
    graph = env.get_job_graph("job")

    first, second, keyed = graph.vertices
    assert first.is_source and second.is_source and not keyed.is_source
    assert [(e.source, e.target) for e in graph.edges] == [
        (first.vertex_id, keyed.vertex_id),
        (second.vertex_id, keyed.vertex_id),
    ]


def test_a_window_join_refuses_session_windows(env) -> None:
    from millrace import session

    a, b = source(env, "a"), source(env, "b")
    with pytest.raises(PipelineError, match="merges windows"):
        a.join(b).where("k").equal_to("k").window(session("1 h"))


BATCH_JOIN_TASKS = {
    "window join": "millrace.spark.batch_two_input_task:BatchWindowJoinTask",
    "interval join": "millrace.spark.batch_two_input_task:BatchIntervalJoinTask",
    "union into a sink": "millrace.spark.batch_forward_task:BatchForwardTask",
}


def two_input_pipeline(env, kind: str) -> None:
    a, b = source(env, "a"), source(env, "b")
    if kind == "window join":
        a.join(b).where("k").equal_to("k").window(tumbling("1 h")).sink_to(ParquetSink("out"))
    elif kind == "interval join":
        a.key_by("k").interval_join(b.key_by("k")).between("-1 h", "0 h").sink_to(
            ParquetSink("out")
        )
    else:
        a.union(b).sink_to(ParquetSink("out"))


@pytest.mark.parametrize("kind", list(BATCH_JOIN_TASKS))
def test_joins_and_unions_into_sinks_run_their_batch_tasks_in_batch_mode(env, kind) -> None:
    env.set_runtime_mode("BATCH")
    two_input_pipeline(env, kind)
    graph = env.get_job_graph("job")

    *sources, consumer = graph.vertices
    assert [v.invokable for v in sources] == [BATCH_TASKS[SOURCE_TASK]] * 2
    assert consumer.invokable == BATCH_JOIN_TASKS[kind]


def test_a_task_without_a_batch_form_is_refused_in_batch_mode_before_anything_starts(
    env, monkeypatch
) -> None:
    monkeypatch.delitem(BATCH_TASKS, WINDOW_JOIN_TASK)
    env.set_runtime_mode("BATCH")
    two_input_pipeline(env, "window join")
    with pytest.raises(PipelineError, match="cannot run in BATCH mode yet: set execution"):
        env.get_job_graph("job")
