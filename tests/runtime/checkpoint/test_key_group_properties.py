"""Properties of key groups (Flink's KeyGroupRangeAssignment), for any parallelism up to the
max parallelism: the subtasks' ranges partition the key groups, and the subtask the exchange
routes a key group to (``key_group * p // max_p``) is the one whose range holds it."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from millrace.runtime.checkpoint.key_groups import KeyGroupRange, key_group_range


@st.composite
def max_and_parallelism(draw: st.DrawFn) -> tuple[int, int]:
    max_parallelism = draw(st.integers(1, 32_768))
    return max_parallelism, draw(st.integers(1, min(max_parallelism, 512)))


@given(max_and_parallelism())
def test_every_key_group_is_owned_by_exactly_one_subtask(sizes: tuple[int, int]) -> None:
    max_parallelism, parallelism = sizes
    ranges = [key_group_range(max_parallelism, parallelism, i) for i in range(parallelism)]
    assert ranges[0].start == 0 and ranges[-1].end == max_parallelism - 1
    for before, after in itertools.pairwise(ranges):
        assert after.start == before.end + 1  # contiguous, no gap, no overlap
    sizes_of = [r.end - r.start + 1 for r in ranges]
    assert min(sizes_of) >= 1 and max(sizes_of) - min(sizes_of) <= 1  # as even as it gets


@given(max_and_parallelism(), st.data())
def test_the_exchange_routes_each_key_group_to_its_owner(
    sizes: tuple[int, int], data: st.DataObject
) -> None:
    max_parallelism, parallelism = sizes
    key_group = data.draw(st.integers(0, max_parallelism - 1))
    target = key_group * parallelism // max_parallelism  # spark/windowing.target_subtask
    assert key_group in key_group_range(max_parallelism, parallelism, target)


@given(st.integers(1, 4096), st.integers(1, 64), st.integers(1, 64))
def test_rescaling_hands_each_key_group_to_one_new_subtask(
    max_parallelism: int, old_parallelism: int, new_parallelism: int
) -> None:
    old = (max_parallelism, min(old_parallelism, max_parallelism))
    new_parallelism = min(new_parallelism, max_parallelism)
    for i in range(old[1]):
        mine = key_group_range(max_parallelism, old[1], i)
        heirs = [
            j
            for j in range(new_parallelism)
            if key_group_range(max_parallelism, new_parallelism, j).intersects(mine)
        ]
        covered = [
            g
            for j in heirs
            for g in range(mine.start, mine.end + 1)
            if g in key_group_range(max_parallelism, new_parallelism, j)
        ]
        assert sorted(covered) == list(range(mine.start, mine.end + 1))


@given(st.integers(1, 1000), st.integers(-5, 1500), st.integers(-5, 1500))
def test_out_of_range_subtasks_are_refused(max_parallelism: int, p: int, i: int) -> None:
    if 1 <= p <= max_parallelism and 0 <= i < p:
        assert isinstance(key_group_range(max_parallelism, p, i), KeyGroupRange)
    else:
        with pytest.raises(ValueError, match="out of range"):
            key_group_range(max_parallelism, p, i)
