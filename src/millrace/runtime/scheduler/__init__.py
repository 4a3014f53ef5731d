"""The Scheduler of one job (Flink's SchedulerNG): ExecutionGraph, deployment, failover."""

from millrace.runtime.scheduler.execution_deployer import DeploymentListener, ExecutionDeployer
from millrace.runtime.scheduler.scheduler import Scheduler, SchedulerContext

__all__ = [
    "DeploymentListener",
    "ExecutionDeployer",
    "Scheduler",
    "SchedulerContext",
]
