"""Faults as production has them, for the failure tests.

A TaskManager is lost abruptly or not at all: a failover test that stops its victim with
``close_async()`` tests a graceful shutdown (tasks cancelled and reported, partitions released
with an error their consumers see at once), which hides every bug of the abrupt path. The
helpers here lose things the way machines do:

* :func:`crash_task_executor`: an in-process TaskExecutor dies like a process under ``kill -9``.
  Its main thread ends without ``on_stop`` (no deregistration, no final heartbeat, no
  task-state update, no partition released); calls to it fail as calls to a dead process's
  closed port do; its task threads stop with their Spark jobs, and whatever they report on the
  way out goes nowhere.
* :func:`busy_task_executor`: the TaskExecutor of the embedded cluster that runs tasks now.
* :func:`kill_process` and :func:`stop_process`: SIGKILL and SIGSTOP of a real process by PID
  (``tests.integration.standalone_cluster`` starts them).
"""

from __future__ import annotations

import os
import signal
import time

from millrace.runtime.minicluster import MiniCluster
from millrace.runtime.taskexecutor.task_executor import TaskExecutor
from tests.waiting import WAIT, result_within, wait_until

__all__ = [
    "busy_task_executor",
    "crash_task_executor",
    "kill_process",
    "stop_process",
]


class _ProcessKilled(BaseException):
    """Ends an endpoint's main thread as SIGKILL would: past every ``except Exception``, so
    neither the endpoint's error handling nor its ``on_stop`` runs."""


def _die() -> None:
    raise _ProcessKilled("kill -9")


def crash_task_executor(task_executor: TaskExecutor, timeout: float = WAIT) -> None:
    """Kill an in-process TaskExecutor abruptly (``kill -9`` of its TaskManager).

    The main thread takes the crash as its next message and terminates without ``on_stop``:
    the ResourceManager and the JobMasters hear nothing (they find out by heartbeat, or when a
    call to it fails with ``RecipientUnreachableError`` as a call to a dead process does), its
    result partitions vanish unreleased, its registration is never withdrawn. Then its task
    threads are stopped with their Spark jobs; the state changes they report on the way out go
    to a dead mailbox and are dropped.

    Args:
        task_executor: A started TaskExecutor (e.g. of ``MiniCluster.task_executors``).
        timeout: Seconds to wait for the main thread and the task threads to end.

    Raises:
        AssertionError: If the main thread or a task thread is still alive after ``timeout``.

    Threading:
        The test's thread.
    """
    task_executor.run_async(_die)
    wait_until(
        lambda: not task_executor.rpc_server.main_thread.is_alive(),
        what=f"the main thread of {task_executor.resource_id} to die",
        timeout=timeout,
    )
    # The main thread is gone, so its state is ours to read; kill -9 takes the threads too.
    tasks = list(task_executor._tasks.values())
    for task in tasks:
        task.cancel()
    deadline = time.monotonic() + timeout
    for task in tasks:
        assert task.join(max(0.0, deadline - time.monotonic())), (
            f"task {task.tdd.task_name} of crashed {task_executor.resource_id} still runs"
        )


def busy_task_executor(cluster: MiniCluster) -> TaskExecutor:
    """A TaskExecutor of ``cluster`` that holds allocated slots (runs some of the job now).

    Raises:
        AssertionError: If none holds a slot.
    """
    rm = cluster.resource_manager
    assert rm is not None, "the MiniCluster is not started"
    infos = result_within(
        rm.call_async(rm.request_task_manager_infos), 30, what="the TaskManager infos"
    )
    busy = [i.resource_id for i in infos if i.slots_free < i.slots_total]
    assert busy, f"no TaskManager holds a slot: {infos}"
    return next(te for te in cluster.task_executors if te.resource_id == busy[0])


def kill_process(pid: int) -> None:
    """SIGKILL ``pid`` (a process this test started)."""
    os.kill(pid, signal.SIGKILL)


def stop_process(pid: int) -> None:
    """SIGSTOP ``pid``: it stays alive and silent until SIGCONT (``os.kill(pid, SIGCONT)``)."""
    os.kill(pid, signal.SIGSTOP)
