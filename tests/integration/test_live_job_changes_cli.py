"""``millrace rescale`` and ``millrace modify`` as a user runs them, against a standalone
cluster running the unbounded flight-delays job over a directory: each prints the downtime, a
refusal exits 1 with the reason, and the output stays exact (each window once, pandas' values).
"""

from __future__ import annotations

import re

import pytest

from tests.integration.directory_job import directory_job
from tests.integration.helpers import expected_flight_delays, read_flights, run_cli
from tests.integration.streams import arrive, committed
from tests.rows import assert_same_rows

pytestmark = [pytest.mark.slow, pytest.mark.spark]

SETTINGS = {
    "execution.checkpointing.interval": "500 ms",
    "source.discovery-interval": "200 ms",
    "rpc.ask-timeout": "20 s",
}
DEPARTED = """
from pyspark.sql import functions as F


def departed(df):
    return df.where(F.col("dep_delay").isNotNull())
"""


def test_rescale_and_modify_from_the_command_line(spark, flights_dir, tmp_path) -> None:
    function_file = tmp_path / "departed.py"
    function_file.write_text(DEPARTED)
    with directory_job(spark, flights_dir, tmp_path, "live-cli", SETTINGS) as (cluster, job_id):
        options = ["--jobmanager", cluster.jobmanager, "-D", f"io.tmp.dirs={tmp_path / 'tmp'}"]
        out = tmp_path / "out"
        cluster.wait_until(lambda: len(committed(out)) > 0, what="January's first windows")

        rescaled = run_cli(["rescale", job_id[:8], "--parallelism", "1", *options], tmp_path, 300)
        assert rescaled.returncode == 0, rescaled.stdout + rescaled.stderr
        print(rescaled.stdout)
        assert "rescale every vertex to parallelism 1" in rescaled.stdout
        assert re.search(r"downtime \d+ ms", rescaled.stdout)

        refused = run_cli(
            ["modify", job_id[:8], "--replace", f"nope={function_file}:departed", *options],
            tmp_path,
            120,
        )
        assert refused.returncode == 1 and "no transform named 'nope'" in refused.stdout

        arrive(flights_dir, tmp_path / "inbox", 2)
        modified = run_cli(
            ["modify", job_id[:8], "--replace", f"transform={function_file}:departed", *options],
            tmp_path,
            300,
        )
        assert modified.returncode == 0, modified.stdout + modified.stderr
        print(modified.stdout)
        assert "replace transform 'transform'" in modified.stdout
        arrive(flights_dir, tmp_path / "inbox", 3)
        expected = expected_flight_delays(read_flights(flights_dir))
        february = expected[expected["window_start"] < "2013-03-01"]
        cluster.wait_until(
            lambda: len(committed(out)) >= len(february), timeout=300, what="February's windows"
        )
        assert cluster.job(job_id)["state"] == "RUNNING"

    output = committed(out)
    assert_same_rows(output[output["window_start"] < "2013-03-01"], february)  # each once
    march = output[output["window_start"] >= "2013-03-01"]  # as far as the stop let it come
    assert not march.duplicated(["carrier", "window_start"]).any()
    assert_same_rows(march, expected.merge(march[["carrier", "window_start"]]))
