"""JobStatus: the life cycle of a whole job, and the only moves it may make (Flink's JobStatus).

::

    CREATED ──► RUNNING ──────────────────────────────► FINISHED
       │          │ ▲  └──► FAILING ──► FAILED            (sinks committed)
       │          │ │              ▲       ▲
       │          ▼ │              │       │ (final commit failed, no restart left)
       │       RESTARTING ─────────┴───────┘
       │          │
       └──────────┴──► CANCELLING ──► CANCELED

A job is RUNNING while it runs and while a finished bounded job commits its sinks; it is
FINISHED once they are committed. RESTARTING goes back to RUNNING when the restored job is
deployed again, or to FAILING or CANCELLING. FINISHED, FAILED and CANCELED are terminal. Any
other move raises IllegalJobStatusTransitionError: the Scheduler changes the status only through
:func:`check_job_transition`.
"""

from __future__ import annotations

import enum

from millrace.errors import IllegalJobStatusTransitionError

__all__ = ["JobStatus", "check_job_transition", "is_legal_job_transition"]


class JobStatus(enum.Enum):
    """Status of a whole job (Flink's ``JobStatus``)."""

    CREATED = "CREATED"
    RUNNING = "RUNNING"
    RESTARTING = "RESTARTING"
    FAILING = "FAILING"
    FAILED = "FAILED"
    CANCELLING = "CANCELLING"
    CANCELED = "CANCELED"
    FINISHED = "FINISHED"

    @property
    def is_globally_terminal(self) -> bool:
        """True for FINISHED, FAILED and CANCELED."""
        return self in (JobStatus.FAILED, JobStatus.CANCELED, JobStatus.FINISHED)

    @property
    def ends_as(self) -> JobStatus:
        """The terminal status a job given up in this status reaches once its Executions have
        ended: CANCELED after CANCELLING, FAILED after anything else."""
        return JobStatus.CANCELED if self is JobStatus.CANCELLING else JobStatus.FAILED


_J = JobStatus
_LEGAL: dict[JobStatus, frozenset[JobStatus]] = {
    _J.CREATED: frozenset({_J.RUNNING, _J.FAILED, _J.CANCELLING, _J.CANCELED}),
    _J.RUNNING: frozenset({_J.RESTARTING, _J.FAILING, _J.CANCELLING, _J.FINISHED, _J.FAILED}),
    _J.RESTARTING: frozenset({_J.RUNNING, _J.FAILING, _J.CANCELLING, _J.FAILED}),
    _J.FAILING: frozenset({_J.FAILED}),
    _J.CANCELLING: frozenset({_J.CANCELED}),
    _J.FINISHED: frozenset(),
    _J.FAILED: frozenset(),
    _J.CANCELED: frozenset(),
}


def is_legal_job_transition(current: JobStatus, target: JobStatus) -> bool:
    """Whether a job may move from ``current`` to ``target``."""
    return target in _LEGAL[current]


def check_job_transition(job: str, current: JobStatus, target: JobStatus) -> None:
    """Raises IllegalJobStatusTransitionError unless ``current -> target`` is legal."""
    if not is_legal_job_transition(current, target):
        raise IllegalJobStatusTransitionError(job, current.name, target.name)
