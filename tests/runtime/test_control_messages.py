"""Every registered control message survives the codec unchanged."""

from __future__ import annotations

import pytest

from millrace.runtime.checkpoint.checkpoint_history import (
    CheckpointRecord,
    CheckpointTaskStatistics,
)
from millrace.runtime.checkpoint.checkpoint_statistics import CheckpointStatistics
from millrace.runtime.checkpoint.task_state_snapshot import (
    ChainedKeyedState,
    KeyedStateHandle,
    TaskStateSnapshot,
)
from millrace.runtime.control_messages import CONTROL_MESSAGES, control_message_codec
from millrace.runtime.deployment import (
    Acknowledge,
    InputChannelDescriptor,
    SlotOffer,
    TaskDeploymentDescriptor,
    TaskExecutionState,
    TaskOperationResult,
)
from millrace.runtime.dispatcher.dispatcher_gateway import ClusterConfigurationInfo
from millrace.runtime.executiongraph import ExecutionState, IOMetrics, JobStatus
from millrace.runtime.executiongraph.archived_execution_graph import (
    ArchivedExecution,
    ArchivedExecutionJobVertex,
    ArchivedJobEdge,
    CheckpointConfigInfo,
    ExceptionHistoryEntry,
    ExecutionGraphInfo,
    JobConfigInfo,
)
from millrace.runtime.hardware_description import HardwareDescription
from millrace.runtime.io.input_split import InputSplit, NextInputSplit, SplitState
from millrace.runtime.io.partition_events import (
    MAX_WATERMARK,
    MIN_WATERMARK,
    Ack,
    AckRequest,
    CheckpointBarrier,
    DataBundle,
    EndOfPartition,
    PartitionEvents,
    Watermark,
    WatermarkStatus,
)
from millrace.runtime.job_result import (
    JobDetails,
    JobResultFailure,
    JobResultSuccess,
    VertexDetails,
)
from millrace.runtime.jobgraph import (
    ChainedKeyedStage,
    DistributionPattern,
    JobEdge,
    JobGraph,
    JobVertex,
    OperatorKind,
    SerializedOperator,
)
from millrace.runtime.jobmaster.clock_service import TaskClock, WatermarksInfo
from millrace.runtime.jobmaster.job_change import JobChangeRequest, JobChangeResult
from millrace.runtime.metrics.metric_query_service import MetricDump
from millrace.runtime.metrics.task_io_metric_group import TaskMetricsSnapshot
from millrace.runtime.registration import (
    AcknowledgeRegistration,
    AlreadyRegistered,
    RefuseRegistration,
    RegisterTaskManager,
)
from millrace.runtime.resourcemanager.slot_manager import AllocatedSlotInfo, TaskManagerInfo

