"""Typed, validated configuration: keys, defaults, units (Flink style).

A :class:`Configuration` maps keys such as ``rpc.ask-timeout`` to values. Every known key is a
:class:`ConfigOption` with a type, a default and a description; values given as strings (from
``-D key=value`` or a YAML file) are parsed and validated when read, and an invalid value raises
:class:`~millrace.errors.ConfigError` naming the key, the value and what is allowed.

Durations are read into float seconds (``"10 s"``, ``"500 ms"``, ``"1 min"``); sizes into int
bytes (``"10485760b"``, ``"64 mb"``).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeAlias, TypeVar

from millrace.errors import ConfigError

__all__ = [
    "CheckpointingOptions",
    "ClusterOptions",
    "ConfigOption",
    "Configuration",
    "ExecutionOptions",
    "FailoverOptions",
    "HeartbeatOptions",
    "HighAvailabilityMode",
    "HighAvailabilityOptions",
    "HttpSourceOptions",
    "JobManagerOptions",
    "MetricOptions",
    "PipelineOptions",
    "RestOptions",
    "RpcOptions",
    "RuntimeExecutionMode",
    "SecurityOptions",
    "SparkOptions",
    "TaskManagerOptions",
    "all_options",
    "check_high_availability",
    "check_metric_reporters",
    "check_rpc_limits",
    "metric_reporters",
    "parse_duration",
    "parse_port_range",
    "parse_size",
]

T = TypeVar("T")

_DURATION_UNITS = {
    "ms": 0.001,
    "milli": 0.001,
    "millis": 0.001,
    "millisecond": 0.001,
    "milliseconds": 0.001,
    "s": 1.0,
    "sec": 1.0,
    "secs": 1.0,
    "second": 1.0,
    "seconds": 1.0,
    "min": 60.0,
    "mins": 60.0,
    "minute": 60.0,
    "minutes": 60.0,
    "h": 3600.0,
    "hour": 3600.0,
    "hours": 3600.0,
    "d": 86400.0,
    "day": 86400.0,
    "days": 86400.0,
}
_SIZE_UNITS = {
    "b": 1,
    "bytes": 1,
    "k": 1024,
    "kb": 1024,
    "kib": 1024,
    "m": 1024**2,
    "mb": 1024**2,
    "mib": 1024**2,
    "g": 1024**3,
    "gb": 1024**3,
    "gib": 1024**3,
}
_NUMBER_UNIT = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*$")


def parse_duration(value: object, *, key: str = "duration") -> float:
    """Parse ``"10 s"``, ``"500ms"``, ``"1 min"`` or a number of seconds into float seconds.

    Raises:
        ConfigError: If the value is not a non-negative duration with a known unit.
    """
    if isinstance(value, bool):
        raise ConfigError(key, value, "a duration such as '10 s' or '500 ms'")
    if isinstance(value, int | float):
        if value < 0:
            raise ConfigError(key, value, "a non-negative duration")
        return float(value)
    match = _NUMBER_UNIT.match(str(value))
    unit = match.group(2).lower() if match else ""
    if not match or (unit and unit not in _DURATION_UNITS):
        raise ConfigError(
            key, value, "a duration: a number with a unit of ms, s, min, h or d (e.g. '10 s')"
        )
    return float(match.group(1)) * _DURATION_UNITS.get(unit, 1.0)


def parse_size(value: object, *, key: str = "size") -> int:
    """Parse ``"10485760b"``, ``"64 mb"`` or an int into bytes.

    Raises:
        ConfigError: If the value is not a non-negative size with a known unit.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise ConfigError(key, value, "a non-negative size in bytes")
        return value
    match = _NUMBER_UNIT.match(str(value))
    unit = match.group(2).lower() if match else ""
    if not match or (unit and unit not in _SIZE_UNITS):
        raise ConfigError(key, value, "a size: a number with a unit of b, kb, mb or gb")
    return int(float(match.group(1)) * _SIZE_UNITS.get(unit, 1))


def _parse_int(value: object, key: str) -> int:
    if isinstance(value, bool):
        raise ConfigError(key, value, "an integer")
    try:
        return int(str(value).strip()) if not isinstance(value, int) else value
    except ValueError:
        raise ConfigError(key, value, "an integer") from None


def _parse_bool(value: object, key: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "on", "1"):
        return True
    if text in ("false", "no", "off", "0"):
        return False
    raise ConfigError(key, value, "true or false")


