"""ExecutionGraph and Flink's ExecutionState machine: every legal move works, every other raises."""

from __future__ import annotations

import itertools

import pytest

from millrace.clock import ManualClock
from millrace.errors import (
    ExecutionGraphError,
    IllegalExecutionStateTransitionError,
    IllegalJobStatusTransitionError,
)
from millrace.runtime.executiongraph import (
    ExecutionGraph,
    ExecutionState,
    JobStatus,
    is_legal_transition,
)
from millrace.runtime.executiongraph.execution_graph import EXCEPTION_HISTORY_SIZE
from millrace.runtime.executiongraph.job_status import is_legal_job_transition
from millrace.runtime.jobgraph import DistributionPattern, JobEdge, JobGraph, JobVertex

S = ExecutionState

LEGAL = {
    (S.CREATED, S.SCHEDULED),
    (S.CREATED, S.CANCELED),
    (S.CREATED, S.FAILED),
    (S.SCHEDULED, S.DEPLOYING),
    (S.SCHEDULED, S.CANCELED),
    (S.SCHEDULED, S.FAILED),
    (S.DEPLOYING, S.INITIALIZING),
    (S.DEPLOYING, S.RUNNING),
    (S.DEPLOYING, S.CANCELING),
    (S.DEPLOYING, S.FAILED),
    (S.INITIALIZING, S.RUNNING),
    (S.INITIALIZING, S.FINISHED),
    (S.INITIALIZING, S.CANCELING),
    (S.INITIALIZING, S.FAILED),
    (S.RUNNING, S.FINISHED),
    (S.RUNNING, S.CANCELING),
    (S.RUNNING, S.FAILED),
    (S.CANCELING, S.CANCELED),
    (S.CANCELING, S.FAILED),
}


def graph(p_source: int = 2, p_window: int = 3) -> ExecutionGraph:
    source = JobVertex("source", p_source, "m:Source", is_source=True)
    window = JobVertex("window", p_window, "m:Window")
    edge = JobEdge(source.vertex_id, window.vertex_id, DistributionPattern.HASH, ("k",))
    return ExecutionGraph(JobGraph("job", [source, window], [edge]))


def execution_in(state: ExecutionState):
    execution = graph().executions()[0]
    execution.state = state
    return execution


@pytest.mark.parametrize(("current", "target"), sorted(LEGAL, key=str))
def test_legal_transition_moves_the_execution(current, target) -> None:
    execution = execution_in(current)
    execution.transition_to(target)
    assert execution.state is target


ILLEGAL = sorted(set(itertools.product(S, S)) - LEGAL, key=str)


@pytest.mark.parametrize(("current", "target"), ILLEGAL)
def test_illegal_transition_raises_and_keeps_the_state(current, target) -> None:
    execution = execution_in(current)
    with pytest.raises(IllegalExecutionStateTransitionError) as info:
        execution.transition_to(target)
    assert execution.state is current
    assert current.name in str(info.value) and target.name in str(info.value)


def test_the_table_and_the_state_machine_agree() -> None:
    for current, target in itertools.product(S, S):
        assert is_legal_transition(current, target) == ((current, target) in LEGAL)


def test_terminal_states_are_exactly_finished_canceled_failed() -> None:
    assert {s for s in S if s.is_terminal} == {S.FINISHED, S.CANCELED, S.FAILED}


def test_happy_path_of_a_subtask() -> None:
    execution = graph().executions()[0]
    for state in (S.SCHEDULED, S.DEPLOYING, S.INITIALIZING, S.RUNNING, S.FINISHED):
        execution.transition_to(state)
    assert execution.state is S.FINISHED


def test_graph_has_one_execution_per_subtask_with_distinct_attempts() -> None:
    g = graph(2, 3)
    assert [len(v.task_vertices) for v in g.vertices] == [2, 3]
    attempts = {e.attempt_id for e in g.executions()}
    assert len(attempts) == 5
    assert all(g.execution(a) is not None for a in attempts)
    assert g.execution("nope") is None  # type: ignore[arg-type]
    assert [v.name for v in g.producers_of(g.vertices[1].vertex_id)] == ["source"]
    assert [v.name for v in g.consumers_of(g.vertices[0].vertex_id)] == ["window"]
    assert g.vertices[1].task_vertices[2].task_name == "window (3/3)"


