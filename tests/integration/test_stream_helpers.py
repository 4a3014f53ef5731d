"""The streaming tests' output check (``streams.assert_exactly``) fails whenever the committed
rows are not exactly the wanted rows as a multiset: a window committed twice while another is
missing, a wrong count or average, a missing column; it passes on the same rows in any order
and column order. The exactly-once modules (directory and Kafka streams, Kafka idleness,
checkpoint failures, live job changes) rely on it. No Spark: pandas frames only."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from tests.integration.helpers import expected_flight_delays
from tests.integration.streams import assert_exactly

SINK_COLUMNS = ["carrier", "window_start", "window_end", "flights", "avg_dep_delay"]


@pytest.fixture
def wanted() -> pd.DataFrame:
    """The pandas answer over a few flights: two carriers, three UTC days, a cancelled one."""
    hours = pd.to_datetime(
        ["2013-01-01 05:00", "2013-01-01 23:00", "2013-01-02 01:00", "2013-01-03 12:00"] * 2,
        utc=True,
    )
    flights = pd.DataFrame(
        {
            "carrier": ["AA"] * 4 + ["B6"] * 4,
            "time_hour": hours,
            "dep_delay": [1.0, 2.5, -3.0, np.nan, 10.0, 1 / 3, 7.0, 0.1],
        }
    )
    return expected_flight_delays(flights)


def committed_as_the_sink_writes(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` in the sink's column order, in another row order, with a fresh index."""
    return rows[SINK_COLUMNS].iloc[::-1].reset_index(drop=True)


def test_the_same_rows_in_any_order_pass(wanted: pd.DataFrame) -> None:
    assert len(wanted) == 5
    assert_exactly(committed_as_the_sink_writes(wanted), wanted)
    assert_exactly(wanted.iloc[0:0], wanted.iloc[0:0])
    tagged = committed_as_the_sink_writes(wanted).assign(versions=1)  # not wanted: not compared
    assert_exactly(tagged, wanted)


def test_a_duplicated_window_and_a_missing_one_fail(wanted: pd.DataFrame) -> None:
    """Equal lengths, every committed (carrier, window) wanted: one at-least-once replay of
    a window plus one lost window. A join on the key with a length check passes this."""
    actual = pd.concat([wanted.iloc[[0, 0]], wanted.iloc[2:]], ignore_index=True)
    assert len(actual) == len(wanted)
    with pytest.raises(AssertionError) as failure:
        assert_exactly(committed_as_the_sink_writes(actual), wanted)
    message = str(failure.value)
    surplus, missing = re.split(r"\n\s*missing", message)
    assert "surplus (1 rows" in surplus and "Timestamp('2013-01-01 00:00:00+0000'" in surplus
    assert "2013-01-02 00:00:00+0000" in missing.split("\n")[0]  # AA's second day


def test_a_wrong_count_fails(wanted: pd.DataFrame) -> None:
    actual = wanted.copy()
    actual.loc[3, "flights"] += 1
    with pytest.raises(AssertionError, match=re.escape("surplus (1 rows")):
        assert_exactly(committed_as_the_sink_writes(actual), wanted)


def test_an_average_off_by_more_than_the_tolerance_fails(wanted: pd.DataFrame) -> None:
    near, far = wanted.copy(), wanted.copy()
    near.loc[4, "avg_dep_delay"] += 1e-12  # another summation order
    far.loc[4, "avg_dep_delay"] += 1e-6
    assert_exactly(committed_as_the_sink_writes(near), wanted)
    with pytest.raises(AssertionError, match="avg_dep_delay off by more than 1e-09"):
        assert_exactly(committed_as_the_sink_writes(far), wanted)


def test_a_missing_column_or_no_output_fails(wanted: pd.DataFrame) -> None:
    with pytest.raises(AssertionError, match=re.escape("columns ['window_end'] missing")):
        assert_exactly(committed_as_the_sink_writes(wanted).drop(columns="window_end"), wanted)
    nothing = pd.DataFrame(columns=["carrier", "window_start"])  # ``committed`` of no file
    with pytest.raises(AssertionError, match=re.escape("missing (5 rows")):
        assert_exactly(nothing, wanted)