@dataclass(frozen=True)
class ConfigOption(Generic[T]):
    """One configuration key with its type, default and constraints.

    Args:
        key: Dotted key, e.g. ``rpc.ask-timeout``.
        kind: One of ``duration`` (float s), ``size`` (int bytes), ``int``, ``float``,
            ``bool``, ``str``, ``enum`` (a member of the default's Enum), ``url`` (a directory,
            made absolute, or a URL of an installed fsspec protocol).
        default: Default value (already parsed), or a callable of the Configuration for
            derived defaults (e.g. heartbeat.interval = ask timeout / 10, seed 000).
        description: What the key controls, shown by ``millrace config``.
        minimum: Smallest allowed numeric value, inclusive.
        maximum: Largest allowed numeric value, inclusive.
        choices: Allowed values for ``str`` options.
        schemes: For a ``str`` option, the URL schemes (``"sc://"``) a non-empty value must
            start with.
    """

    key: str
    kind: str
    default: T | Callable[[Configuration], T]
    description: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] | None = None
    schemes: tuple[str, ...] | None = None

    def parse(self, raw: object) -> T:
        """Parse and validate ``raw``.

        Raises:
            ConfigError: If ``raw`` is not allowed for this key.
        """
        key = self.key
        value: Any
        if self.kind == "duration":
            value = parse_duration(raw, key=key)
        elif self.kind == "size":
            value = parse_size(raw, key=key)
        elif self.kind == "int":
            value = _parse_int(raw, key)
        elif self.kind == "float":
            try:
                value = float(raw)  # type: ignore[arg-type]  # any object: TypeError is caught
            except (TypeError, ValueError):
                raise ConfigError(key, raw, "a number") from None
        elif self.kind == "bool":
            value = _parse_bool(raw, key)
        elif self.kind == "enum":
            enum_type: Any = type(self.default)  # an enum option's default is a member
            try:
                value = raw if isinstance(raw, enum_type) else enum_type(str(raw))
            except ValueError:
                raise ConfigError(key, raw, "one of " + ", ".join(self.choices or ())) from None
        elif self.kind == "url":
            value = _parse_url(raw, key)
        else:
            value = str(raw)
            if self.choices is not None and value not in self.choices:
                raise ConfigError(key, raw, "one of " + ", ".join(self.choices))
            if self.schemes is not None and value and not value.startswith(self.schemes):
                allowed = " or ".join(f"{scheme}HOST:PORT" for scheme in self.schemes)
                raise ConfigError(key, raw, f"empty or a URL {allowed}")
        if self.minimum is not None and value < self.minimum:
            raise ConfigError(key, raw, f"a value >= {self.minimum:g}")
        if self.maximum is not None and value > self.maximum:
            raise ConfigError(key, raw, f"a value <= {self.maximum:g}")
        return value


def _parse_url(raw: object, key: str) -> str:
    """A directory (made absolute) or a URL whose fsspec protocol is installed."""
    import fsspec

    text = str(raw).strip()
    allowed = "a directory or a URL of an installed fsspec protocol (file://, s3a://, ...)"
    if not text:
        raise ConfigError(key, raw, allowed)
    if "://" not in text:
        return str(Path(text).resolve())
    protocol = text.split("://", 1)[0]
    try:
        fsspec.get_filesystem_class(protocol)
    except (ValueError, ImportError) as error:
        raise ConfigError(key, raw, f"{allowed}; {protocol}: {error}") from None
    return text


Default: TypeAlias = T | Callable[["Configuration"], T]
"""A parsed default, or a function of the Configuration for derived defaults."""


def _duration(
    key: str, default: Default[float], description: str, **kw: Any
) -> ConfigOption[float]:
    """A duration (``"10 s"``, ``"200 ms"`` or seconds), as float seconds."""
    return ConfigOption(key, "duration", default, description, **kw)


def _size(key: str, default: Default[int], description: str, **kw: Any) -> ConfigOption[int]:
    """A size (``"10 mb"`` or bytes), as int bytes."""
    return ConfigOption(key, "size", default, description, **kw)


def _int(key: str, default: Default[int], description: str, **kw: Any) -> ConfigOption[int]:
    return ConfigOption(key, "int", default, description, **kw)


def _float(key: str, default: Default[float], description: str, **kw: Any) -> ConfigOption[float]:
    return ConfigOption(key, "float", default, description, **kw)


def _bool(key: str, default: Default[bool], description: str) -> ConfigOption[bool]:
    return ConfigOption(key, "bool", default, description)


def _str(key: str, default: Default[str], description: str, **kw: Any) -> ConfigOption[str]:
    return ConfigOption(key, "str", default, description, **kw)


def _url(key: str, default: Default[str], description: str) -> ConfigOption[str]:
    """A directory (made absolute) or a URL of an installed fsspec protocol."""
    return ConfigOption(key, "url", default, description)


E = TypeVar("E", bound=enum.Enum)


def _enum(key: str, default: E, description: str) -> ConfigOption[E]:
    """One of an Enum's values (given as the value's text), as the Enum member."""
    members = tuple(str(m.value) for m in type(default))
    return ConfigOption(key, "enum", default, description, choices=members)


def _derived_handshake_timeout(conf: Configuration) -> float:
    return min(5.0, conf.get(RpcOptions.LOOKUP_TIMEOUT))


def _derived_write_queue_size(conf: Configuration) -> int:
    return max(64 * 1024 * 1024, 2 * conf.get(RpcOptions.FRAMESIZE))


class RpcOptions:
    """RPC keys (seed 000's akka.* keys under Flink's current names)."""

    ASK_TIMEOUT = _duration(
        "rpc.ask-timeout",
        10.0,
        "Timeout of every ask (call returning a future). Current Flink uses 10 s; seed 000's "
        "100 s predates it.",
        minimum=0.001,
    )
    LOOKUP_TIMEOUT = _duration(
        "rpc.lookup-timeout",
        10.0,
        "Timeout for resolving a gateway at an address; shorter than the ask timeout so that "
        "a missing endpoint fails fast (seed 000).",
        minimum=0.001,
    )
    FRAMESIZE = _size(
        "rpc.framesize",
        10_485_760,
        "Largest RPC message between processes, in bytes (seed 000's akka.framesize). A larger "
        "message fails only its call, naming its size and this limit.",
        minimum=1024,
    )
    HANDSHAKE_TIMEOUT = _duration(
        "rpc.handshake.timeout",
        _derived_handshake_timeout,
        "Time a new connection has to prove the cluster secret (TLS included) before it is "
        "dropped; at most rpc.lookup-timeout (default 5 s, or rpc.lookup-timeout if shorter).",
        minimum=0.001,
    )
    MAX_PENDING_HANDSHAKES = _int(
        "rpc.handshake.max-pending",
        128,
        "Connections not yet authenticated that a process holds at once; more are closed as "
        "soon as they are accepted (logged).",
        minimum=1,
    )
    MAX_PENDING_HANDSHAKES_PER_ADDRESS = _int(
        "rpc.handshake.max-pending-per-address",
        16,
        "Connections not yet authenticated from one IP address held at once; more from that "
        "address are closed as soon as they are accepted (logged).",
        minimum=1,
    )
    IDLE_TIMEOUT = _duration(
        "rpc.idle-timeout",
        60.0,
        "An authenticated connection from which nothing arrived for this long is closed "
        "(logged). A side pings a peer it has not heard from for a third of it; the peer "
        "answers at once.",
        minimum=0.01,
    )
    WRITE_QUEUE_MAX_SIZE = _size(
        "rpc.write-queue.max-size",
        _derived_write_queue_size,
        "Bytes written to a connection that its peer has not yet taken, at most; a peer that "
        "leaves more unread loses the connection (logged). Default: 64 mb or twice "
        "rpc.framesize, whichever is larger; at least rpc.framesize.",
        minimum=1024,
    )


