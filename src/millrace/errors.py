"""The whole public exception tree of Millrace.

Every error Millrace raises on purpose derives from :class:`MillraceError`, and every class of
it is defined here, so that the TCP transport can rebuild any of them at a caller
(``rpc/tcp/remote_errors.py`` rebuilds builtin exceptions and the classes of this module, and
nothing else). Errors carry structured attributes (``job_id``, ``endpoint_id``, ``address``,
``key``) so callers can react without parsing messages, and their message names the object
involved and, where there is one, the fix. Gateway methods fail their futures with these (each
gateway's docstrings say which), never with a builtin exception (a bug excepted).

::

    MillraceError
    ├── RpcError                          a call could not be completed
    │   ├── RpcTimeoutError               (also TimeoutError) no answer within the ask timeout
    │   ├── RecipientUnreachableError     nothing answers at an address
    │   │   └── EndpointStoppedError      the endpoint stopped before it processed the call
    │   ├── FencingTokenError             the call carries a stale fencing token
    │   ├── GatewayMismatchError          (also TypeError) the call does not fit the gateways
    │   ├── FrameSizeError                a message exceeds rpc.framesize
    │   ├── CodecError                    a value cannot be encoded, bytes cannot be decoded
    │   ├── AuthenticationError           a peer failed to prove the cluster secret
    │   ├── FrameMacError                 a record fails its channel MAC
    │   ├── ConnectionClosedError         the peer closed the connection
    │   ├── PartitionNotFoundError        a result partition is not (or no longer) there
    │   └── RemoteRpcError                a remote error whose class may not be rebuilt here
    ├── IllegalThreadError                (also RuntimeError) main-thread code on another thread
    ├── CheckpointError                   a checkpoint cannot be taken, completed or restored
    │   └── CheckpointDeclinedError       a task declines a checkpoint
    ├── SlotAllocationError               slots cannot be allocated
    ├── JobSubmissionError                a job is rejected, or a call names an unknown job
    ├── JobExecutionError                 a job ended FAILED
    │   └── JobCancelledError             a job ended CANCELED
    ├── ExecutionGraphError               a call names an execution the job does not run
    ├── TaskCancelledError                inside a task whose cancellation was requested
    ├── IllegalExecutionStateTransitionError
    ├── IllegalJobStatusTransitionError
    ├── PipelineError                     the user's pipeline failed in Spark or is invalid
    │   └── UserCodeError                 user code cannot be (de)serialized
    ├── HighAvailabilityError             ZooKeeper or the HA storage cannot be used
    │   └── LeadershipLostError           this JobManager is no longer the leader
    ├── LocalServerError                  a local ZooKeeper or Spark server cannot start or stop
    ├── MessageLossError                  a channel lost, repeated or mixed up partition events
    ├── JobChangeError                    a live change (modify, rescale) is refused or failed
    └── ConfigError                       (also ValueError) an invalid configuration value

A heartbeat timeout is not an exception: the failure detector's listener fails the lost
TaskManager's Executions with a cause naming it (the job's ``JobExecutionError``; calls to the
lost process: ``RecipientUnreachableError`` / ``RpcTimeoutError``). Foreign errors are
translated at one boundary each: Spark's into :class:`PipelineError` in ``millrace.spark``; a
SplitEnumerator failing a split request into :class:`PipelineError` at the Scheduler.
"""

from __future__ import annotations

__all__ = [
    "AuthenticationError",
    "CheckpointDeclinedError",
    "CheckpointError",
    "CodecError",
    "ConfigError",
    "ConnectionClosedError",
    "EndpointStoppedError",
    "ExecutionGraphError",
    "FencingTokenError",
    "FrameMacError",
    "FrameSizeError",
    "GatewayMismatchError",
    "HighAvailabilityError",
    "IllegalExecutionStateTransitionError",
    "IllegalJobStatusTransitionError",
    "IllegalThreadError",
    "JobCancelledError",
    "JobChangeError",
    "JobExecutionError",
    "JobSubmissionError",
    "LeadershipLostError",
    "LocalServerError",
    "MessageLossError",
    "MillraceError",
    "PartitionNotFoundError",
    "PipelineError",
    "RecipientUnreachableError",
    "RemoteRpcError",
    "RpcError",
    "RpcTimeoutError",
    "SlotAllocationError",
    "TaskCancelledError",
    "UserCodeError",
    "describe",
]


