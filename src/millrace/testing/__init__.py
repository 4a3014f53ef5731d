"""Public test kit: drive Millrace's components without threads, sleeps or a cluster.

* :class:`ManuallyTriggeredMainThreadExecutor`: a ComponentMainThreadExecutor on a ManualClock
  whose queued and scheduled work runs when the test says (``trigger_all``, ``advance``), on the
  test's thread (Flink's ManuallyTriggeredComponentMainThreadExecutor).
* :class:`TestingTaskExecutorGateway`, :class:`TestingResourceManagerGateway`: gateways whose
  answers a test sets per method and whose calls it can read back (Flink's
  TestingTaskExecutorGatewayBuilder and TestingResourceManagerGateway).
* :class:`TestingTaskRuntime`: a data plane that starts at once and runs nothing, for a
  MiniCluster whose tasks need no Spark.
* :class:`TestingEndpoint`: serves a testing gateway at an address, so that an endpoint under
  test (a JobMaster, a Dispatcher) reaches it over an RpcService like a real peer.

Nothing here is used by production code; it ships with the package so that users' and
connectors' tests can use it too.
"""

from millrace.testing.manually_triggered_executor import ManuallyTriggeredMainThreadExecutor
from millrace.testing.testing_endpoint import TestingEndpoint
from millrace.testing.testing_gateways import (
    TestingResourceManagerGateway,
    TestingTaskExecutorGateway,
)
from millrace.testing.testing_task_runtime import TestingTaskRuntime

__all__ = [
    "ManuallyTriggeredMainThreadExecutor",
    "TestingEndpoint",
    "TestingResourceManagerGateway",
    "TestingTaskExecutorGateway",
    "TestingTaskRuntime",
]