def check_rpc_limits(conf: Configuration) -> None:
    """The cross-key rules of the ``rpc.*`` limits.

    Raises:
        ConfigError: If ``rpc.handshake.timeout`` exceeds ``rpc.lookup-timeout`` or
            ``rpc.write-queue.max-size`` is below ``rpc.framesize``.
    """
    lookup = conf.get(RpcOptions.LOOKUP_TIMEOUT)
    handshake = conf.get(RpcOptions.HANDSHAKE_TIMEOUT)
    if handshake > lookup:
        raise ConfigError(
            RpcOptions.HANDSHAKE_TIMEOUT.key,
            conf.get_raw(RpcOptions.HANDSHAKE_TIMEOUT.key, handshake),
            f"a duration <= rpc.lookup-timeout ({lookup:g} s)",
        )
    framesize = conf.get(RpcOptions.FRAMESIZE)
    queue = conf.get(RpcOptions.WRITE_QUEUE_MAX_SIZE)
    if queue < framesize:
        raise ConfigError(
            RpcOptions.WRITE_QUEUE_MAX_SIZE.key,
            conf.get_raw(RpcOptions.WRITE_QUEUE_MAX_SIZE.key, queue),
            f"a size >= rpc.framesize ({framesize} bytes)",
        )


def _derived_interval(conf: Configuration) -> float:
    return conf.get(RpcOptions.ASK_TIMEOUT) / 10.0


def _derived_pause(conf: Configuration) -> float:
    return conf.get(RpcOptions.ASK_TIMEOUT)


class HeartbeatOptions:
    """DeathWatch keys; defaults derive from the ask timeout as in seed 000."""

    INTERVAL = _duration(
        "heartbeat.interval",
        _derived_interval,
        "Seconds between heartbeat requests (default rpc.ask-timeout / 10).",
        minimum=0.001,
    )
    PAUSE = _duration(
        "heartbeat.pause",
        _derived_pause,
        "Acceptable heartbeat pause (default rpc.ask-timeout).",
        minimum=0.001,
    )
    THRESHOLD = _float(
        "heartbeat.threshold", 12.0, "Phi threshold of the failure detector.", minimum=0.1
    )


class FailoverOptions:
    """Restart strategy keys (Flink's)."""

    TYPE = _str(
        "restart-strategy.type",
        "fixed-delay",
        "What a job does when a task fails or a TaskManager is lost.",
        choices=("none", "fixed-delay", "exponential-delay", "failure-rate"),
    )
    FIXED_DELAY_ATTEMPTS = _int(
        "restart-strategy.fixed-delay.attempts",
        3,
        "Restarts before the job fails.",
        minimum=0,
    )
    FIXED_DELAY_DELAY = _duration(
        "restart-strategy.fixed-delay.delay",
        1.0,
        "Wait before each restart.",
        minimum=0.0,
    )
    EXPONENTIAL_INITIAL = _duration(
        "restart-strategy.exponential-delay.initial-backoff",
        1.0,
        "First restart delay.",
        minimum=0.0,
    )
    EXPONENTIAL_MAX = _duration(
        "restart-strategy.exponential-delay.max-backoff",
        300.0,
        "Largest restart delay.",
        minimum=0.0,
    )
    EXPONENTIAL_MULTIPLIER = _float(
        "restart-strategy.exponential-delay.backoff-multiplier",
        2.0,
        "Growth of the delay per failure.",
        minimum=1.0,
    )
    EXPONENTIAL_RESET = _duration(
        "restart-strategy.exponential-delay.reset-backoff-threshold",
        3600.0,
        "Time without failure after which the delay starts over.",
        minimum=0.0,
    )
    FAILURE_RATE_MAX = _int(
        "restart-strategy.failure-rate.max-failures-per-interval",
        1,
        "Failures tolerated within the interval.",
        minimum=0,
    )
    FAILURE_RATE_INTERVAL = _duration(
        "restart-strategy.failure-rate.failure-rate-interval",
        60.0,
        "Window of the failure count.",
        minimum=0.001,
    )
    FAILURE_RATE_DELAY = _duration(
        "restart-strategy.failure-rate.delay",
        1.0,
        "Wait before each restart.",
        minimum=0.0,
    )


def _derived_exchange_dir(conf: Configuration) -> str:
    return str(Path(conf.get(ClusterOptions.TMP_DIR)).resolve() / "jobs")


