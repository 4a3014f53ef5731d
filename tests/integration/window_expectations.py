"""Sliding and session windows computed in pandas, for the end-to-end tests of
``examples/sliding_delays.py`` and ``examples/sessions.py`` and their variants."""

from __future__ import annotations

import numpy as np
import pandas as pd


def sliding_windows(
    frame: pd.DataFrame, time: str, size: pd.Timedelta, slide: pd.Timedelta
) -> pd.DataFrame:
    """One row per record and window holding it: windows of ``size`` starting every ``slide``
    from the epoch (adds ``window_start`` and ``window_end``)."""
    latest = frame[time].dt.floor(slide)
    parts = []
    for k in range(-(-size // slide)):
        part = frame.copy()
        part["window_start"] = latest - k * slide
        parts.append(part[part["window_start"] > part[time] - size])
    out = pd.concat(parts, ignore_index=True)
    out["window_end"] = out["window_start"] + size
    return out


def session_windows(frame: pd.DataFrame, key: str, time: str, gap: pd.Timedelta) -> pd.DataFrame:
    """Each record with its session (adds ``window_start`` and ``window_end``): a key's
    records at most ``gap`` after the previous one share a session ``[first, last + gap)``."""
    out = frame.sort_values([key, time], kind="stable").reset_index(drop=True)
    previous = out.groupby(key)[time].shift()
    out["__session"] = (previous.isna() | (out[time] - previous > gap)).cumsum()
    bounds = out.groupby("__session")[time]
    out["window_start"] = bounds.transform("min")
    out["window_end"] = bounds.transform("max") + gap
    return out.drop(columns="__session")


def expected_sliding_delays(flights: pd.DataFrame) -> pd.DataFrame:
    """``examples/sliding_delays.py`` in pandas."""
    departed = flights[flights["dep_delay"].notna()]
    windows = sliding_windows(departed, "time_hour", pd.Timedelta(days=1), pd.Timedelta(hours=6))
    return _sorted(
        windows.groupby(["origin", "window_start", "window_end"], as_index=False).agg(
            flights=("dep_delay", "size"), avg_dep_delay=("dep_delay", "mean")
        ),
        "origin",
    )


def expected_sessions(flights: pd.DataFrame, gap: pd.Timedelta) -> pd.DataFrame:
    """``examples/sessions.py`` in pandas."""
    planes = flights[flights["tailnum"].notna()]
    windows = session_windows(planes, "tailnum", "time_hour", gap)
    return _sorted(
        windows.groupby(["tailnum", "window_start", "window_end"], as_index=False).agg(
            flights=("time_hour", "size"),
            first_departure=("time_hour", "min"),
            last_departure=("time_hour", "max"),
            destinations=("dest", "nunique"),
        ),
        "tailnum",
    )


def _sorted(frame: pd.DataFrame, key: str) -> pd.DataFrame:
    for column in frame.columns:
        if isinstance(frame[column].dtype, pd.DatetimeTZDtype):
            frame[column] = frame[column].astype("datetime64[us, UTC]")
    return frame.sort_values([key, "window_start", "window_end"], ignore_index=True)


def normalized(frame: pd.DataFrame, key: str) -> pd.DataFrame:
    """Output rows in a comparable form: timestamps in UTC microseconds, sorted."""
    return _sorted(frame.copy(), key)


def assert_rows_equal(actual: pd.DataFrame, expected: pd.DataFrame, key: str) -> None:
    """Same rows, row for row (after sorting by key and window): floats within 1e-9,
    everything else exact."""
    actual, expected = normalized(actual, key), normalized(expected, key)
    assert list(actual.columns) == list(expected.columns)
    assert len(actual) == len(expected), f"{len(actual)} rows, {len(expected)} expected"
    for column in actual.columns:
        mine, theirs = actual[column].to_numpy(), expected[column].to_numpy()
        if pd.api.types.is_float_dtype(expected[column]):
            assert np.nanmax(np.abs(mine.astype(float) - theirs.astype(float))) <= 1e-9, column
        else:
            assert (mine == theirs).all(), (
                column,
                actual[mine != theirs].head(),
                expected[mine != theirs].head(),
            )
