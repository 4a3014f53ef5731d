"""``execution.runtime-mode`` (Flink's): STREAMING by default, BATCH, AUTOMATIC = BATCH when every
source is bounded; BATCH with an unbounded source and bad values are refused before anything
starts, naming what to change. No Spark needed."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from millrace import (
    Configuration,
    DirectorySource,
    FileSource,
    RuntimeExecutionMode,
    StreamExecutionEnvironment,
)
from millrace.api.runtime_mode import resolve_runtime_mode, sources_of
from millrace.api.transformations import SinkTransformation, SourceTransformation
from millrace.cli.main import app
from millrace.config import ExecutionOptions
from millrace.errors import ConfigError, PipelineError


def source(name: str, bounded: bool) -> SourceTransformation:
    connector = FileSource.parquet("/data/f") if bounded else DirectorySource.parquet("/data/in")
    return SourceTransformation(name, None, source=connector)


def test_the_default_is_streaming_as_in_flink() -> None:
    assert Configuration().get(ExecutionOptions.RUNTIME_MODE) is RuntimeExecutionMode.STREAMING


@pytest.mark.parametrize(
    ("mode", "bounded", "resolved"),
    [
        ("STREAMING", [True], "STREAMING"),
        ("STREAMING", [False], "STREAMING"),
        ("BATCH", [True, True], "BATCH"),
        ("AUTOMATIC", [True, True], "BATCH"),
        ("AUTOMATIC", [True, False], "STREAMING"),
    ],
)
def test_resolution(mode, bounded, resolved) -> None:
    sources = [source(f"s{i}", b) for i, b in enumerate(bounded)]
    assert resolve_runtime_mode(RuntimeExecutionMode(mode), sources).value == resolved


def test_batch_with_an_unbounded_source_names_it_and_what_to_change() -> None:
    sources = [source("flights", True), source("inbox", False)]
    with pytest.raises(PipelineError) as info:
        resolve_runtime_mode(RuntimeExecutionMode.BATCH, sources)
    message = str(info.value)
    assert "execution.runtime-mode=BATCH" in message and "'inbox' is unbounded" in message
    assert "STREAMING (or AUTOMATIC)" in message and "'flights'" not in message


def test_sources_of_walks_every_pipeline_once() -> None:
    a, b = source("a", True), source("b", True)
    sinks = [SinkTransformation("x", a), SinkTransformation("y", a), SinkTransformation("z", b)]
    assert sources_of(sinks) == [a, b]


def test_set_runtime_mode_takes_the_enum_or_its_name() -> None:
    env = StreamExecutionEnvironment(Configuration(), spark=None)
    assert env.set_runtime_mode(RuntimeExecutionMode.BATCH) is env
    assert env.configuration.get(ExecutionOptions.RUNTIME_MODE) is RuntimeExecutionMode.BATCH
    env.set_runtime_mode("AUTOMATIC")
    assert env.configuration.get(ExecutionOptions.RUNTIME_MODE) is RuntimeExecutionMode.AUTOMATIC


def test_a_bad_mode_names_the_key_the_value_and_what_is_allowed() -> None:
    with pytest.raises(ConfigError) as info:
        Configuration({"execution.runtime-mode": "batch-ish"}).validate()
    assert info.value.key == "execution.runtime-mode"
    assert info.value.value == "batch-ish"
    assert info.value.allowed == "one of STREAMING, BATCH, AUTOMATIC"
    env = StreamExecutionEnvironment(Configuration(), spark=None)
    with pytest.raises(ConfigError, match=r"execution\.runtime-mode"):
        env.set_runtime_mode("FAST")


def test_millrace_config_lists_the_key() -> None:
    result = CliRunner().invoke(app, ["config"], env={"COLUMNS": "300"})
    assert result.exit_code == 0
    assert "execution.runtime-mode" in result.output and "STREAMING" in result.output