class ClusterOptions:
    """Cluster shape keys."""

    NUM_TASK_SLOTS = _int(
        "taskmanager.numberOfTaskSlots", 2, "Slots offered by each TaskManager.", minimum=1
    )
    NUM_TASK_MANAGERS = _int(
        "minicluster.number-of-taskmanagers",
        2,
        "TaskManagers started by the embedded mini-cluster.",
        minimum=1,
    )
    SLOT_REQUEST_TIMEOUT = _duration(
        "slot.request.timeout",
        60.0,
        "How long a job waits for its slots.",
        minimum=0.001,
    )
    TMP_DIR = _str(
        "io.tmp.dirs",
        ".millrace",
        "Working directory of the processes: logs, pending files, the cluster secret, and by "
        "default the exchange store, checkpoints and savepoints.",
    )
    EXCHANGE_DIR = _url(
        "io.exchange.dir",
        _derived_exchange_dir,
        "The exchange store: where subtasks write the bundles they hand each other and their "
        "keyed state's live files (Parquet), a directory per job. A directory every host "
        "mounts or any fsspec URL the Spark sessions can read as well (default "
        "<io.tmp.dirs>/jobs). Every process of a cluster must name the same store.",
    )


class FlowControlOptions:
    """Flow control between subtasks (seed 001's AckRequest/Ack), per output channel
    (producer subtask -> consumer subtask). Keys of the TaskManager processes."""

    ENABLED = _bool(
        "taskmanager.network.flow-control.enabled",
        True,
        "Bound the bundles and bytes a producer subtask may have unacknowledged per output "
        "channel; with a full window it stops reading its source (backpressure). Off: "
        "partitions are unbounded (bench/backpressure.py compares).",
    )
    MAX_UNACKED_BUNDLES = _int(
        "taskmanager.network.flow-control.max-unacked-bundles",
        16,
        "Bundles a producer may send on one channel before the consumer acknowledges them.",
        minimum=1,
    )
    MAX_UNACKED_BYTES = _size(
        "taskmanager.network.flow-control.max-unacked-bytes",
        256 * 1024 * 1024,
        "Exchange-file bytes a producer may send on one channel before the consumer "
        "acknowledges them (one bundle is always allowed, however large).",
        minimum=1,
    )
    ACK_REQUEST_INTERVAL = _int(
        "taskmanager.network.flow-control.ack-request-interval",
        4,
        "A producer puts an AckRequest into a channel after every this many bundles (and "
        "whenever the channel's window is full); at most max-unacked-bundles.",
        minimum=1,
    )
    FAULT_INJECTION = _str(
        "taskmanager.network.test.fault-injection",
        "",
        "TEST ONLY, never set in production: KIND:PRODUCER:CONSUMER:BUNDLE (KIND drop, repeat, "
        "delay or stale) spoils the BUNDLE-th data bundle (from 0) of the channel from "
        "producer subtask PRODUCER to consumer subtask CONSUMER of every source vertex, once "
        "per job (runtime/io/channel_fault_injection.py). Empty: off.",
    )


def check_flow_control(conf: Configuration) -> None:
    """ack-request-interval must not exceed max-unacked-bundles.

    Raises:
        ConfigError: Naming the key, the value and the bound.
    """
    interval = conf.get(FlowControlOptions.ACK_REQUEST_INTERVAL)
    window = conf.get(FlowControlOptions.MAX_UNACKED_BUNDLES)
    if interval > window:
        raise ConfigError(
            FlowControlOptions.ACK_REQUEST_INTERVAL.key,
            interval,
            f"a value <= {FlowControlOptions.MAX_UNACKED_BUNDLES.key} ({window})",
        )


class RuntimeExecutionMode(enum.Enum):
    """``execution.runtime-mode`` (Flink's RuntimeExecutionMode)."""

    STREAMING = "STREAMING"
    """Continuous execution: watermarks, pipelined exchanges, checkpoints; any source."""
    BATCH = "BATCH"
    """Bounded input only: each stage runs to its end, blocking exchanges, one aggregation per
    keyed stage, no watermarks and no checkpoints; a failed stage re-runs from its inputs."""
    AUTOMATIC = "AUTOMATIC"
    """BATCH when every source is bounded, else STREAMING."""


class ExecutionOptions:
    """Job execution keys."""

    RUNTIME_MODE = _enum(
        "execution.runtime-mode",
        RuntimeExecutionMode.STREAMING,
        "STREAMING runs any job continuously; BATCH runs a job whose sources are all bounded "
        "stage by stage (blocking exchanges, no watermarks, no checkpoints); AUTOMATIC is "
        "BATCH when every source is bounded, else STREAMING (Flink's execution.runtime-mode).",
    )

    PARALLELISM = _int(
        "parallelism.default", 2, "Parallelism of operators that do not set one.", minimum=1
    )
    MAX_PARALLELISM = _int(
        "pipeline.max-parallelism",
        128,
        "Number of key groups (upper bound of a keyed operator's parallelism).",
        minimum=1,
    )
    BUNDLE_MAX_RECORDS = _int(
        "execution.bundle.max-records",
        250_000,
        "A source subtask takes input splits into one bundle (one Spark job) until their row "
        "count from file statistics reaches this; a split of unknown size is a bundle alone.",
        minimum=1,
    )
    STATE_COMPACTION_FILES = _int(
        "state.compaction.max-files",
        32,
        "Keyed-state files after which they are compacted into one.",
        minimum=2,
    )
    PARTITION_POLL_TIMEOUT = _duration(
        "execution.partition-poll-timeout",
        1.0,
        "Longest a consumer's pull for new partition events waits.",
        minimum=0.01,
    )
    BUNDLE_MAX_DELAY = _duration(
        "execution.bundle.max-delay",
        0.2,
        "An unbounded source closes a bundle after this long even if it holds fewer than "
        "execution.bundle.max-records records (latency bound of a quiet stream).",
        minimum=0.001,
    )
    SOURCE_DISCOVERY_INTERVAL = _duration(
        "source.discovery-interval",
        1.0,
        "How often the JobMaster asks an unbounded source for new splits (new files, ...).",
        minimum=0.01,
    )
    CLOCK_REPORT_INTERVAL = _duration(
        "execution.clock.report-interval",
        0.2,
        "Shortest time between two min-clock reports of a task to the JobMaster's clock "
        "service (seed 001).",
        minimum=0.001,
    )