def describe(error: BaseException | None) -> str:
    """``"TypeName: message"`` of ``error``: how a cause is quoted in a failure message."""
    return f"{type(error).__name__}: {error}"


class MillraceError(Exception):
    """Root of every error Millrace raises."""


class RpcError(MillraceError):
    """A remote procedure call could not be completed."""


class RpcTimeoutError(RpcError, TimeoutError):
    """An ask did not complete within its timeout.

    Attributes:
        endpoint_id: The endpoint that was asked.
        method: The gateway method that was invoked.
        timeout: The timeout that expired, in seconds.
    """

    def __init__(self, endpoint_id: str, method: str, timeout: float) -> None:
        self.endpoint_id = endpoint_id
        self.method = method
        self.timeout = timeout
        super().__init__(
            f"RPC {endpoint_id}.{method}() did not answer within {timeout:g} s "
            f"(rpc.ask-timeout); the endpoint may be overloaded or dead"
        )


class RecipientUnreachableError(RpcError):
    """No endpoint answers at an address (lookup failed, connection lost or endpoint stopped).

    Attributes:
        address: The address that could not be reached.
        reason: Why, e.g. ``no endpoint registered within rpc.lookup-timeout (10 s)``.
    """

    def __init__(self, address: str, reason: str) -> None:
        self.address = address
        self.reason = reason
        super().__init__(f"no RPC endpoint reachable at {address}: {reason}")


class EndpointStoppedError(RecipientUnreachableError):
    """The endpoint stopped before it processed the message."""


class FencingTokenError(RpcError):
    """A message carried a fencing token other than the endpoint's current one.

    Attributes:
        endpoint_id: The fenced endpoint.
        expected: The endpoint's current token (None if it has none yet).
        received: The token the message carried.
    """

    def __init__(self, endpoint_id: str, expected: object, received: object) -> None:
        self.endpoint_id = endpoint_id
        self.expected = expected
        self.received = received
        super().__init__(
            f"fencing token mismatch at {endpoint_id}: message carries {received!r}, "
            f"endpoint expects {expected!r} (the sender talks to a former leader)"
        )


class FrameSizeError(RpcError):
    """A message exceeds ``rpc.framesize``; it was not sent.

    Attributes:
        size_bytes: The encoded size of the message.
        limit_bytes: The configured ``rpc.framesize``.
    """

    def __init__(self, size_bytes: int, limit_bytes: int, what: str = "message") -> None:
        self.size_bytes = size_bytes
        self.limit_bytes = limit_bytes
        super().__init__(
            f"{what} of {size_bytes} bytes exceeds rpc.framesize={limit_bytes} bytes; "
            f"raise rpc.framesize or send a reference instead of the data"
        )


class GatewayMismatchError(RpcError, TypeError):
    """A call or lookup does not fit the target endpoint's declared gateways: the endpoint
    does not serve a method of the caller's gateway, or the call's arguments do not fit the
    method's signature (a peer of another version, or a bug). Nothing was executed.

    Also a ``TypeError``, which it replaces at gateways.

    Attributes:
        endpoint_id: The endpoint called or looked up ("" if unknown).
        method: The method called ("" for a lookup).
        reason: What does not fit, in Python's words where there are some.
    """

    def __init__(self, reason: str, endpoint_id: str = "", method: str = "") -> None:
        self.reason = reason
        self.endpoint_id = endpoint_id
        self.method = method
        super().__init__(reason)


class CodecError(RpcError):
    """A value cannot be encoded, or bytes do not decode to a valid registered message
    (``rpc/message_codec.py``): an argument or result of a type the codec does not know, or
    a malformed or hostile frame."""


class AuthenticationError(RpcError):
    """A peer failed to prove the cluster secret; the connection was closed."""


class FrameMacError(RpcError):
    """An incoming record's MAC does not match (altered, replayed or injected), or the frames
    inside an authentic record are malformed; the connection is closed."""


class ConnectionClosedError(RpcError):
    """The peer closed the connection (cleanly between frames, or in the middle of one)."""


class PartitionNotFoundError(RpcError):
    """A consumer asked for a result partition (or a subpartition of it) that its producer's
    TaskExecutor does not hold (Flink's PartitionNotFoundException).

    Attributes:
        partition_id: The partition asked for.
        reason: Why it is not there.
    """

    def __init__(self, partition_id: str, reason: str = "released or never made") -> None:
        self.partition_id = partition_id
        self.reason = reason
        super().__init__(f"result partition {partition_id} not found: {reason}")


