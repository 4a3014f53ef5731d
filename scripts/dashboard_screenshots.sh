#!/usr/bin/env bash
# Refreshes docs/images/dashboard-*.png from the dashboard's browser tests on a standalone
# cluster (tests/browser/test_dashboard_on_a_cluster.py; Spark, about a minute), which write
# every screenshot they take to $MILLRACE_DASHBOARD_SCREENSHOTS as dashboard-NAME.png.
# The README shows dashboard-overview.png and dashboard-job.png.
set -euo pipefail
cd "$(dirname "$0")/.."
shots=$(mktemp -d)
trap 'rm -rf "$shots"' EXIT
MILLRACE_DASHBOARD_SCREENSHOTS="$shots" PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" \
  .venv/bin/python -m pytest -q -p no:cacheprovider tests/browser/test_dashboard_on_a_cluster.py
mkdir -p docs/images
for name in overview job; do
  cp "$shots/dashboard-$name.png" "docs/images/dashboard-$name.png"
done
echo "docs/images/dashboard-{overview,job}.png refreshed"
