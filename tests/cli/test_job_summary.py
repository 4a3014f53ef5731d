"""The summary ``millrace run`` prints: each vertex's busy, idle and back-pressured shares."""

from __future__ import annotations

from rich.console import Console

from millrace.cli.job_summary import time_shares
from millrace.runtime.executiongraph import IOMetrics


def test_the_shares_of_a_vertexs_running_time() -> None:
    metrics = IOMetrics(records_in=10, busy_ms=580, idle_ms=400, backpressured_ms=20)
    assert time_shares(metrics) == "; busy 58%, idle 40%, back-pressured 2%"


def test_a_vertex_never_back_pressured_shows_0_percent_not_minus_0() -> None:
    assert time_shares(IOMetrics(busy_ms=1000, idle_ms=0)).endswith("back-pressured 0%")
    assert time_shares(IOMetrics(busy_ms=2, idle_ms=9)).endswith("back-pressured 0%")  # was -0%


def test_a_vertex_never_measured_shows_no_shares() -> None:
    assert time_shares(IOMetrics(records_in=10)) == ""


def test_the_shares_print_as_text() -> None:
    console = Console(record=True, width=200)
    console.print("records in 10" + time_shares(IOMetrics(busy_ms=1, idle_ms=3)), highlight=False)
    assert "busy 25%, idle 75%, back-pressured 0%" in console.export_text()
