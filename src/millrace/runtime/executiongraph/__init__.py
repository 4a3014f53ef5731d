"""The JobMaster's parallel view of a job: ExecutionGraph and the ExecutionState machine."""

from millrace.runtime.executiongraph.execution_graph import (
    Execution,
    ExecutionGraph,
    ExecutionHistory,
    ExecutionJobVertex,
    ExecutionVertex,
    IOMetrics,
    JobStatus,
)
from millrace.runtime.executiongraph.execution_state import ExecutionState, is_legal_transition

__all__ = [
    "Execution",
    "ExecutionGraph",
    "ExecutionHistory",
    "ExecutionJobVertex",
    "ExecutionState",
    "ExecutionVertex",
    "IOMetrics",
    "JobStatus",
    "is_legal_transition",
]
