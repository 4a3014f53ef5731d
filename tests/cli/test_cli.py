"""``millrace run`` as a user runs it: a separate process, real Spark, exit codes, summary."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.helpers import (
    ROOT,
    assert_same_result,
    expected_flight_delays,
    read_flights,
    read_output,
    run_cli,
)


def test_bad_configuration_exits_2_naming_the_key(tmp_path) -> None:
    result = run_cli(
        ["run", str(ROOT / "examples" / "flight_delays.py"), "-D", "parallelism.default=0"],
        cwd=tmp_path,
        timeout=120,
    )
    assert result.returncode == 2
    assert "parallelism.default" in result.stdout and ">= 1" in result.stdout


def test_unknown_key_exits_2_with_a_suggestion(tmp_path) -> None:
    result = run_cli(
        ["run", str(ROOT / "examples" / "flight_delays.py"), "-D", "paralelism.default=3"],
        cwd=tmp_path,
        timeout=120,
    )
    assert result.returncode == 2
    assert "did you mean 'parallelism.default'" in result.stdout


@pytest.mark.slow
@pytest.mark.spark
def test_run_writes_the_output_prints_the_summary_and_exits_0(flights_dir, tmp_path) -> None:
    out = tmp_path / "out"
    result = run_cli(
        [
            "run",
            str(ROOT / "examples" / "flight_delays.py"),
            str(flights_dir),
            str(out),
            "-D",
            f"io.tmp.dirs={tmp_path / 'tmp'}",
        ],
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "rows written: 5,430" in result.stdout  # a second check of the number above
    assert "336,776" in result.stdout  # records in of the source vertex
    assert "wall time" in result.stdout and "Spark start" in result.stdout
    expected = expected_flight_delays(read_flights(flights_dir))
    assert_same_result(read_output(out), expected)  # the oracle: pandas on the same files
    assert f"rows written: {len(expected):,}" in result.stdout
    assert not result.leftover, "a process (Spark's JVM?) outlived millrace"


@pytest.mark.slow
@pytest.mark.spark
def test_failing_job_exits_1_with_the_root_cause(flights_dir, tmp_path) -> None:
    script = tmp_path / "broken.py"
    script.write_text(
        "from pyspark.sql import functions as F\n"
        "from millrace import FileSource, ParquetSink, StreamExecutionEnvironment, tumbling\n"
        "env = StreamExecutionEnvironment.get_execution_environment()\n"
        f"(env.from_source(FileSource.parquet({str(flights_dir)!r}), event_time='time_hour')\n"
        " .transform(lambda df: df.withColumn('x', F.col('missing_column')))\n"
        " .key_by('carrier').window(tumbling('1 day')).agg(F.count('*').alias('n'))\n"
        f" .sink_to(ParquetSink({str(tmp_path / 'out')!r})))\n"
        "env.execute('broken')\n"
    )
    result = run_cli(["run", str(script), "-D", f"io.tmp.dirs={tmp_path / 'tmp'}"], cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "job failed" in result.stdout
    assert "missing_column" in result.stdout
    assert not list(Path(tmp_path / "out").glob("part-*"))
    assert not result.leftover


@pytest.mark.slow
@pytest.mark.spark
def test_a_pipeline_that_cannot_run_fails_before_the_cluster_starts(tmp_path) -> None:
    """Issue 11: a window over a text file (no event time) is refused when the script
    executes, before any endpoint or TaskManager of the embedded cluster starts."""
    script = tmp_path / "no_event_time.py"
    script.write_text(
        "from pyspark.sql import functions as F\n"
        "from millrace import FileSource, ParquetSink, StreamExecutionEnvironment, tumbling\n"
        "env = StreamExecutionEnvironment.get_execution_environment()\n"
        "(env.from_source(FileSource.text('/usr/share/common-licenses'))\n"
        " .key_by('value').window(tumbling('1 h')).agg(F.count('*').alias('n'))\n"
        f" .sink_to(ParquetSink({str(tmp_path / 'out')!r})))\n"
        "env.execute('no-event-time')\n"
    )
    result = run_cli(["run", str(script), "-D", f"io.tmp.dirs={tmp_path / 'tmp'}"], cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "needs event time: pass event_time=" in result.stdout
    assert "Cluster up" not in result.stdout  # refused before the cluster started
    assert not result.leftover
