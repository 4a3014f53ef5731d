"""The whole public exception tree of Millrace.

Every error raised by Millrace derives from :class:`MillraceError`. Errors carry structured
attributes (``job_id``, ``endpoint_id``, ``address``, ``key``) so callers can react without
parsing messages, and their message names the object involved and, where there is one, the fix.

Foreign errors are translated at one boundary each: Spark's errors become :class:`PipelineError`
in ``millrace.spark`` alone.
"""

from __future__ import annotations

__all__ = [
    "CheckpointDeclinedError",
    "CheckpointError",
    "ConfigError",
    "EndpointStoppedError",
    "FencingTokenError",
    "FrameSizeError",
    "HeartbeatTimeoutError",
    "IllegalExecutionStateTransitionError",
    "IllegalJobStatusTransitionError",
    "IllegalThreadError",
    "JobCancelledError",
    "JobExecutionError",
    "JobSubmissionError",
    "MillraceError",
    "PipelineError",
    "RecipientUnreachableError",
    "RpcError",
    "RpcTimeoutError",
    "SlotAllocationError",
]


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
    """No endpoint answers at an address (lookup failed or endpoint stopped).

    Attributes:
        address: The address that could not be reached.
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


class IllegalThreadError(MillraceError, RuntimeError):
    """Code that must run on an endpoint's main thread ran on another thread."""

    def __init__(self, endpoint_id: str, thread_name: str) -> None:
        self.endpoint_id = endpoint_id
        self.thread_name = thread_name
        super().__init__(
            f"{endpoint_id}: this method must run in the endpoint's main thread, "
            f"but ran in thread {thread_name!r}; use run_async/call_async"
        )


class HeartbeatTimeoutError(MillraceError):
    """A heartbeat target was declared dead by the failure detector."""

    def __init__(self, resource_id: str, reason: str) -> None:
        self.resource_id = resource_id
        super().__init__(f"heartbeat of {resource_id} timed out: {reason}")


class CheckpointError(MillraceError):
    """A checkpoint could not be taken, completed or restored."""


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
    """Slots for a job could not be allocated."""

    def __init__(self, message: str, job_id: str | None = None) -> None:
        self.job_id = job_id
        super().__init__(message)


class JobSubmissionError(MillraceError):
    """A job was rejected at submission (duplicate id, invalid JobGraph, ...)."""

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


class IllegalExecutionStateTransitionError(MillraceError):
    """An Execution was asked to move between ExecutionStates the state machine forbids."""

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


class PartitionNotFoundError(RpcError):
    """A consumer asked for a result partition its producer's TaskExecutor does not hold."""

    def __init__(self, partition_id: str) -> None:
        self.partition_id = partition_id
        super().__init__(f"result partition {partition_id} not found (released or never made)")


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


class AuthenticationError(RpcError):
    """A peer failed to prove the cluster secret; the connection was closed."""