def _derived_checkpoints_dir(conf: Configuration) -> str:
    return str(Path(conf.get(ClusterOptions.TMP_DIR)).resolve() / "checkpoints")


def _derived_savepoints_dir(conf: Configuration) -> str:
    return str(Path(conf.get(ClusterOptions.TMP_DIR)).resolve() / "savepoints")


class CheckpointingMode(enum.Enum):
    """``execution.checkpointing.mode`` (Flink's CheckpointingMode)."""

    EXACTLY_ONCE = "EXACTLY_ONCE"
    """Barriers are aligned: no record after a channel's barrier is in the snapshot."""
    AT_LEAST_ONCE = "AT_LEAST_ONCE"
    """Barriers are not aligned: lower latency; a replay may count records twice."""


class CheckpointingOptions:
    """Checkpoint keys (Flink's names; barriers after Carbone et al. 2015, seed 002)."""

    INTERVAL = _duration(
        "execution.checkpointing.interval",
        0.0,
        "Time between the starts of two periodic checkpoints; 0 disables checkpointing.",
        minimum=0.0,
    )
    MODE = _enum(
        "execution.checkpointing.mode",
        CheckpointingMode.EXACTLY_ONCE,
        "EXACTLY_ONCE aligns barriers (no record of a channel after its barrier is processed "
        "before the snapshot); AT_LEAST_ONCE does not wait (lower latency, replays may "
        "count records twice).",
    )
    TIMEOUT = _duration(
        "execution.checkpointing.timeout",
        600.0,
        "A checkpoint not complete after this long is aborted.",
        minimum=0.001,
    )
    MAX_CONCURRENT = _int(
        "execution.checkpointing.max-concurrent-checkpoints",
        1,
        "Checkpoints in flight at once.",
        minimum=1,
    )
    MIN_PAUSE = _duration(
        "execution.checkpointing.min-pause",
        0.0,
        "Shortest time between the end of a checkpoint and the start of the next.",
        minimum=0.0,
    )
    NUM_RETAINED = _int(
        "state.checkpoints.num-retained",
        1,
        "Completed checkpoints kept; older ones are deleted (savepoints are never deleted).",
        minimum=1,
    )
    CHECKPOINTS_DIR = _str(
        "state.checkpoints.dir",
        _derived_checkpoints_dir,
        "Where checkpoints are written: a directory or any fsspec URL every process can reach "
        "(default <io.tmp.dirs>/checkpoints).",
    )
    SAVEPOINT_PATH = _str(
        "execution.savepoint.path",
        "",
        "A savepoint (or retained checkpoint) a job starts from ('millrace run "
        "--from-savepoint'); its parallelism may differ.",
    )
    SAVEPOINTS_DIR = _str(
        "state.savepoints.dir",
        _derived_savepoints_dir,
        "Default directory of savepoints (default <io.tmp.dirs>/savepoints).",
    )
    SAVEPOINTS_ALLOWED_ROOTS = _str(
        "state.savepoints.allowed-roots",
        "",
        "Comma-separated directories (or fsspec URLs) a savepoint asked for over REST or RPC "
        "may be written under; empty: state.savepoints.dir only. A relative target is taken "
        "under state.savepoints.dir; one outside every root is refused.",
    )


class SparkOptions:
    """Keys of the data plane's SparkSession."""

    MASTER = _str(
        "spark.master",
        "local[*]",
        "Spark master of each TaskManager's SparkSession: local[N] or spark://HOST:PORT (a Spark "
        "standalone cluster). Unused when spark.remote is set.",
    )
    REMOTE = _str(
        "spark.remote",
        "",
        "Spark Connect server the data plane runs on (sc://HOST:PORT): each TaskManager, and "
        "the client, open a Connect session there instead of starting a JVM. Empty: a local "
        "or standalone SparkSession per process (spark.master).",
        schemes=("sc://",),
    )
    DRIVER_MEMORY = _str("spark.driver.memory", "2g", "Memory of the Spark driver.")
    SHUFFLE_PARTITIONS = _int(
        "spark.sql.shuffle.partitions",
        1,
        "Shuffle partitions of each bundle's Spark job. Bundles are small and subtasks already "
        "run in parallel, so 1 is fastest here; any other spark.* key is passed to Spark too.",
        minimum=1,
    )


def _derived_secret_file(conf: Configuration) -> str:
    return str(Path(conf.get(ClusterOptions.TMP_DIR)) / "cluster" / "secret")


class JobManagerOptions:
    """Where the JobManager process (Dispatcher, ResourceManager) listens (Flink's keys)."""

    RPC_ADDRESS = _str(
        "jobmanager.rpc.address",
        "127.0.0.1",
        "Host the JobManager's RPC service advertises (and binds to, unless "
        "jobmanager.bind-host is set): the address TaskManagers and clients connect to.",
    )
    BIND_HOST = _str(
        "jobmanager.bind-host",
        "",
        "Interface the JobManager's RPC service binds to, e.g. 0.0.0.0 behind NAT or in a "
        "container; empty: jobmanager.rpc.address (Flink's jobmanager.bind-host).",
    )
    RPC_PORT = _int(
        "jobmanager.rpc.port",
        6123,
        "Port of the JobManager's RPC service (0: any free port).",
        minimum=0,
        maximum=65535,
    )