class RemoteRpcError(RpcError):
    """An error raised by a remote endpoint whose class may not be rebuilt here.

    Attributes:
        remote_type: Qualified name of the remote exception class.
        remote_message: Its message.
    """

    def __init__(self, remote_type: str, remote_message: str) -> None:
        self.remote_type = remote_type
        self.remote_message = remote_message
        super().__init__(f"{remote_type}: {remote_message}")


class IllegalThreadError(MillraceError, RuntimeError):
    """Code that must run on an endpoint's main thread ran on another thread (a bug).

    Attributes:
        endpoint_id: The endpoint whose main thread it must run on.
        thread_name: The thread it ran on.
    """

    def __init__(self, endpoint_id: str, thread_name: str) -> None:
        self.endpoint_id = endpoint_id
        self.thread_name = thread_name
        super().__init__(
            f"{endpoint_id}: this method must run in the endpoint's main thread, "
            f"but ran in thread {thread_name!r}; use run_async/call_async"
        )


class CheckpointError(MillraceError):
    """A checkpoint could not be taken, completed or restored."""


class JobChangeError(MillraceError):
    """A live change (``millrace modify`` / ``rescale``) was refused or failed: an unknown transform
    or vertex, a bad parallelism, not a RUNNING STREAMING job, or a change in progress."""


class CheckpointDeclinedError(CheckpointError):
    """A task cannot take a checkpoint: writing its state or a sink's pre-commit failed.

    The task declines the checkpoint (Flink's DeclineCheckpoint) and runs on; the coordinator
    aborts the checkpoint with ``reason`` in its history.

    Attributes:
        checkpoint_id: The declined checkpoint.
        reason: Why, naming the sink or state and the underlying error.
    """

    def __init__(self, checkpoint_id: int, reason: str) -> None:
        self.checkpoint_id = checkpoint_id
        self.reason = reason
        super().__init__(f"checkpoint {checkpoint_id} declined: {reason}")


class SlotAllocationError(MillraceError):
    """Slots for a job could not be allocated: none in time, or a slot that does not exist
    or is held by another allocation.

    Attributes:
        job_id: The job, if known.
    """

    def __init__(self, message: str, job_id: str | None = None) -> None:
        self.job_id = job_id
        super().__init__(message)


class JobSubmissionError(MillraceError):
    """A job was rejected at submission (duplicate id, invalid JobGraph or configuration, a
    JobMaster that cannot start), or a call names a job the Dispatcher does not know (or that
    no longer runs).

    Attributes:
        job_id: The job, if known.
    """

    def __init__(self, message: str, job_id: str | None = None) -> None:
        self.job_id = job_id
        super().__init__(message)


class JobExecutionError(MillraceError):
    """A job ended in FAILED; ``__cause__`` holds the root cause.

    Attributes:
        job_id: The failed job.
        root_cause: One-line description of the root cause.
    """

    def __init__(self, job_id: str, root_cause: str) -> None:
        self.job_id = job_id
        self.root_cause = root_cause
        super().__init__(f"job {job_id} failed: {root_cause}")


class JobCancelledError(JobExecutionError):
    """A job ended in CANCELED."""

    def __init__(self, job_id: str) -> None:
        super().__init__(job_id, "the job was cancelled")


class ExecutionGraphError(MillraceError):
    """A call names an execution attempt the job's ExecutionGraph does not run (Flink's
    ExecutionGraphException): an attempt of a former run of the job (before a restart), one
    that already ended, or one that never existed.

    Attributes:
        job_id: The job.
        attempt_id: The execution attempt named by the call.
        reason: Why it cannot be served.
    """

    def __init__(self, job_id: str, attempt_id: str, reason: str) -> None:
        self.job_id = job_id
        self.attempt_id = attempt_id
        self.reason = reason
        super().__init__(f"execution attempt {attempt_id} of job {job_id}: {reason}")


class TaskCancelledError(MillraceError):
    """Raised inside a task whose cancellation was requested (Flink's CancelTaskException);
    the task then reports CANCELED. A task is cancelled when its job is cancelled, fails or
    restarts, so this is not a :class:`JobCancelledError`.

    Attributes:
        task_name: The task, e.g. ``Source (1/2)``.
    """

    def __init__(self, task_name: str) -> None:
        self.task_name = task_name
        super().__init__(f"task {task_name} was cancelled")


