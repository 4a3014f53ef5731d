"""The registry of control-plane messages that may cross process boundaries (seed 000, 004).

Type ids are part of the wire format: never reuse or renumber one; add new messages at the
end. User code (the operators of a JobGraph and of a TaskDeploymentDescriptor) travels inside
them as opaque bytes (``SerializedOperator.payload``) that only the tasks and the JobMaster load.
"""

from __future__ import annotations

from millrace.rpc.message_codec import MessageCodec
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

__all__ = ["CONTROL_MESSAGES", "control_message_codec"]

CONTROL_MESSAGES: tuple[tuple[int, type], ...] = (
    (1, Acknowledge),
    (2, RegisterTaskManager),
    (3, AcknowledgeRegistration),
    (4, AlreadyRegistered),
    (5, RefuseRegistration),
    (6, SlotOffer),
    (7, InputChannelDescriptor),
    (8, TaskOperationResult),
    (9, ExecutionState),
    (10, IOMetrics),
    (11, TaskExecutionState),
    (12, InputSplit),
    (13, NextInputSplit),
    (14, DataBundle),
    (15, Watermark),
    (16, EndOfPartition),
    (17, PartitionEvents),
    (18, JobStatus),
    (19, VertexDetails),
    (20, JobDetails),
    (21, JobResultSuccess),
    (22, JobResultFailure),
    (23, TaskManagerInfo),
    (24, OperatorKind),
    (25, SerializedOperator),
    (26, DistributionPattern),
    (27, JobEdge),
    (28, JobVertex),
    (29, JobGraph),
    (30, TaskDeploymentDescriptor),
    (31, CheckpointBarrier),
    (32, SplitState),
    (33, KeyedStateHandle),
    (34, TaskStateSnapshot),
    (35, CheckpointRecord),
    (36, CheckpointStatistics),
    (37, TaskClock),
    (38, WatermarksInfo),
    (39, WatermarkStatus),
    # 60 and up: issue 14's metrics (ids 40-59 left to the other issue-14 messages)
    (60, TaskMetricsSnapshot),
    (61, MetricDump),
    # issue 14: REST's ExecutionGraphInfo, TaskManager hardware and slots
    (40, HardwareDescription),
    (41, AllocatedSlotInfo),
    (42, CheckpointTaskStatistics),
    (43, ArchivedExecution),
    (44, ArchivedJobEdge),
    (45, ArchivedExecutionJobVertex),
    (46, ExceptionHistoryEntry),
    (47, JobConfigInfo),
    (48, CheckpointConfigInfo),
    (49, ExecutionGraphInfo),
    (50, ClusterConfigurationInfo),
    # issue 13, the channel protocol (seed 001's flow control and message-loss detection)
    (70, AckRequest),
    (71, Ack),
    # issue 13: live DAG changes (90-99)
    (90, JobChangeRequest),
    (91, JobChangeResult),
    (92, ChainedKeyedStage),
    (93, ChainedKeyedState),
)


def control_message_codec() -> MessageCodec:
    """A codec knowing every control message."""
    codec = MessageCodec()
    for type_id, cls in CONTROL_MESSAGES:
        codec.register(type_id, cls)
    return codec
