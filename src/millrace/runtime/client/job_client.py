"""JobClient: the client's endpoint for submitting jobs and waiting for them (seed 000).

SubmitJobDetached returns once the Dispatcher accepted the job; SubmitJobWait completes with the
JobResult (JobResultSuccess with duration and accumulators, or JobResultFailure with the root
cause) when the job ends.

Under high availability the Dispatcher's address comes from leader retrieval
(:meth:`JobClient.notify_leader_address`), and a SubmitJobWait whose Dispatcher is lost (killed,
or its leadership revoked) asks the next leader for the job's result: the new leader recovers the
job, or knows its result from the JobResultStore.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Protocol, TypeVar

from millrace.errors import JobSubmissionError, RpcError
from millrace.rpc import RpcEndpoint, RpcGateway, RpcService
from millrace.runtime.dispatcher.dispatcher_gateway import DispatcherGateway
from millrace.runtime.highavailability.leader_retrieval import LeaderInformation
from millrace.runtime.job_result import JobDetails, JobResult
from millrace.runtime.jobgraph import JobGraph
from millrace.types import DEFAULT_LEADER_SESSION_ID, JobId

__all__ = ["JobClient", "JobClientGateway"]

NO_TIMEOUT = 10 * 365 * 86400.0
"""Timeout (s) of waits that last as long as the job (ten years)."""

R = TypeVar("R")

_RESULT_RETRY = 0.5  # seconds between asks for a result while the Dispatcher's leader changes


class JobClientGateway(RpcGateway, Protocol):
    def submit_job_detached(self, job_graph: JobGraph) -> Future[JobId]:
        """SubmitJobDetached: the job id once the Dispatcher accepted the job.

        Fails with JobSubmissionError (rejected) or RpcTimeoutError (no answer).
        """
        ...

    def submit_job_wait(
        self, job_graph: JobGraph, timeout: float = NO_TIMEOUT
    ) -> Future[JobResult]:
        """SubmitJobWait: the JobResult once the job ended (``timeout`` s, default unbounded)."""
        ...

    def request_job_details(self, job_id: JobId) -> Future[JobDetails]: ...

    def cancel_job(self, job_id: JobId) -> Future[None]: ...


class JobClient(RpcEndpoint, implements=(JobClientGateway,)):
    """Talks to one Dispatcher.

    Args:
        rpc_service: Service to run on.
        dispatcher_address: The Dispatcher's RPC address; None under high availability (the
            leader retrieval calls :meth:`notify_leader_address`).
        endpoint_id: Endpoint id (default ``jobclient``).

    Threading:
        Gateway methods run on the main thread; callers block on the returned futures from any
        other thread.
    """

    def __init__(
        self,
        rpc_service: RpcService,
        dispatcher_address: str | None,
        endpoint_id: str = "jobclient",
    ) -> None:
        super().__init__(rpc_service, endpoint_id)
        self._dispatcher_address = dispatcher_address
        self._high_availability = dispatcher_address is None
        self._dispatcher_id = DEFAULT_LEADER_SESSION_ID  # the Dispatcher's fencing token
        self._dispatcher: Future[DispatcherGateway] = Future()  # until a leader is known

    def on_start(self) -> None:
        if self._dispatcher_address is not None:
            self._dispatcher = self.rpc_service.connect(
                self._dispatcher_address, DispatcherGateway, fencing_token=self._dispatcher_id
            )

    def notify_leader_address(self, leader: LeaderInformation | None) -> None:
        """High availability: the Dispatcher's leader changed. Main thread (``run_async``)."""
        if leader is None or leader.leader_session_id == self._dispatcher_id:
            return
        self._dispatcher_address = leader.address
        self._dispatcher_id = leader.leader_session_id
        connecting = self.rpc_service.connect(
            leader.address, DispatcherGateway, fencing_token=leader.leader_session_id
        )
        if self._dispatcher.done():
            self._dispatcher = connecting
        else:  # calls were waiting for the first leader
            waiting, self._dispatcher = self._dispatcher, connecting
            self.on_main_thread(connecting, lambda f: _copy_outcome(f, waiting))

    def submit_job_detached(self, job_graph: JobGraph) -> Future[JobId]:
        reply: Future[JobId] = Future()
        self._with_dispatcher(
            lambda d: d.submit_job(job_graph), lambda _: reply.set_result(job_graph.job_id), reply
        )
        return reply

    def submit_job_wait(
        self, job_graph: JobGraph, timeout: float = NO_TIMEOUT
    ) -> Future[JobResult]:
        reply: Future[JobResult] = Future()

        self._with_dispatcher(
            lambda d: d.submit_job(job_graph), lambda _: self._await(job_graph.job_id, reply), reply
        )
        return reply

    def _await(self, job_id: JobId, reply: Future[JobResult]) -> None:
        """Ask for the job's result; under HA, a lost Dispatcher means: ask its successor."""

        def lost(error: BaseException) -> None:
            if self._high_availability and isinstance(error, RpcError | JobSubmissionError):
                self.schedule_run_async(lambda: self._await(job_id, reply), _RESULT_RETRY)
            elif not reply.done():
                reply.set_exception(error)

        self._with_dispatcher(
            lambda d: d.request_job_result(job_id, timeout=NO_TIMEOUT),
            reply.set_result,
            reply,
            lost,
        )

    def request_job_details(self, job_id: JobId) -> Future[JobDetails]:
        reply: Future[JobDetails] = Future()
        self._with_dispatcher(lambda d: d.request_job_details(job_id), reply.set_result, reply)
        return reply

    def cancel_job(self, job_id: JobId) -> Future[None]:
        reply: Future[None] = Future()
        self._with_dispatcher(
            lambda d: d.cancel_job(job_id), lambda _: reply.set_result(None), reply
        )
        return reply

    def _with_dispatcher(
        self,
        call: Callable[[DispatcherGateway], Future[R]],
        on_result: Callable[[R], object],
        reply: Future[Any],
        on_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        """Run ``call(dispatcher)``; pass its result to ``on_result`` on the main thread, or
        its error to ``on_error`` (default: fail ``reply``)."""

        def failed(error: BaseException) -> None:
            if on_error is not None:
                on_error(error)
            elif not reply.done():
                reply.set_exception(error)

        def connected(f: Future[DispatcherGateway]) -> None:
            error = f.exception()
            if error is not None:
                failed(error)
                return
            try:
                answer = call(f.result())
            except Exception as raised:  # e.g. the gateway's connection is closed
                failed(raised)
                return
            self.on_main_thread(answer, answered)

        def answered(f: Future[R]) -> None:
            error = f.exception()
            if error is not None:
                failed(error)
                return
            on_result(f.result())

        self.on_main_thread(self._dispatcher, connected)


def _copy_outcome(source: Future[Any], target: Future[Any]) -> None:
    error = source.exception()
    if error is not None:
        target.set_exception(error)
    else:
        target.set_result(source.result())