METRICS = IOMetrics(336_776, 5_430, 1, 0, 2)
DETAILS = JobDetails(
    "job",
    "flight-delays",
    JobStatus.FINISHED,
    1.7e9,
    8.5,
    [VertexDetails("flights", 2, {"FINISHED": 2}, METRICS)],
    12,
    12,
    1,
)
OPERATOR = SerializedOperator(OperatorKind.SINK, "Sink: parquet at out", b"\x80\x05user code")
VERTEX = JobVertex("flights -> departed", 2, "m:Task", (OPERATOR,), True, "v1")
EDGE = JobEdge("v1", "v2", DistributionPattern.HASH, ("carrier",))
CHAINED = ChainedKeyedStage("v2", "window", "m:Window", "src", "m:Source", 1, 0, ("carrier",))
TDD = TaskDeploymentDescriptor(
    "job",
    "flight-delays",
    "tcp://127.0.0.1:6123/jobmaster-1",
    "v2",
    "window (1/2)",
    0,
    2,
    "attempt",
    "alloc",
    "m:Task",
    (OPERATOR,),
    False,
    None,
    0,
    (InputChannelDescriptor("partition", 0, "tcp://127.0.0.1:6124/tm", 1),),
    128,
    {"parallelism.default": "2", "execution.bundle.max-records": 1000},
)
TASK_STATISTICS = CheckpointTaskStatistics("v1", 2, 2, 1_700_000_000_120, 4096)
RECORD = CheckpointRecord(
    4, "COMPLETED", False, 1_700_000_000_000, 120, 4096, "/chk/job/chk-4", "", (TASK_STATISTICS,)
)
HARDWARE = HardwareDescription(8, 16 * 2**30, 9 * 2**30)
SLOT = AllocatedSlotInfo(0, "job", "alloc")
SUBTASK = ArchivedExecution(
    1, "RUNNING", 2, "tm-1", "127.0.0.1:6124", {"CREATED": 1, "RUNNING": 9}, METRICS
)
INPUT = ArchivedJobEdge("v1", 0, "HASH", ("carrier",))
ARCHIVED_VERTEX = ArchivedExecutionJobVertex(
    "v2", "window", 2, 128, ("window",), ("WINDOW",), (INPUT,), (SUBTASK,)
)
FAILURE = ExceptionHistoryEntry(
    1_700_000_000_500,
    "HeartbeatTimeoutError",
    "TaskManager tm-1 lost (heartbeat timeout)",
    "window (2/2)",
    "127.0.0.1:6124",
    "tm-1",
)
JOB_CONFIG = JobConfigInfo("PIPELINED", "FixedDelayRestartStrategy(3, 1 s)", 2, {"a": "b"})
CHECKPOINT_CONFIG = CheckpointConfigInfo("EXACTLY_ONCE", 2000, 600_000, 0, 1, 1, "/chk", "files")
GRAPH_INFO = ExecutionGraphInfo(
    DETAILS,
    "STREAMING",
    {"CREATED": 1, "RUNNING": 2},
    (ARCHIVED_VERTEX,),
    (FAILURE,),
    False,
    "TaskManager tm-1 lost (heartbeat timeout)",
    1_700_000_000_500,
    JOB_CONFIG,
    CHECKPOINT_CONFIG,
    (RECORD,),
    ("/chk/job/chk-4",),
    1_700_000_001_000,
)
SAMPLES = [
    Acknowledge(),
    RegisterTaskManager("tm-1", "tcp://127.0.0.1:6123/taskmanager-1", 2, 1, HARDWARE),
    AcknowledgeRegistration("reg", "rm"),
    AlreadyRegistered("reg", "rm"),
    RefuseRegistration("protocol version 99 is not supported"),
    SlotOffer("alloc", 1),
    InputChannelDescriptor("partition", 0, "tcp://127.0.0.1:6124/tm", 1),
    TaskOperationResult("attempt", False, "no such task"),
    ExecutionState.CANCELING,
    METRICS,
    TaskExecutionState("job", "attempt", ExecutionState.FAILED, METRICS, "boom"),
    InputSplit(3, "file:///data/flights-2013-03.parquet", None, 1_362_096_000_000, 28_834),
    NextInputSplit(InputSplit(0, "f", 2, None, None), MIN_WATERMARK, 12, 1),
    DataBundle("/x/000-to001.parquet", 120, 1_357_084_800_000, 1_359_676_800_000),
    Watermark(MAX_WATERMARK),
    EndOfPartition(),
    PartitionEvents(4, (DataBundle("p", 1), Watermark(5), EndOfPartition())),
    PartitionEvents(0, (DataBundle("p", 1, size_bytes=512), AckRequest()), (9, 9), (0, 1)),
    JobStatus.RUNNING,
    DETAILS.vertices[0],
    DETAILS,
    JobResultSuccess("job", 8.5, {"flights": METRICS}, DETAILS),
    JobResultFailure("job", JobStatus.FAILED, 1.0, "RuntimeError: boom", DETAILS),
    TaskManagerInfo("tm-1", "tcp://127.0.0.1:6124/tm", 2, 1, HARDWARE, 1500, 2**28, (SLOT,)),
    OperatorKind.WINDOW,
    OPERATOR,
    DistributionPattern.FORWARD,
    EDGE,
    VERTEX,
    JobGraph("flight-delays", [VERTEX], [EDGE], 128, "job"),
    TDD,
    CheckpointBarrier(7, 1_700_000_000_000),
    SplitState(InputSplit(0, "flights/3"), 1_234, False),
    KeyedStateHandle("/chk/job/chk-7/v/000-abcdefgh.parquet", 0, 63, 5_449, 81_920),
    TaskStateSnapshot(
        (KeyedStateHandle("/chk/x.parquet", 64, 127, 10),),
        (SplitState(InputSplit(1, "flights/1"), 99),),
        ("/data/flights-2013-01.parquet",),
        {3: ("/out/.pending/job/part-1.a.parquet",)},
        1_359_676_799_999,
        ChainedKeyedState((KeyedStateHandle("/chk/w.parquet", 0, 127, 3),), 1_359_676_799_000),
    ),
    ChainedKeyedState(),
    CHAINED,
    JobVertex("src -> window", 1, "m:Chain", (OPERATOR,), True, "v1", CHAINED),
    RECORD,
    CheckpointStatistics(2000, "EXACTLY_ONCE", 4, 1, 1, "", ["/chk/job/chk-4"], [RECORD]),
    TaskClock("flights", 1, 1_359_676_799_999),
    WatermarkStatus(False),
    AckRequest(),
    Ack(2**62, 17, 18),
    TaskMetricsSnapshot("job", "name", "vertex", "Source: words", 0, "attempt", records_in=7),
    MetricDump(
        "tm-1",
        {"Status.JVM.Memory.Heap.Used": 1.0e8},
        (TaskMetricsSnapshot("job", "name", "vertex", "Sink", 1, "attempt", busy_ms=5),),
    ),
    WatermarksInfo(1_359_676_799_999, [TaskClock("window", 0, MIN_WATERMARK)]),
    HARDWARE,
    SLOT,
    TASK_STATISTICS,
    SUBTASK,
    INPUT,
    ARCHIVED_VERTEX,
    FAILURE,
    JOB_CONFIG,
    CHECKPOINT_CONFIG,
    GRAPH_INFO,
    ClusterConfigurationInfo(
        (("rest.port", "8081"), ("security.cluster-secret", "******")), "/log"
    ),
    JobChangeRequest(transform="tag", payload=b"\x80\x05user code"),
    JobChangeRequest(parallelism=3, vertex="window"),
    JobChangeResult("job", "rescale every vertex to parallelism 3", "/sp", 7, 1, 2, 3, -1),
]


def test_every_registered_message_has_a_sample() -> None:
    assert {type(s) for s in SAMPLES} == {cls for _, cls in CONTROL_MESSAGES}


@pytest.mark.parametrize("message", SAMPLES, ids=lambda m: type(m).__name__)
def test_message_round_trips(message) -> None:
    codec = control_message_codec()
    assert codec.decode(codec.encode(message)) == message
