"""DataStream, KeyedStream, WindowedStream: the user's pipeline-building API (Flink's names).

Every method records a Transformation; nothing runs until ``env.execute()``. Records are Spark
rows: ``transform`` takes any function from a pyspark DataFrame to a DataFrame and applies it to
each bundle, and aggregates are Spark aggregate columns.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from millrace.api.transformations import (
    KeyByTransformation,
    KeyedAggregateTransformation,
    SinkTransformation,
    Transformation,
    TransformTransformation,
    WindowAggregateTransformation,
)
from millrace.api.windows import WindowAssigner, format_duration_ms
from millrace.config import parse_duration

if TYPE_CHECKING:
    from millrace.api.joined_streams import IntervalJoin, JoinedStreams
    from millrace.api.stream_execution_environment import StreamExecutionEnvironment

__all__ = ["DataStream", "DataStreamSink", "KeyedStream", "WindowedStream"]


class DataStream:
    """A stream of Spark rows produced by ``transformation``.

    Threading:
        Build pipelines on one thread; the objects are not thread-safe.
    """

    def __init__(self, env: StreamExecutionEnvironment, transformation: Transformation) -> None:
        self._env = env
        self._transformation = transformation

    @property
    def transformation(self) -> Transformation:
        return self._transformation

    def transform(self, fn: Callable[[Any], Any], name: str = "transform") -> DataStream:
        """Apply ``fn`` (pyspark DataFrame -> DataFrame) to every bundle; chained, no exchange.

        ``fn`` must be a per-record (stateless) function of its input: filters, projections,
        column expressions, joins with static data. It runs inside the bundle's Spark job.

        Raises:
            TypeError: If ``fn`` is not callable.
        """
        if not callable(fn):
            raise TypeError(f"transform() takes a function DataFrame -> DataFrame, got {fn!r}")
        return self._add(TransformTransformation(name, self._transformation, fn=fn))

    def key_by(self, *keys: str) -> KeyedStream:
        """Partition the stream by the value of the ``keys`` columns (hash of key groups).

        Raises:
            ValueError: If no key column is given.
        """
        if not keys or not all(isinstance(k, str) and k for k in keys):
            raise ValueError("key_by() takes one or more column names")
        t = KeyByTransformation(f"key_by({', '.join(keys)})", self._transformation, keys=keys)
        return KeyedStream(self._env, t)

    def union(self, *others: DataStream) -> DataStream:
        """The records of this stream and of ``others``, which must have the same schema
        (Flink's union; a mismatch fails at the first bundle, naming both schemas).

        Raises:
            TypeError: If an argument is not a DataStream.
            ValueError: If no other stream is given.
        """
        from millrace.api.multi_input_transformations import UnionTransformation

        if not others:
            raise ValueError("union() takes one or more other DataStreams")
        for other in others:
            if not isinstance(other, DataStream):
                raise TypeError(f"union() takes DataStreams, got {other!r}")
        inputs = (self._transformation, *(o.transformation for o in others))
        names = ", ".join(t.name for t in inputs)
        return self._add(UnionTransformation(f"Union({names})", None, inputs=inputs))

    def join(self, other: DataStream, suffix: str = "_right") -> JoinedStreams:
        """Flink's window join: ``a.join(b).where(*keys).equal_to(*keys).window(assigner)``
        (``millrace.api.joined_streams``); ``suffix`` renames clashing columns of ``other``.

        Raises:
            TypeError: If ``other`` is not a DataStream.
        """
        from millrace.api.joined_streams import JoinedStreams

        if not isinstance(other, DataStream):
            raise TypeError(f"join() takes a DataStream, got {other!r}")
        return JoinedStreams(self._env, self._transformation, other.transformation, suffix)

    def sink_to(self, sink: Any, name: str | None = None) -> DataStreamSink:
        """Write the stream to ``sink`` (see ``millrace.sinks``)."""
        t = SinkTransformation(name or f"Sink: {sink.describe()}", self._transformation, sink=sink)
        self._env._add_sink(t)
        return DataStreamSink(t)

    def set_parallelism(self, parallelism: int) -> DataStream:
        """Set the parallelism of the operator that produces this stream.

        Raises:
            ValueError: If ``parallelism`` < 1.
        """
        if parallelism < 1:
            raise ValueError(f"parallelism must be >= 1, got {parallelism}")
        self._transformation.parallelism = parallelism
        return self

    def _add(self, transformation: Transformation) -> DataStream:
        return DataStream(self._env, transformation)


class KeyedStream:
    """A stream partitioned by key columns."""

    def __init__(self, env: StreamExecutionEnvironment, key_by: KeyByTransformation) -> None:
        self._env = env
        self._key_by = key_by

    def window(self, assigner: WindowAssigner) -> WindowedStream:
        """Group each key's records into event-time windows of ``assigner``: ``tumbling``,
        ``sliding`` or ``session`` (``millrace``).

        Raises:
            TypeError: If ``assigner`` is not a window assigner from ``millrace.windows``.
        """
        if not isinstance(assigner, WindowAssigner):
            raise TypeError(
                "window() takes tumbling(...), sliding(...) or session(...) from millrace, "
                f"got {assigner!r}"
            )
        return WindowedStream(self._env, self._key_by, assigner)

    def agg(self, *aggregates: Any) -> DataStream:
        """A running aggregate per key with Spark aggregate columns, no window (Flink's
        ``keyBy().sum/reduce``; SQL's ``GROUP BY`` over a stream).

        count, sum, min, max and avg are pre-aggregated before the exchange and merged into
        keyed state (local-global aggregation); any other aggregate keeps the key's records in
        keyed state and Spark aggregates them again when the key's value is emitted.

        Output: in a job whose sources are all bounded, one final row per key when the input
        ends. In an unbounded job an *updating* stream: at every checkpoint, the keys whose
        aggregates changed since the previous one, with their new values (an upsert on the
        key columns). Only sinks that accept updates take it (``PostgresSink`` upserts on the
        keys); an append-only sink such as ``ParquetSink`` is refused at graph build.

        Schema:
            ``(key columns..., aggregates...)``, one row per key (per emission).

        Raises:
            ValueError: If no aggregate is given.
        """
        if not aggregates:
            raise ValueError("agg() takes one or more Spark aggregate columns, e.g. F.count('*')")
        keys = self._key_by.keys
        t = KeyedAggregateTransformation(
            f"Aggregate by {', '.join(keys)}", self._key_by, keys=keys, aggregates=aggregates
        )
        return DataStream(self._env, t)

    def interval_join(self, other: KeyedStream, suffix: str = "_right") -> IntervalJoin:
        """Flink's event-time interval join with ``other`` (keyed by as many columns):
        ``.between(lower, upper)`` (``millrace.api.joined_streams``).

        Raises:
            TypeError: If ``other`` is not a KeyedStream.
            PipelineError: If the key counts differ.
        """
        from millrace.api.joined_streams import IntervalJoin

        if not isinstance(other, KeyedStream):
            raise TypeError(f"interval_join() takes a KeyedStream (b.key_by(...)), got {other!r}")
        return IntervalJoin(self._env, self._key_by, other._key_by, suffix)


class WindowedStream:
    """A keyed stream with a window assigner; ``agg`` or ``apply_in_pandas`` makes it a
    DataStream again."""

    def __init__(
        self,
        env: StreamExecutionEnvironment,
        key_by: KeyByTransformation,
        window: WindowAssigner,
    ) -> None:
        self._env = env
        self._key_by = key_by
        self._window = window
        self._lateness_ms = 0

    def allowed_lateness(self, lateness: str | float) -> WindowedStream:
        """Keep each window ``lateness`` (e.g. ``"1 h"``, or seconds) in state after it fired
        (Flink's ``allowedLateness``).

        A window fires when the watermark reaches its end - 1, as without lateness; a record
        for it arriving while ``end - 1 + lateness > watermark`` fires it again with the
        updated result over all its records (another row for the same key and window, as
        Flink's late firing); a record later than that goes to the late side output. A
        merging window (session) that grows by a late record fires as the merged window.

        Returns:
            This WindowedStream.

        Raises:
            ConfigError: If ``lateness`` is not a non-negative duration.
        """
        self._lateness_ms = round(parse_duration(lateness, key="allowed lateness") * 1000)
        return self

    def apply_in_pandas(self, fn: Callable[..., Any], schema: Any) -> DataStream:
        """Run a pandas function over each (key, window)'s records when the window fires
        (Flink's ProcessWindowFunction), executed by Spark as
        ``groupBy(keys, window_start, window_end).applyInPandas(fn, schema)``.

        The window's records are buffered in keyed state until it fires. ``fn`` receives one
        ``pandas.DataFrame`` per key and window: the records' columns plus ``window_start``
        and ``window_end`` (UTC timestamps; for sessions, the merged session's bounds); it may
        also take ``(key, pdf)`` as applyInPandas allows, the key being the tuple
        ``(keys..., window_start, window_end)``. The rows it returns are the output.

        Schema:
            ``schema``: the rows ``fn`` returns, any number per key and window.

        Raises:
            TypeError: If ``fn`` is not callable or ``schema`` is neither a DDL string nor a
                pyspark ``StructType``.
            ValueError: If ``schema`` is an empty string.
            PipelineError: From ``execute()``, if the DDL schema does not parse.
        """
        if not callable(fn):
            raise TypeError(
                f"apply_in_pandas() takes a function pandas.DataFrame -> DataFrame, got {fn!r}"
            )
        if isinstance(schema, str):
            if not schema.strip():
                raise ValueError("apply_in_pandas() needs the output schema, e.g. 'n long'")
        elif type(schema).__name__ != "StructType":
            raise TypeError(
                "apply_in_pandas() takes the output schema as a DDL string ('origin string, "
                f"n long') or a pyspark StructType, got {schema!r}"
            )
        name = getattr(fn, "__name__", "fn")
        t = WindowAggregateTransformation(
            f"{self._describe()}: apply_in_pandas({name})",
            self._key_by,
            keys=self._key_by.keys,
            window=self._window,
            lateness_ms=self._lateness_ms,
            pandas_function=(fn, schema),
        )
        return DataStream(self._env, t)

    def _describe(self) -> str:
        lateness = (
            f", lateness {format_duration_ms(self._lateness_ms)}" if self._lateness_ms else ""
        )
        return f"{self._window}{lateness} by {', '.join(self._key_by.keys)}"

    def agg(self, *aggregates: Any) -> DataStream:
        """Aggregate every (key, window) with Spark aggregate columns, when the window fires.

        count, sum, min, max and avg are pre-aggregated before the exchange and merged on the
        keyed side (local-global aggregation); any other aggregate buffers the window's records
        in keyed state and Spark aggregates them when the window fires.

        Schema:
            ``(key columns..., window_start: timestamp, window_end: timestamp, aggregates...)``,
            one row per key and window.

        Raises:
            ValueError: If no aggregate is given.
        """
        if not aggregates:
            raise ValueError("agg() takes one or more Spark aggregate columns, e.g. F.count('*')")
        keys = self._key_by.keys
        t = WindowAggregateTransformation(
            self._describe(),
            self._key_by,
            keys=keys,
            window=self._window,
            aggregates=tuple(aggregates),
            lateness_ms=self._lateness_ms,
        )
        return DataStream(self._env, t)


class DataStreamSink:
    """The end of a pipeline."""

    def __init__(self, transformation: SinkTransformation) -> None:
        self.transformation = transformation

    def set_parallelism(self, parallelism: int) -> DataStreamSink:
        """Set the sink's parallelism (it chains only with an upstream of equal parallelism)."""
        if parallelism < 1:
            raise ValueError(f"parallelism must be >= 1, got {parallelism}")
        self.transformation.parallelism = parallelism
        return self
