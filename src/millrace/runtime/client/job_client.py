"""JobClient: the client's endpoint for submitting jobs and waiting for them (seed 000).

SubmitJobDetached returns once the Dispatcher accepted the job; SubmitJobWait completes with the
JobResult (JobResultSuccess with duration and accumulators, or JobResultFailure with the root
cause) when the job ends.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Protocol, TypeVar

from millrace.rpc import RpcEndpoint, RpcGateway, RpcService
from millrace.runtime.dispatcher.dispatcher_gateway import DispatcherGateway
from millrace.runtime.job_result import JobDetails, JobResult
from millrace.runtime.jobgraph import JobGraph
from millrace.types import JobId

__all__ = ["JobClient", "JobClientGateway"]

NO_TIMEOUT = 10 * 365 * 86400.0
"""Timeout (s) of waits that last as long as the job (ten years)."""

R = TypeVar("R")


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
        dispatcher_address: The Dispatcher's RPC address.
        endpoint_id: Endpoint id (default ``jobclient``).

    Threading:
        Gateway methods run on the main thread; callers block on the returned futures from any
        other thread.
    """

    def __init__(
        self, rpc_service: RpcService, dispatcher_address: str, endpoint_id: str = "jobclient"
    ) -> None:
        super().__init__(rpc_service, endpoint_id)
        self._dispatcher_address = dispatcher_address
        self._dispatcher: Future[DispatcherGateway] | None = None

    def on_start(self) -> None:
        self._dispatcher = self.rpc_service.connect(self._dispatcher_address, DispatcherGateway)

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

        def submitted(_: object) -> None:
            self._with_dispatcher(
                lambda d: d.request_job_result(job_graph.job_id, timeout=NO_TIMEOUT),
                reply.set_result,
                reply,
            )

        self._with_dispatcher(lambda d: d.submit_job(job_graph), submitted, reply)
        return reply

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
    ) -> None:
        """Run ``call(dispatcher)``; pass its result to ``on_result`` on the main thread, or
        its error to ``reply``."""
        assert self._dispatcher is not None

        def connected(f: Future[DispatcherGateway]) -> None:
            if f.exception() is not None:
                reply.set_exception(f.exception())
                return
            self.on_main_thread(call(f.result()), answered)

        def answered(f: Future[R]) -> None:
            if f.exception() is not None:
                if not reply.done():
                    reply.set_exception(f.exception())
                return
            on_result(f.result())

        self.on_main_thread(self._dispatcher, connected)