def test_job_status_is_final_once_terminal() -> None:
    g = graph()
    g.transition_job(JobStatus.RUNNING)
    g.transition_job(JobStatus.FINISHED)
    with pytest.raises(IllegalJobStatusTransitionError, match="FINISHED -> FAILED"):
        g.transition_job(JobStatus.FAILED)
    assert g.status is JobStatus.FINISHED


@pytest.mark.parametrize(
    ("path", "illegal"),
    [
        ((), JobStatus.FINISHED),  # CREATED cannot finish without running
        ((JobStatus.RUNNING, JobStatus.FAILING), JobStatus.RUNNING),  # no way back from failing
        ((JobStatus.RUNNING, JobStatus.CANCELLING), JobStatus.FAILED),
        ((JobStatus.RUNNING, JobStatus.RESTARTING), JobStatus.FINISHED),
        ((JobStatus.RUNNING, JobStatus.FAILING, JobStatus.FAILED), JobStatus.RESTARTING),
    ],
)
def test_the_job_status_moves_only_along_its_transition_table(path, illegal) -> None:
    g = graph()
    for status in path:
        g.transition_job(status)
    with pytest.raises(IllegalJobStatusTransitionError):
        g.transition_job(illegal)


def test_every_status_but_the_terminal_ones_can_end() -> None:
    for status in JobStatus:
        ends = [
            t for t in JobStatus if t.is_globally_terminal and is_legal_job_transition(status, t)
        ]
        reachable = {t for t in JobStatus if is_legal_job_transition(status, t)}
        assert status.is_globally_terminal == (not reachable), status
        assert status.is_globally_terminal or ends or JobStatus.CANCELLING in reachable, status


def test_all_finished_needs_every_execution_finished() -> None:
    g = graph(1, 1)
    first, second = g.executions()
    for e in (first, second):
        for state in (S.SCHEDULED, S.DEPLOYING, S.RUNNING):
            e.transition_to(state)
    first.transition_to(S.FINISHED)
    assert not g.all_finished()
    second.transition_to(S.FINISHED)
    assert g.all_finished()


def test_running_execution_refuses_attempts_ended_or_of_a_former_run() -> None:
    g = graph(1, 1)
    first = g.executions()[0]
    assert g.running_execution(first.attempt_id) is first
    first.transition_to(S.FAILED)
    with pytest.raises(ExecutionGraphError, match="it ended FAILED"):
        g.running_execution(first.attempt_id)
    g.reset_for_restart()
    with pytest.raises(ExecutionGraphError, match="not of the job's run"):
        g.running_execution(first.attempt_id)
    assert g.running_execution(g.executions()[0].attempt_id) is g.executions()[0]


def test_a_job_given_up_ends_canceled_after_cancelling_else_failed() -> None:
    assert JobStatus.CANCELLING.ends_as is JobStatus.CANCELED
    assert {s.ends_as for s in JobStatus if s is not JobStatus.CANCELLING} == {JobStatus.FAILED}


def test_the_history_dates_every_state_counts_attempts_and_keeps_the_last_failures() -> None:
    source = JobVertex("source", 1, "m:Source", is_source=True)
    clock = ManualClock(start=1_000.0)  # wall clock 1000 s
    history_graph = ExecutionGraph(JobGraph("job", [source], []), clock)
    history = history_graph.history
    history_graph.transition_job(JobStatus.RUNNING)
    for _ in range(EXCEPTION_HISTORY_SIZE + 1):
        [vertex] = history_graph.vertices[0].task_vertices
        execution = vertex.current_execution
        clock.advance(1.0)
        execution.transition_to(S.SCHEDULED)
        clock.advance(0.5)
        execution.transition_to(S.FAILED)
        history_graph.reset_subtask(vertex)
    assert history.job_timestamps == {JobStatus.CREATED: 1_000_000, JobStatus.RUNNING: 1_000_000}
    first_failed = 1_000_000 + 1_500
    assert execution.timestamps == {
        S.CREATED: first_failed + 1_500 * (EXCEPTION_HISTORY_SIZE - 1),
        S.SCHEDULED: first_failed + 1_500 * EXCEPTION_HISTORY_SIZE - 500,
        S.FAILED: first_failed + 1_500 * EXCEPTION_HISTORY_SIZE,
    }
    assert history_graph.vertices[0].task_vertices[0].current_execution.attempt_number == (
        EXCEPTION_HISTORY_SIZE + 1
    )
    assert len(history.failed) == EXCEPTION_HISTORY_SIZE and history.dropped == 1
    assert history.failed[-1] is execution and history.failed[0].attempt_number == 1
