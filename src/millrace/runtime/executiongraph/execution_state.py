"""ExecutionState: the life cycle of one execution attempt of a subtask (Flink's state machine).

::

    CREATED -> SCHEDULED -> DEPLOYING -> INITIALIZING -> RUNNING -> FINISHED
        \\           \\            \\              \\            \\-> CANCELING -> CANCELED
         \\-----------\\------------\\--------------\\--------------> FAILED

Every non-terminal state may move to CANCELING, CANCELED (before deployment) or FAILED; FINISHED,
CANCELED and FAILED are terminal. Any other move raises IllegalExecutionStateTransitionError.
"""

from __future__ import annotations

import enum

__all__ = ["ExecutionState", "is_legal_transition"]


class ExecutionState(enum.Enum):
    """State of an Execution (Flink's ``ExecutionState``)."""

    CREATED = "CREATED"
    SCHEDULED = "SCHEDULED"
    DEPLOYING = "DEPLOYING"
    INITIALIZING = "INITIALIZING"
    RUNNING = "RUNNING"
    FINISHED = "FINISHED"
    CANCELING = "CANCELING"
    CANCELED = "CANCELED"
    FAILED = "FAILED"

    @property
    def is_terminal(self) -> bool:
        """True for FINISHED, CANCELED and FAILED."""
        return self in _TERMINAL


_TERMINAL = frozenset({ExecutionState.FINISHED, ExecutionState.CANCELED, ExecutionState.FAILED})

_S = ExecutionState
_LEGAL: dict[ExecutionState, frozenset[ExecutionState]] = {
    _S.CREATED: frozenset({_S.SCHEDULED, _S.CANCELED, _S.FAILED}),
    _S.SCHEDULED: frozenset({_S.DEPLOYING, _S.CANCELED, _S.FAILED}),
    _S.DEPLOYING: frozenset({_S.INITIALIZING, _S.RUNNING, _S.CANCELING, _S.FAILED}),
    _S.INITIALIZING: frozenset({_S.RUNNING, _S.FINISHED, _S.CANCELING, _S.FAILED}),
    _S.RUNNING: frozenset({_S.FINISHED, _S.CANCELING, _S.FAILED}),
    _S.CANCELING: frozenset({_S.CANCELED, _S.FAILED}),
    _S.FINISHED: frozenset(),
    _S.CANCELED: frozenset(),
    _S.FAILED: frozenset(),
}


def is_legal_transition(current: ExecutionState, target: ExecutionState) -> bool:
    """Whether an Execution may move from ``current`` to ``target``."""
    return target in _LEGAL[current]
