"""plan_change: what a live change (modify, rescale) does to a JobGraph, and what it refuses."""

from __future__ import annotations

import pytest

from millrace.errors import JobChangeError
from millrace.runtime.jobgraph import (
    DistributionPattern,
    JobEdge,
    JobGraph,
    JobVertex,
    OperatorKind,
    SerializedOperator,
)
from millrace.runtime.jobmaster.job_change import JobChangeRequest, JobChangeResult, plan_change
from millrace.types import JobVertexId


def op(kind: OperatorKind, name: str, payload: bytes = b"old") -> SerializedOperator:
    return SerializedOperator(kind, name, payload)


def graph(*, forward: bool = False, twice: bool = False) -> JobGraph:
    """source (-> tag) --HASH or FORWARD--> window -> sink, at parallelism 2."""
    source = JobVertex(
        "Source -> tag",
        2,
        "m:Source",
        (op(OperatorKind.SOURCE, "Source"), op(OperatorKind.TRANSFORM, "tag")),
        True,
        JobVertexId("src0001"),
    )
    chain = [op(OperatorKind.WINDOW, "window"), op(OperatorKind.SINK, "sink")]
    if twice:
        chain.insert(1, op(OperatorKind.TRANSFORM, "tag"))
    window = JobVertex("window -> sink", 2, "m:Window", tuple(chain), False, JobVertexId("win0001"))
    pattern = DistributionPattern.FORWARD if forward else DistributionPattern.HASH
    return JobGraph(
        "job", [source, window], [JobEdge(source.vertex_id, window.vertex_id, pattern, ("k",))], 8
    )


def test_modify_replaces_the_named_transform_only() -> None:
    job = graph()
    [change] = plan_change(job, JobChangeRequest(transform="tag", payload=b"new"))
    assert change.vertex is job.vertices[0] and change.parallelism == 2
    assert [o.payload for o in change.operators] == [b"old", b"new"]
    assert job.vertices[0].operators[1].payload == b"old"  # planned, not applied
    change.apply()
    assert job.vertices[0].operators[1] == op(OperatorKind.TRANSFORM, "tag", b"new")


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (
            JobChangeRequest(transform="nope", payload=b"x"),
            "no transform named 'nope' (its transforms: 'tag')",
        ),
        (JobChangeRequest(transform="tag"), "no function given"),
        (JobChangeRequest(), "one of them"),
        (JobChangeRequest(transform="tag", payload=b"x", parallelism=2), "one of them"),
        (JobChangeRequest(parallelism=9), "parallelism must be 1 .. 8"),
        (JobChangeRequest(parallelism=-1), "parallelism must be 1 .. 8"),
        (JobChangeRequest(parallelism=2), "already runs at parallelism 2"),
        (JobChangeRequest(parallelism=3, vertex="zzz"), "0 vertices of job 'job' match 'zzz'"),
    ],
)
def test_refusals_say_why(request_: JobChangeRequest, message: str) -> None:
    with pytest.raises(
        JobChangeError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")
    ):
        plan_change(graph(), request_)


def test_two_transforms_of_one_name_are_ambiguous() -> None:
    with pytest.raises(JobChangeError, match="2 transforms named 'tag'"):
        plan_change(graph(twice=True), JobChangeRequest(transform="tag", payload=b"x"))


def test_rescale_sets_every_vertex_or_the_one_named() -> None:
    job = graph()
    every = plan_change(job, JobChangeRequest(parallelism=3))
    assert [(c.vertex.name, c.parallelism) for c in every] == [
        ("Source -> tag", 3),
        ("window -> sink", 3),
    ]
    [one] = plan_change(job, JobChangeRequest(parallelism=1, vertex="window -> sink"))
    assert one.vertex is job.vertices[1] and one.operators == job.vertices[1].operators
    [by_id] = plan_change(job, JobChangeRequest(parallelism=1, vertex="win0"))
    assert by_id.vertex is job.vertices[1]


def test_a_forward_edge_keeps_equal_parallelism() -> None:
    job = graph(forward=True)
    with pytest.raises(JobChangeError, match="joined FORWARD"):
        plan_change(job, JobChangeRequest(parallelism=1, vertex="win0001"))
    assert len(plan_change(job, JobChangeRequest(parallelism=1))) == 2


def test_downtime_runs_from_the_stop_to_every_task_running() -> None:
    result = JobChangeResult("j", "c", "/sp", 7, 1_000, 1_300, 1_500, 1_900)
    assert result.downtime_ms == 600
    assert "to every task RUNNING 600 ms" in result.downtime()
    sources_only = JobChangeResult("j", "c", "/sp", 7, 1_000, 1_300, 1_500, -1)
    assert sources_only.downtime_ms == 200 and "not yet" in sources_only.downtime()


def test_a_rescale_above_one_splits_a_chained_keyed_vertex_into_its_two_vertices() -> None:
    from millrace.runtime.jobmaster.job_change import ChainSplit
    from tests.runtime.checkpoint.test_chained_state import chained_graph
    from tests.runtime.checkpoint.test_checkpoint_state import graph as two_vertices

    job = chained_graph()
    with pytest.raises(JobChangeError, match="already runs at parallelism 1"):
        plan_change(job, JobChangeRequest(parallelism=1))
    split, *changes = plan_change(job, JobChangeRequest(parallelism=3))
    assert isinstance(split, ChainSplit) and len(job.vertices) == 1  # planned, not applied
    for change in (split, *changes):
        change.apply()
    assert [(v.vertex_id, v.name, v.parallelism) for v in job.vertices] == [
        ("src", "source", 3),
        ("win", "window", 3),
    ]
    assert [v.invokable for v in job.vertices] == ["m:Source", "m:Window"]
    assert [(e.source, e.target, e.pattern) for e in job.edges] == [
        ("src", "win", DistributionPattern.HASH)
    ]
    assert [[o.kind for o in v.operators] for v in job.vertices] == [
        [OperatorKind.SOURCE, OperatorKind.SIDE_OUTPUT],
        [OperatorKind.WINDOW, OperatorKind.SINK],
    ]
    assert [v.vertex_id for v in job.vertices] == [v.vertex_id for v in two_vertices(3).vertices]

    only_window = chained_graph()
    for change in plan_change(only_window, JobChangeRequest(parallelism=2, vertex="window")):
        change.apply()
    assert [v.parallelism for v in only_window.vertices] == [1, 2]


def test_a_chain_named_by_its_name_or_id_rescales_both_of_its_vertices() -> None:
    from tests.runtime.checkpoint.test_chained_state import chained_graph

    for selector in ("source -> window", "sr"):
        job = chained_graph()
        for change in plan_change(job, JobChangeRequest(parallelism=2, vertex=selector)):
            change.apply()
        assert [v.parallelism for v in job.vertices] == [2, 2]
    with pytest.raises(JobChangeError, match="0 vertices of job 'job' match 'nope'"):
        plan_change(chained_graph(), JobChangeRequest(parallelism=2, vertex="nope"))