class TaskManagerOptions:
    """Where a TaskManager process listens."""

    HOST = _str(
        "taskmanager.host",
        "127.0.0.1",
        "Host a TaskManager's RPC service advertises (and binds to, unless "
        "taskmanager.bind-host is set): the address the JobManager and other TaskManagers "
        "connect to.",
    )
    BIND_HOST = _str(
        "taskmanager.bind-host",
        "",
        "Interface a TaskManager's RPC service binds to, e.g. 0.0.0.0; empty: taskmanager.host "
        "(Flink's taskmanager.bind-host).",
    )
    RPC_PORT = _int(
        "taskmanager.rpc.port",
        0,
        "Port of a TaskManager's RPC service (0: any free port).",
        minimum=0,
        maximum=65535,
    )


class RestOptions:
    """The Dispatcher's REST API (Flink's keys)."""

    BIND_ADDRESS = _str(
        "rest.bind-address",
        "127.0.0.1",
        "Interface the REST API listens on (loopback by default).",
    )
    PORT = _int(
        "rest.port",
        8081,
        "Port of the REST API (0: any free port).",
        minimum=0,
        maximum=65535,
    )
    ASYNC_STORE_DURATION = _duration(
        "rest.async.store-duration",
        300.0,
        "How long the result of a finished asynchronous operation (a savepoint request) can "
        "be read at its status path before it is forgotten (Flink's key).",
        minimum=0.0,
    )


class HttpSourceOptions:
    """The HttpSource's ingest endpoint in the JobManager process (issue 13)."""

    BIND_ADDRESS = _str(
        "http-source.bind-address",
        "127.0.0.1",
        "Interface the HttpSource's records endpoint listens on (loopback by default).",
    )
    PORT = _int(
        "http-source.port",
        8089,
        "Port of the HttpSource's records endpoint, POST /sources/{name}/records (0: any "
        "free port).",
        minimum=0,
        maximum=65535,
    )
    MAX_BODY_BYTES = _int(
        "http-source.max-body-bytes",
        4 * 1024 * 1024,
        "Largest request body the HttpSource accepts (bytes; larger ones get 413).",
        minimum=1,
    )


class MetricOptions:
    """The metric reporters of every cluster process (Flink's ``metrics.*`` keys)."""

    REPORTERS = _str(
        "metrics.reporters",
        "prom",
        "Metric reporters to start in every cluster process, comma-separated: 'prom' (the "
        "Prometheus reporter, Flink's name) or '' / 'none' for none.",
    )
    PROM_PORT = _str(
        "metrics.reporter.prom.port",
        "9249",
        "Port of the Prometheus reporter's /metrics endpoint, or a range such as '9250-9260': "
        "each process on a host takes the first free port of the range (0: any free port). "
        "With no port of the range free, the process logs a warning and runs without it.",
    )
    PROM_HOST = _str(
        "metrics.reporter.prom.host",
        "127.0.0.1",
        "Interface the Prometheus reporter listens on (loopback by default, like "
        "rest.bind-address).",
    )


class SecurityOptions:
    """Authentication and encryption of the cluster's connections."""

    CLUSTER_SECRET = _str(
        "security.cluster-secret",
        "",
        "Shared secret every RPC connection proves (HMAC challenge) and REST writes carry; "
        "empty: read security.cluster-secret.file.",
    )
    CLUSTER_SECRET_FILE = _str(
        "security.cluster-secret.file",
        _derived_secret_file,
        "File holding the cluster secret (mode 0600); 'millrace cluster start' creates it "
        "(default <io.tmp.dirs>/cluster/secret). Copy it to the machines of the cluster.",
    )
    SSL_ENABLED = _bool(
        "security.ssl.enabled",
        False,
        "Encrypt RPC connections with mutual TLS (needs the three security.ssl.* files).",
    )
    SSL_CERTIFICATE = _str("security.ssl.certificate", "", "PEM certificate chain of this process.")
    SSL_KEY = _str("security.ssl.key", "", "PEM private key of the certificate.")
    SSL_TRUSTSTORE = _str(
        "security.ssl.truststore",
        "",
        "PEM CA certificates a peer's certificate must chain to.",
    )
    SSL_REST_ENABLED = _bool(
        "security.ssl.rest.enabled",
        False,
        "Serve the REST API over HTTPS (needs security.ssl.rest.certificate and .key).",
    )
    SSL_REST_CERTIFICATE = _str(
        "security.ssl.rest.certificate", "", "PEM certificate chain of the REST API."
    )
    SSL_REST_KEY = _str("security.ssl.rest.key", "", "PEM private key of the REST API.")


class HighAvailabilityMode(enum.Enum):
    """``high-availability.type``: no standby JobManagers, or leader election on ZooKeeper."""

    NONE = "none"
    """Jobs live as long as their JobManager process (the embedded cluster's default)."""
    ZOOKEEPER = "zookeeper"
    """Standby JobManagers elect a leader on ZooKeeper; a new leader recovers every job."""


