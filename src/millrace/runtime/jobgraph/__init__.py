"""The JobGraph submitted by clients."""

from millrace.runtime.jobgraph.job_graph import DistributionPattern, JobEdge, JobGraph, JobVertex

__all__ = ["DistributionPattern", "JobEdge", "JobGraph", "JobVertex"]
