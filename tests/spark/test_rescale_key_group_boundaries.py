"""Rescaling keyed state at the ends of the key-group ranges: state written at one parallelism
and restored at another (StateAssignment, then each subtask reading its key groups from the
restored files) lands, key by key and exactly once, on the subtask that Spark routes that key's
records to at the new parallelism — for keys at both ends of every subtask's key-group range at
parallelism 1, 2, 3 and the max parallelism (Flink's key groups).

The keys are found by hashing candidate strings with the job's own key-group function in Spark
(``windowing.key_group``), one key per key group, so every range end has its key; each old
subtask's state file holds the keys Spark routes to it (``windowing.target_subtask``), as a
keyed task's snapshot does. The oracle is Spark's routing, not the key-group ranges under test.
One Spark query over small frames, in the session's SparkSession.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from millrace.runtime.checkpoint.checkpoint_storage import CheckpointMetadata, VertexState
from millrace.runtime.checkpoint.key_groups import key_group_range
from millrace.runtime.checkpoint.state_assignment import assign_state
from millrace.runtime.checkpoint.task_state_snapshot import KeyedStateHandle, TaskStateSnapshot
from millrace.runtime.jobgraph import JobGraph, JobVertex
from millrace.spark.keyed_state_files import read_key_groups
from millrace.spark.windowing import KEY_GROUP, key_group, target_subtask

pytestmark = [pytest.mark.slow, pytest.mark.spark]

MAX_PARALLELISM = 128
PARALLELISMS = (1, 2, 3, MAX_PARALLELISM)
CANDIDATES = 20_000  # ~156 per key group: every group gets keys


@pytest.fixture(scope="module")
def boundary_keys(spark) -> dict[str, dict[int, int]]:
    """One key per key group (the first candidate hashing to it) -> (parallelism -> the
    subtask Spark routes the key's records to)."""
    frame = spark.range(CANDIDATES).select(F.concat(F.lit("key-"), F.col("id")).alias("key"))
    frame = frame.withColumn(KEY_GROUP, key_group(("key",), MAX_PARALLELISM))
    firsts = frame.groupBy(KEY_GROUP).agg(F.min("key").alias("key"))
    routed = firsts.select(
        "key",
        KEY_GROUP,
        *(
            target_subtask(F.col(KEY_GROUP), MAX_PARALLELISM, p).alias(f"p{p}")
            for p in PARALLELISMS
        ),
    ).collect()
    keys = {row["key"]: {p: row[f"p{p}"] for p in PARALLELISMS} for row in routed}
    groups = {row["key"]: row[KEY_GROUP] for row in routed}
    assert sorted(groups.values()) == list(range(MAX_PARALLELISM)), "a key group has no key"
    # every subtask's range has a key at its start and one at its end, at every parallelism
    for p in PARALLELISMS:
        for i in range(p):
            own = key_group_range(MAX_PARALLELISM, p, i)
            assert {own.start, own.end} <= set(groups.values())
    return {key: {**routes, -1: groups[key]} for key, routes in keys.items()}


def write_state(
    directory: Path, keys: dict[str, dict[int, int]], parallelism: int
) -> CheckpointMetadata:
    """A checkpoint of the keyed vertex at ``parallelism``: each subtask's state file holds a
    row for every key Spark routes to it, and names the subtask's key-group range."""
    directory.mkdir()
    subtasks = {}
    for index in range(parallelism):
        mine = sorted(k for k, routes in keys.items() if routes[parallelism] == index)
        table = pa.table(
            {"key": mine, KEY_GROUP: pa.array([keys[k][-1] for k in mine], pa.int32())}
        )
        path = directory / f"subtask-{index}.parquet"
        pq.write_table(table, path)
        own = key_group_range(MAX_PARALLELISM, parallelism, index)
        handle = KeyedStateHandle(str(path), own.start, own.end, len(mine), path.stat().st_size)
        subtasks[index] = TaskStateSnapshot(keyed_state=(handle,) if mine else ())
    window = VertexState("win", "window", parallelism, subtasks)
    return CheckpointMetadata("job-1", "job", 1, 0, 0, False, MAX_PARALLELISM, [window])


@pytest.mark.parametrize("old", PARALLELISMS)
def test_rescaled_state_lands_where_spark_routes_each_key(
    boundary_keys, tmp_path, old: int
) -> None:
    metadata = write_state(tmp_path / f"p{old}", boundary_keys, old)
    for new in PARALLELISMS:
        window = JobVertex("window", new, "m:Window", (), False, "win")
        assignment = assign_state(metadata, JobGraph("job", [window], [], MAX_PARALLELISM, "job-1"))
        restored: Counter[tuple[str, int]] = Counter()
        for index in range(new):
            own = key_group_range(MAX_PARALLELISM, new, index)
            table = read_key_groups(assignment.tasks[("win", index)], own)
            if table is not None:
                restored.update((key, index) for key in table.column("key").to_pylist())
        expected = Counter((key, routes[new]) for key, routes in boundary_keys.items())
        assert restored == expected, (
            f"{old} -> {new}: missing {sorted(expected - restored)[:5]}, "
            f"extra {sorted(restored - expected)[:5]}"
        )
