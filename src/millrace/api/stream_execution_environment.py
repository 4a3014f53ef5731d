"""StreamExecutionEnvironment: where a pipeline is built and executed (Flink's name).

``get_execution_environment()`` returns the environment of the context the script runs in:
inside ``millrace run`` it submits to that command's cluster; in a plain ``python`` process it
is a local environment that starts an embedded MiniCluster for each ``execute`` and shares one
SparkSession. Spark starts when the environment is created, because building aggregate columns
(``F.count``...) needs a running SparkContext.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from millrace.api.data_stream import DataStream
from millrace.api.job_graph_generator import generate_job_graph
from millrace.api.runtime_mode import resolve_runtime_mode, sources_of
from millrace.api.transformations import SinkTransformation, SourceTransformation
from millrace.config import (
    CheckpointingOptions,
    Configuration,
    ExecutionOptions,
    PipelineOptions,
    RuntimeExecutionMode,
    parse_duration,
)
from millrace.connectors.file_formats import absolute_local_path
from millrace.errors import ConfigError, JobExecutionError
from millrace.runtime.executiongraph import IOMetrics
from millrace.runtime.job_result import JobDetails, JobResult, JobResultSuccess
from millrace.runtime.jobgraph import JobGraph
from millrace.types import JobId

__all__ = [
    "JobExecutionResult",
    "JobSubmissionResult",
    "PipelineExecutor",
    "StreamExecutionEnvironment",
]


@dataclass(frozen=True)
class JobSubmissionResult:
    """What ``execute`` returns for a job submitted detached: it runs on without the client.

    Attributes:
        job_id, job_name: The job.
    """

    job_id: JobId
    job_name: str


PipelineExecutor = Callable[[JobGraph], "JobResult | JobSubmissionResult"]
"""Runs a JobGraph to the end and returns its JobResult, or submits it detached and returns a
JobSubmissionResult (Flink's PipelineExecutor)."""

_context: tuple[Configuration, Any, PipelineExecutor] | None = None


@dataclass(frozen=True)
class JobExecutionResult:
    """What ``execute`` returns for a job that FINISHED.

    Attributes:
        job_id, job_name: The job.
        duration: Wall time from submission to the end, seconds.
        accumulators: Vertex name -> counters (records in/out, dead letters, late records).
        details: Final JobDetails.
    """

    job_id: JobId
    job_name: str
    duration: float
    accumulators: dict[str, IOMetrics]
    details: JobDetails


class StreamExecutionEnvironment:
    """Builds and runs pipelines.

    Args:
        configuration: Job and cluster configuration.
        spark: The SparkSession to build columns with and to run on.
        executor: Runs a JobGraph; None for a local MiniCluster per ``execute``.

    Threading:
        Build and execute from one thread.
    """

    def __init__(
        self, configuration: Configuration, spark: Any, executor: PipelineExecutor | None = None
    ) -> None:
        self.configuration = configuration
        self.spark = spark
        self._executor = executor
        self._sinks: list[SinkTransformation] = []
        self._parallelism = configuration.get(ExecutionOptions.PARALLELISM)
        self._max_parallelism = configuration.get(ExecutionOptions.MAX_PARALLELISM)

    @staticmethod
    def get_execution_environment(
        configuration: Configuration | None = None,
    ) -> StreamExecutionEnvironment:
        """The environment of the current context (``millrace run``), else a local one.

        Raises:
            ConfigError: If ``configuration`` holds an invalid value.
        """
        if _context is not None:
            base, spark, executor = _context
            conf = base if configuration is None else base.with_overrides(configuration.to_dict())
            return StreamExecutionEnvironment(conf, spark, executor)
        conf = configuration or Configuration()
        conf.validate()
        from millrace.spark.spark_session import create_spark_session

        return StreamExecutionEnvironment(conf, create_spark_session(conf))

    @property
    def parallelism(self) -> int:
        return self._parallelism

    def set_parallelism(self, parallelism: int) -> StreamExecutionEnvironment:
        """Default parallelism of operators (``parallelism.default``).

        Raises:
            ValueError: If < 1 or above the max parallelism.
        """
        if not 1 <= parallelism <= self._max_parallelism:
            raise ValueError(
                f"parallelism must be in [1, {self._max_parallelism}], got {parallelism}"
            )
        self._parallelism = parallelism
        return self

    def set_max_parallelism(self, max_parallelism: int) -> StreamExecutionEnvironment:
        """Number of key groups (``pipeline.max-parallelism``)."""
        if max_parallelism < 1:
            raise ValueError(f"max parallelism must be >= 1, got {max_parallelism}")
        self._max_parallelism = max_parallelism
        return self

    def enable_checkpointing(
        self, interval_ms: int, mode: str = "EXACTLY_ONCE"
    ) -> StreamExecutionEnvironment:
        """Checkpoint the job every ``interval_ms`` ms in ``mode`` (Flink's method).

        Sets ``execution.checkpointing.interval`` and ``execution.checkpointing.mode`` for the
        jobs this environment executes; other checkpoint keys come from the configuration.

        Args:
            interval_ms: Time between the starts of two checkpoints, ms (> 0).
            mode: ``EXACTLY_ONCE`` (barriers aligned) or ``AT_LEAST_ONCE``.

        Raises:
            ValueError: If ``interval_ms`` <= 0 or ``mode`` is not one of the two.
        """
        if interval_ms <= 0:
            raise ValueError(f"checkpoint interval must be > 0 ms, got {interval_ms}")
        allowed = CheckpointingOptions.MODE.choices or ()
        if mode not in allowed:
            raise ValueError(f"checkpointing mode must be one of {allowed}, got {mode!r}")
        self.configuration = self.configuration.with_overrides(
            {
                CheckpointingOptions.INTERVAL.key: f"{interval_ms} ms",
                CheckpointingOptions.MODE.key: mode,
            }
        )
        return self

    def set_runtime_mode(self, mode: RuntimeExecutionMode | str) -> StreamExecutionEnvironment:
        """Run the jobs of this environment in ``mode`` (Flink's ``setRuntimeMode``).

        Sets ``execution.runtime-mode``: ``STREAMING`` (the default), ``BATCH`` (every source
        bounded: stage by stage, blocking exchanges, no watermarks, no checkpoints) or
        ``AUTOMATIC`` (BATCH when every source is bounded). A BATCH job with an unbounded
        source fails in ``execute()`` with a PipelineError, before anything starts.

        Args:
            mode: A RuntimeExecutionMode or its name.

        Raises:
            ConfigError: If ``mode`` is not one of the three.
        """
        key = ExecutionOptions.RUNTIME_MODE
        value = key.parse(mode.value if isinstance(mode, RuntimeExecutionMode) else mode)
        self.configuration = self.configuration.with_overrides({key.key: value.value})
        return self

    def from_source(
        self,
        source: Any,
        event_time: str | None = None,
        max_out_of_orderness: str | float = 0,
        name: str | None = None,
        idleness: str | float | None = None,
    ) -> DataStream:
        """A stream reading ``source`` (``millrace.connectors``).

        Args:
            source: e.g. ``FileSource.parquet(path)``.
            event_time: Timestamp column with each record's event time (needed by windows).
            max_out_of_orderness: Allowed disorder within a split: duration string or seconds.
            name: Operator name (default ``Source: <description>``).
            idleness: Duration string or seconds (> 0), or None. A source subtask that read no
                record for this long goes idle: it stops holding back the event time
                downstream until its next record, which may then be late (Flink's
                ``WatermarkStrategy.withIdleness``). For unbounded sources whose splits can
                stay empty, e.g. a Kafka partition nobody writes to. None: a subtask with open
                splits is always active.

        Raises:
            ConfigError: If ``max_out_of_orderness`` or ``idleness`` is not a duration, or
                ``idleness`` is not positive.
        """
        ooo_ms = round(parse_duration(max_out_of_orderness, key="max_out_of_orderness") * 1000)
        idle_ms = None
        if idleness is not None:
            idle_ms = round(parse_duration(idleness, key="idleness") * 1000)
            if idle_ms <= 0:
                raise ConfigError("idleness", idleness, "a duration > 0")
        t = SourceTransformation(
            name or f"Source: {source.describe()}",
            None,
            source=source,
            event_time=event_time,
            max_out_of_orderness_ms=ooo_ms,
            idle_timeout_ms=idle_ms,
        )
        return DataStream(self, t)

    def _add_sink(self, sink: SinkTransformation) -> None:
        self._sinks.append(sink)

    def get_job_graph(self, job_name: str) -> JobGraph:
        """The JobGraph of the pipelines built so far.

        Raises:
            PipelineError: If the pipeline is invalid (see ``generate_job_graph``), or the
                runtime mode is BATCH and a source is unbounded.
            ConfigError: If ``execution.runtime-mode`` is not STREAMING, BATCH or AUTOMATIC.
        """
        from millrace.spark.side_outputs import side_output_sinks

        settings = _job_configuration(self.configuration)
        mode = resolve_runtime_mode(
            self.configuration.get(ExecutionOptions.RUNTIME_MODE), sources_of(self._sinks)
        )
        settings[ExecutionOptions.RUNTIME_MODE.key] = mode.value  # resolved: never AUTOMATIC
        job_graph = generate_job_graph(
            job_name,
            self._sinks,
            self._parallelism,
            self._max_parallelism,
            side_output_sinks(Configuration(settings), job_name),
            batch=mode is RuntimeExecutionMode.BATCH,
            chain_keyed=self.configuration.get(PipelineOptions.CHAIN_KEYED_STAGES),
        )
        job_graph.configuration = settings
        savepoint = self.configuration.get(CheckpointingOptions.SAVEPOINT_PATH)
        job_graph.savepoint_path = absolute_local_path(savepoint) if savepoint else None
        return job_graph

    def execute(self, job_name: str = "millrace job") -> JobExecutionResult | JobSubmissionResult:
        """Run the pipelines until their input ends; clears them for the next job.

        Returns:
            The JobExecutionResult of a job that FINISHED, or a JobSubmissionResult when the
            environment submits detached (``millrace run --detached``).

        Raises:
            PipelineError: If the pipeline is invalid.
            JobExecutionError: If the job FAILED or was cancelled; the message holds the root
                cause.
        """
        job_graph = self.get_job_graph(job_name)
        self._sinks = []
        result = (self._executor or self._execute_locally)(job_graph)
        if isinstance(result, JobSubmissionResult):
            return result
        if not isinstance(result, JobResultSuccess):
            raise JobExecutionError(result.job_id, result.root_cause)
        return JobExecutionResult(
            result.job_id, job_name, result.duration, result.accumulators, result.details
        )

    def _execute_locally(self, job_graph: JobGraph) -> JobResult:
        from millrace.runtime.client.job_client import NO_TIMEOUT
        from millrace.runtime.minicluster import MiniCluster
        from millrace.spark.spark_task_runtime import SparkTaskRuntime

        runtime = SparkTaskRuntime(self.configuration, given=self.spark)
        with MiniCluster(self.configuration, runtime) as cluster:
            return cluster.job_client.submit_job_wait(job_graph).result(timeout=NO_TIMEOUT)


def _job_configuration(configuration: Configuration) -> dict[str, object]:
    """The job-level settings that travel with the JobGraph; a local side-output directory is
    made absolute, so TaskManagers started elsewhere write where the client meant."""
    settings = configuration.job_level()
    directory = configuration.get(PipelineOptions.SIDE_OUTPUT_DIR)
    if "://" not in directory:
        settings[PipelineOptions.SIDE_OUTPUT_DIR.key] = os.path.abspath(directory)
    return settings


def set_context(configuration: Configuration, spark: Any, executor: PipelineExecutor) -> None:
    """Make ``get_execution_environment`` return environments bound to ``executor`` (used by
    ``millrace run``)."""
    global _context
    _context = (configuration, spark, executor)


def clear_context() -> None:
    global _context
    _context = None
