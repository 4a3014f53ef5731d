"""Metrics of the cluster's processes: task time accounting, metric groups, the Prometheus
reporter and the MetricQueryService (Flink's metric system, reduced)."""