class IllegalExecutionStateTransitionError(MillraceError):
    """An Execution was asked to move between ExecutionStates the state machine forbids.

    Attributes:
        execution: The Execution, e.g. ``Source (1/2)``.
        current: Its ExecutionState.
        target: The state it was asked to move to.
    """

    def __init__(self, execution: str, current: object, target: object) -> None:
        self.execution = execution
        self.current = current
        self.target = target
        super().__init__(f"illegal ExecutionState transition of {execution}: {current} -> {target}")


class IllegalJobStatusTransitionError(MillraceError):
    """A job was asked to move between JobStatuses its state machine forbids
    (``runtime/executiongraph/job_status.py``): a bug of the Scheduler, never of a caller.

    Attributes:
        job: The job.
        current: Its status.
        target: The status it was asked to move to.
    """

    def __init__(self, job: str, current: str, target: str) -> None:
        self.job = job
        self.current = current
        self.target = target
        super().__init__(f"illegal JobStatus transition of {job}: {current} -> {target}")


class PipelineError(MillraceError):
    """The user's pipeline failed in Spark or is invalid; ``__cause__`` holds Spark's error.

    Attributes:
        vertex: Name of the JobVertex whose bundle failed, if known.
    """

    def __init__(self, message: str, vertex: str | None = None) -> None:
        self.vertex = vertex
        super().__init__(f"{vertex}: {message}" if vertex else message)


class UserCodeError(PipelineError):
    """User code cannot be serialized or deserialized (e.g. it captures a SparkSession)."""


class HighAvailabilityError(MillraceError):
    """ZooKeeper (the quorum, a znode) or the HA storage directory cannot be used.

    Attributes:
        path: The znode or storage path involved ("" if none).
    """

    def __init__(self, message: str, path: str = "") -> None:
        super().__init__(message)
        self.path = path


class LeadershipLostError(HighAvailabilityError):
    """This JobManager is no longer the leader (seed 003, 004): it must not deploy, complete a
    checkpoint or commit a sink. Raised by the leadership check and the fenced HA writes.

    Attributes:
        leader_session_id: The session this process led ("" if it never led).
    """

    def __init__(self, leader_session_id: str, reason: str) -> None:
        super().__init__(
            f"not the leader any more (leader session {leader_session_id or 'none'}): {reason}"
        )
        self.leader_session_id = leader_session_id


class LocalServerError(MillraceError):
    """A server this machine runs for development and tests (LocalZooKeeper, ``millrace
    zookeeper start``; SparkStandaloneCluster, ``millrace spark-cluster start``) cannot start
    or stop: java or its jars are missing, its port is taken, or it does not answer.

    Attributes:
        data_dir: The server's directory (its configuration, logs and PID files).
        reason: What went wrong and, where there is one, the fix.
        log_tail: The end of the server's log ("" if it never ran).
        server: Which server, e.g. ``"ZooKeeper"``, ``"Spark master"``.
    """

    def __init__(self, data_dir: str, reason: str, log_tail: str = "", server: str = "ZooKeeper"):
        self.data_dir, self.reason, self.log_tail, self.server = data_dir, reason, log_tail, server
        shown = f"\nthe end of its log:\n{log_tail}" if log_tail else ""
        super().__init__(f"local {server} in {data_dir}: {reason}{shown}")


class MessageLossError(MillraceError):
    """A consumer found a channel's events out of sequence (seed 001's message-loss detection):
    a gap, a repeat, or a stale producer session; the task fails, the job recovers.

    Attributes:
        channel: The channel, e.g. ``"producer 0 -> consumer 1 of partition P"``.
        kind: ``"gap"``, ``"repeat"`` or ``"stale session"``.
        expected: The next sequence number (or the session id) expected.
        seen: What arrived instead.
    """

    def __init__(self, channel: str, kind: str, expected: int, seen: int) -> None:
        self.channel, self.kind, self.expected, self.seen = channel, kind, expected, seen
        what = "session" if kind == "stale session" else "sequence number"
        super().__init__(
            f"message loss detected on channel {channel}: {kind}: expected {what} {expected}, "
            f"saw {seen}; the task fails so that the job recovers from its latest checkpoint"
        )


class ConfigError(MillraceError, ValueError):
    """A configuration value is invalid; raised at start.

    Attributes:
        key: The configuration key, e.g. ``rpc.ask-timeout``.
        value: The rejected value as given.
        allowed: What the key accepts.
    """

    def __init__(self, key: str, value: object, allowed: str) -> None:
        self.key = key
        self.value = value
        self.allowed = allowed
        super().__init__(f"invalid configuration {key}={value!r}: expected {allowed}")