class HighAvailabilityOptions:
    """Flink's ``high-availability.*`` keys (seed 003: JobManager leader election on ZooKeeper).

    The session timeout is shorter than Flink's 60 s so that a killed leader's ephemeral znodes
    vanish, and a standby takes over, within the issue's 15 s target.
    """

    TYPE = _enum(
        "high-availability.type",
        HighAvailabilityMode.NONE,
        "none: no standby JobManagers; zookeeper: leader election, job graph and checkpoint "
        "stores on ZooKeeper (needs high-availability.zookeeper.quorum and "
        "high-availability.storageDir).",
    )
    ZOOKEEPER_QUORUM = _str(
        "high-availability.zookeeper.quorum",
        "",
        "ZooKeeper servers as host:port[,host:port...] (required with type zookeeper).",
    )
    ZOOKEEPER_ROOT = _str(
        "high-availability.zookeeper.path.root",
        "/millrace",
        "Root znode under which every cluster keeps its HA data.",
    )
    CLUSTER_ID = _str(
        "high-availability.cluster-id",
        "/default",
        "This cluster's znode under the root; clusters sharing a ZooKeeper need distinct ids.",
    )
    STORAGE_DIR = _str(
        "high-availability.storageDir",
        "",
        "fsspec URL or directory for the payloads ZooKeeper points to (job graphs, job results); "
        "required with type zookeeper, reachable by every JobManager.",
    )
    SESSION_TIMEOUT = _duration(
        "high-availability.zookeeper.client.session-timeout",
        6.0,
        "ZooKeeper session timeout: how long a silent JobManager stays leader.",
        minimum=1.0,
        maximum=600.0,
    )
    CONNECTION_TIMEOUT = _duration(
        "high-availability.zookeeper.client.connection-timeout",
        5.0,
        "How long a connection attempt to ZooKeeper may take.",
        minimum=0.1,
    )
    RETRY_WAIT = _duration(
        "high-availability.zookeeper.client.retry-wait",
        1.0,
        "First wait between retries of a failed ZooKeeper operation (doubles on each retry).",
        minimum=0.01,
    )
    MAX_RETRY_ATTEMPTS = _int(
        "high-availability.zookeeper.client.max-retry-attempts",
        3,
        "Retries of a failed ZooKeeper operation before it fails.",
        minimum=0,
    )
    TOLERATE_SUSPENDED_CONNECTIONS = _bool(
        "high-availability.zookeeper.client.tolerate-suspended-connections",
        True,
        "Keep leadership while the ZooKeeper connection is SUSPENDED and give it up only when "
        "the session is LOST (FLINK-10052); false: give it up on SUSPENDED as well.",
    )


def check_high_availability(conf: Configuration) -> None:
    """The cross-key rules of ``high-availability.*``.

    Raises:
        ConfigError: With type zookeeper, if the quorum or the storage directory is missing or
            malformed, or a znode path does not start with ``/``.
    """
    if conf.get(HighAvailabilityOptions.TYPE) is not HighAvailabilityMode.ZOOKEEPER:
        return
    quorum = conf.get(HighAvailabilityOptions.ZOOKEEPER_QUORUM).strip()
    hosts = [h.strip() for h in quorum.split(",")] if quorum else []
    if not hosts or any(not _HOST_PORT.match(h) for h in hosts):
        raise ConfigError(
            HighAvailabilityOptions.ZOOKEEPER_QUORUM.key,
            quorum,
            "host:port[,host:port...] of the ZooKeeper servers (high-availability.type is "
            "zookeeper)",
        )
    if not conf.get(HighAvailabilityOptions.STORAGE_DIR).strip():
        raise ConfigError(
            HighAvailabilityOptions.STORAGE_DIR.key,
            "",
            "a directory or fsspec URL every JobManager reaches (high-availability.type is "
            "zookeeper)",
        )
    for option in (HighAvailabilityOptions.ZOOKEEPER_ROOT, HighAvailabilityOptions.CLUSTER_ID):
        path = conf.get(option)
        if not _ZNODE_PATH.match(path):
            raise ConfigError(
                option.key,
                path,
                "a znode path such as /millrace (letters, digits, '-', '_', '.', separated by '/')",
            )


_HOST_PORT = re.compile(r"^[A-Za-z0-9_.\-\[\]:]+:[0-9]{1,5}$")
_ZNODE_PATH = re.compile(r"^/?[A-Za-z0-9_.\-]+(/[A-Za-z0-9_.\-]+)*$")


class PipelineOptions:
    """Keys of a pipeline's shape and side outputs."""

    CHAIN_KEYED_STAGES = _bool(
        "pipeline.chain-keyed-stages",
        True,
        "In STREAMING, chain a window or running aggregate of parallelism 1 into the source "
        "of parallelism 1 that feeds it: one task, no exchange files between them (false: two "
        "vertices, as at higher parallelism). A live rescale above 1 splits the chain.",
    )

    SIDE_OUTPUT_DIR = _str(
        "pipeline.side-output.dir",
        "out/side-outputs",
        "Directory of the side outputs: <dir>/<job name>/dead-letters/ holds malformed records "
        "with their reason, <dir>/<job name>/late/ records later than the watermark.",
    )


def parse_port_range(value: object, *, key: str) -> range:
    """Parse a port (``"9249"``) or an inclusive range (``"9250-9260"``) into a ``range``.

    Raises:
        ConfigError: If the value is neither, or a port lies outside 0-65535, or the range
            is empty; names ``key``.
    """
    allowed = "a port such as '9249' or a range such as '9250-9260' (ports 0-65535)"
    text = str(value).strip()
    match = _PORT_RANGE.match(text)
    if isinstance(value, bool) or match is None:
        raise ConfigError(key, value, allowed)
    low = int(match.group(1))
    high = int(match.group(2)) if match.group(2) is not None else low
    if high > 65535 or low > high or (low == 0 and high != 0):
        raise ConfigError(key, value, allowed)
    return range(low, high + 1)


_PORT_RANGE = re.compile(r"^([0-9]{1,5})(?:\s*-\s*([0-9]{1,5}))?$")
METRIC_REPORTER_NAMES = ("prom",)


def check_metric_reporters(conf: Configuration) -> None:
    """Check ``metrics.reporters`` (known names only) and the Prometheus reporter's port.

    Raises:
        ConfigError: Naming the key, for an unknown reporter or a bad port range.
    """
    for name in metric_reporters(conf):
        if name not in METRIC_REPORTER_NAMES:
            raise ConfigError(
                MetricOptions.REPORTERS.key,
                conf.get(MetricOptions.REPORTERS),
                "a comma-separated list of " + ", ".join(METRIC_REPORTER_NAMES) + ", or none",
            )
    parse_port_range(conf.get(MetricOptions.PROM_PORT), key=MetricOptions.PROM_PORT.key)


