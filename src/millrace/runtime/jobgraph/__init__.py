"""The JobGraph submitted by clients."""

from millrace.runtime.jobgraph.job_graph import (
    ChainedKeyedStage,
    DistributionPattern,
    JobEdge,
    JobGraph,
    JobVertex,
    OperatorKind,
    SerializedOperator,
)

__all__ = [
    "ChainedKeyedStage",
    "DistributionPattern",
    "JobEdge",
    "JobGraph",
    "JobVertex",
    "OperatorKind",
    "SerializedOperator",
]
