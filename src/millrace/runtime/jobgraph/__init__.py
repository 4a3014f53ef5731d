"""The JobGraph submitted by clients."""

from millrace.runtime.jobgraph.job_graph import (
    DistributionPattern,
    JobEdge,
    JobGraph,
    JobVertex,
    OperatorKind,
    SerializedOperator,
)

__all__ = [
    "DistributionPattern",
    "JobEdge",
    "JobGraph",
    "JobVertex",
    "OperatorKind",
    "SerializedOperator",
]
