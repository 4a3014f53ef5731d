"""Running keyed aggregates (``key_by().agg()``, no window) -> JobGraph: the keyed exchange,
boundedness, updating streams and the sinks that take them (issue 11)."""

from __future__ import annotations

import pytest

from millrace import (
    Configuration,
    DirectorySource,
    FileSource,
    ParquetSink,
    PostgresSink,
    StreamExecutionEnvironment,
    tumbling,
)
from millrace.api.job_graph_generator import KEYED_AGGREGATE_TASK, SOURCE_TASK
from millrace.api.operators import (
    KeyedAggregateOperator,
    KeyedRecordsOperator,
    LocalKeyedAggregateOperator,
    SinkOperator,
    SourceOperator,
    TransformOperator,
)
from millrace.errors import PipelineError
from millrace.runtime.jobgraph import DistributionPattern, OperatorKind

pytestmark = [pytest.mark.slow, pytest.mark.spark]


@pytest.fixture
def env(spark):
    return StreamExecutionEnvironment(Configuration({"parallelism.default": 3}), spark)


def words(env, source=None):
    from pyspark.sql import functions as F

    return env.from_source(source or FileSource.text("in")).transform(
        lambda df: df.select(F.explode(F.split("value", " ")).alias("word"))
    )


def test_a_word_count_needs_no_event_time_and_makes_two_vertices(env) -> None:
    from pyspark.sql import functions as F

    words(env).key_by("word").agg(F.count("*").alias("n")).sink_to(ParquetSink("out"))
    graph = env.get_job_graph("wc")

    first, second = graph.vertices
    assert [type(op.deserialize()) for op in first.operators][:3] == [
        SourceOperator,
        TransformOperator,
        LocalKeyedAggregateOperator,
    ]
    assert [type(op.deserialize()) for op in second.operators] == [
        KeyedAggregateOperator,
        SinkOperator,
    ]
    assert (first.invokable, second.invokable) == (SOURCE_TASK, KEYED_AGGREGATE_TASK)
    (edge,) = graph.edges
    assert (edge.pattern, edge.key_columns) == (DistributionPattern.HASH, ("word",))
    aggregate = second.operators[0].deserialize()
    assert aggregate.bounded and aggregate.keys == ("word",)
    assert second.operators[0].kind is OperatorKind.AGGREGATE
    assert second.parallelism == 3


def test_an_aggregate_that_does_not_decompose_ships_records(env) -> None:
    from pyspark.sql import functions as F

    (words(env).key_by("word").agg(F.count_distinct("word").alias("d")).sink_to(ParquetSink("out")))
    first, second = env.get_job_graph("wc").vertices
    assert KeyedRecordsOperator in [type(op.deserialize()) for op in first.operators]
    assert not second.operators[0].deserialize().plan.decomposable


def test_an_unbounded_running_aggregate_into_an_append_only_sink_is_refused(env) -> None:
    from pyspark.sql import functions as F

    (
        words(env, DirectorySource.text("in"))
        .key_by("word")
        .agg(F.count("*").alias("n"))
        .sink_to(ParquetSink("out"))
    )
    with pytest.raises(PipelineError, match=r"updating one .* accepts only appends") as error:
        env.get_job_graph("wc")
    assert "PostgresSink" in str(error.value)
    assert "window the aggregate" in str(error.value)


def test_an_unbounded_running_aggregate_upserts_into_postgres_on_its_keys(env) -> None:
    from pyspark.sql import functions as F

    (
        words(env, DirectorySource.text("in"))
        .key_by("word")
        .agg(F.count("*").alias("n"))
        .transform(lambda df: df)
        .sink_to(PostgresSink("host=127.0.0.1", "counts"))
    )
    _, second = env.get_job_graph("wc").vertices
    aggregate, _, sink = (op.deserialize() for op in second.operators)
    assert not aggregate.bounded
    assert sink.sink.upsert_keys == ("word",)


def test_a_bounded_running_aggregate_is_no_updating_stream(env) -> None:
    from pyspark.sql import functions as F

    words(env).key_by("word").agg(F.count("*").alias("n")).sink_to(
        PostgresSink("host=127.0.0.1", "counts")
    )
    _, second = env.get_job_graph("wc").vertices
    assert second.operators[-1].deserialize().sink.upsert_keys is None


def test_keying_an_aggregate_again_is_refused(env) -> None:
    from pyspark.sql import functions as F

    counted = words(env).key_by("word").agg(F.count("*").alias("n"))
    counted.key_by("n").agg(F.count("*").alias("words")).sink_to(ParquetSink("out"))
    with pytest.raises(PipelineError, match="aggregate once per pipeline"):
        env.get_job_graph("wc")


def test_a_window_after_a_running_aggregate_is_refused(env) -> None:
    from pyspark.sql import functions as F

    stream = env.from_source(FileSource.parquet("in"), event_time="ts")
    counted = stream.key_by("k").agg(F.count("*").alias("n"))
    counted.key_by("k").window(tumbling("1 h")).agg(F.count("*").alias("m")).sink_to(
        ParquetSink("out")
    )
    with pytest.raises(PipelineError, match="aggregate once per pipeline"):
        env.get_job_graph("wc")


def test_agg_needs_an_aggregate(env) -> None:
    with pytest.raises(ValueError, match="one or more Spark aggregate columns"):
        words(env).key_by("word").agg()
