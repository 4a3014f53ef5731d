"""The metric names and labels of the Grafana dashboards in tests/data (see that file)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

DASHBOARD_FILE = Path(__file__).parent / "data" / "grafana_flink_dashboard_metrics.txt"


@dataclass(frozen=True)
class DashboardMetric:
    name: str
    labels: tuple[str, ...]
    provided: bool
    why_missing: str


def dashboard_metrics() -> list[DashboardMetric]:
    """Every metric the dashboards' panels use, in file order."""
    found = []
    for line in DASHBOARD_FILE.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        entry, _, why = line.partition("#")
        status, name, labels = entry.split()
        found.append(DashboardMetric(name, tuple(labels.split(",")), status == "provided", why))
    return found