def metric_reporters(conf: Configuration) -> list[str]:
    """The reporter names of ``metrics.reporters`` ([] for '' or 'none')."""
    text = conf.get(MetricOptions.REPORTERS).strip()
    if text.lower() in ("", "none"):
        return []
    return [name.strip() for name in text.split(",") if name.strip()]


def all_options() -> list[ConfigOption[Any]]:
    """Every known option, sorted by key."""
    options = []
    holders = (
        RpcOptions,
        JobManagerOptions,
        TaskManagerOptions,
        RestOptions,
        HttpSourceOptions,
        MetricOptions,
        SecurityOptions,
        HeartbeatOptions,
        FailoverOptions,
        ClusterOptions,
        ExecutionOptions,
        FlowControlOptions,
        CheckpointingOptions,
        SparkOptions,
        PipelineOptions,
        HighAvailabilityOptions,
    )
    for holder in holders:
        options += [v for v in vars(holder).values() if isinstance(v, ConfigOption)]
    return sorted(options, key=lambda o: o.key)


class Configuration:
    """Key -> value settings with typed reads.

    Unknown keys are kept (they may belong to Spark: any ``spark.*`` key is passed to the
    SparkSession) but every known key is validated by :meth:`validate`.

    Threading:
        Not thread-safe; build it before starting components, then treat it as read-only.
    """

    def __init__(self, values: Mapping[str, object] | None = None) -> None:
        self._values: dict[str, object] = dict(values or {})

    @classmethod
    def from_yaml(cls, path: str | Path) -> Configuration:
        """Read a flat or nested YAML mapping (nested keys are joined with dots).

        Raises:
            ConfigError: If the file is not a YAML mapping.
        """
        import yaml

        text = Path(path).read_text()
        data = yaml.safe_load(text) or {}
        if not isinstance(data, dict):
            raise ConfigError(str(path), type(data).__name__, "a YAML mapping of keys to values")
        return cls(_flatten(data))

    @staticmethod
    def parse_dynamic_properties(pairs: Iterable[str]) -> dict[str, str]:
        """Parse ``-D key=value`` arguments.

        Raises:
            ConfigError: If an argument has no ``=``.
        """
        out = {}
        for pair in pairs:
            key, sep, value = pair.partition("=")
            if not sep or not key.strip():
                raise ConfigError(pair, pair, "key=value")
            out[key.strip()] = value.strip()
        return out

    def with_overrides(self, overrides: Mapping[str, object]) -> Configuration:
        """A copy with ``overrides`` applied."""
        return Configuration({**self._values, **overrides})

    def set(self, option: ConfigOption[Any] | str, value: object) -> None:
        self._values[option if isinstance(option, str) else option.key] = value

    def contains(self, option: ConfigOption[Any]) -> bool:
        return option.key in self._values

    def get(self, option: ConfigOption[T]) -> T:
        """The parsed value of ``option``, or its default.

        Raises:
            ConfigError: If the stored value is invalid for the option.
        """
        if option.key in self._values:
            return option.parse(self._values[option.key])
        default = option.default
        return default(self) if callable(default) else default

    def get_raw(self, key: str, default: object = None) -> object:
        return self._values.get(key, default)

    def items_with_prefix(self, prefix: str) -> dict[str, object]:
        return {k: v for k, v in self._values.items() if k.startswith(prefix)}

    def validate(self) -> None:
        """Parse every known key that is set, and check cross-key rules.

        Raises:
            ConfigError: On the first invalid value.
        """
        for option in all_options():
            self.get(option)
        lookup = self.get(RpcOptions.LOOKUP_TIMEOUT)
        ask = self.get(RpcOptions.ASK_TIMEOUT)
        if lookup > ask:
            raw = self._values.get(RpcOptions.LOOKUP_TIMEOUT.key, lookup)
            raise ConfigError(
                RpcOptions.LOOKUP_TIMEOUT.key, raw, f"a duration <= rpc.ask-timeout ({ask:g} s)"
            )
        check_rpc_limits(self)
        check_high_availability(self)
        check_metric_reporters(self)
        check_flow_control(self)

    def to_dict(self) -> dict[str, object]:
        return dict(self._values)

    def without_security(self) -> dict[str, object]:
        """The entries other processes may receive (a task deployment carries them): all but
        ``security.*`` (the cluster secret, key and certificate paths stay in the process that
        read them; a TaskManager reads its own)."""
        return {k: v for k, v in self._values.items() if not k.startswith("security.")}

    def job_level(self) -> dict[str, object]:
        """The entries a job may set for itself: everything but the keys of processes
        (``io.tmp.dirs``, ``io.exchange.dir``, ``jobmanager.*``, ``taskmanager.*``, ``rest.*``,
        ``security.*``, ``minicluster.*``, ``spark.*``), which the cluster's own configuration
        decides."""
        return {
            k: v
            for k, v in self._values.items()
            if k not in _PROCESS_KEYS and not k.startswith(_PROCESS_KEY_PREFIXES)
        }


_PROCESS_KEYS = (ClusterOptions.TMP_DIR.key, ClusterOptions.EXCHANGE_DIR.key)
_PROCESS_KEY_PREFIXES = (
    "high-availability.",
    "jobmanager.",
    "taskmanager.",
    "metrics.",
    "rest.",
    "security.",
    "minicluster.",
    "spark.",
)


def _flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in data.items():
        full = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_flatten(value, full + "."))
        else:
            out[full] = value
    return out
