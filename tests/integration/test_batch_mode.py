"""BATCH execution (``execution.runtime-mode``): the same job file gives the same rows as in
STREAMING mode and as pandas; each source subtask runs one Spark job and each window subtask
fires once; records that STREAMING finds late land in their windows; checkpointing is ignored;
a job with an unbounded source is refused before anything starts."""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from millrace import (
    Configuration,
    DirectorySource,
    ParquetSink,
    ReplaySource,
    RuntimeExecutionMode,
    StreamExecutionEnvironment,
    tumbling,
)
from millrace.errors import PipelineError
from tests.integration.helpers import (
    assert_same_result,
    expected_flight_delays,
    load_example,
    read_flights,
    read_output,
)
from tests.integration.test_bad_input import (
    BAD_LINES,
    assert_dead_letters_once,
    run_csv_job,
    write_csv,
)
from tests.integration.test_sliding_and_session_windows import committed
from tests.integration.test_word_count_example import python_count
from tests.integration.window_expectations import (
    assert_rows_equal,
    expected_sessions,
    expected_sliding_delays,
)

pytestmark = [pytest.mark.slow, pytest.mark.spark]

flight_delays = load_example("flight_delays")


def environment(spark, tmp_path: Path, parallelism: int, **settings) -> StreamExecutionEnvironment:
    conf = Configuration(
        {
            "parallelism.default": parallelism,
            "io.tmp.dirs": str(tmp_path / "tmp"),
            "pipeline.side-output.dir": str(tmp_path / "side"),
            **settings,
        }
    )
    return StreamExecutionEnvironment(conf, spark)


@pytest.fixture(scope="module")
def expected(flights_dir):
    return expected_flight_delays(read_flights(flights_dir))


@pytest.fixture(scope="module")
def shuffled(flights_dir, tmp_path_factory) -> Path:
    """The months under names whose listing order is not their time order, 2 row groups each."""
    directory = tmp_path_factory.mktemp("shuffled")
    names = ["m", "c", "x", "a", "q", "f", "z", "b", "k", "e", "t", "h"]
    for month, name in zip(range(1, 13), names, strict=True):
        table = pq.read_table(flights_dir / f"flights-2013-{month:02d}.parquet")
        pq.write_table(table, directory / f"{name}-flights.parquet", row_group_size=15_000)
    return directory


@pytest.mark.parametrize("parallelism", [1, 2, 3])
def test_batch_equals_streaming_and_pandas_row_for_row(
    spark, shuffled, tmp_path, expected, parallelism
) -> None:
    results = {}
    for mode in ("STREAMING", "BATCH"):
        env = environment(spark, tmp_path, parallelism).set_runtime_mode(mode)
        flight_delays.build(env, str(shuffled), str(tmp_path / mode))
        results[mode] = env.execute(f"flight-delays-{mode}")

    streaming, batch = read_output(tmp_path / "STREAMING"), read_output(tmp_path / "BATCH")
    assert_same_result(batch, expected)
    assert_same_result(streaming, expected)
    assert batch.equals(streaming)
    source, window = _source_and_keyed(results["BATCH"], parallelism)
    assert source.records_in == 336_776
    assert source.late_records == source.dead_letters == 0
    assert 1 <= source.bundles <= parallelism  # one Spark job per source subtask with input
    assert window.bundles == parallelism  # one firing per window subtask
    assert window.records_out == len(expected)
    assert results["BATCH"].details.checkpoints == 1  # the final one: the commit at the end


def test_records_late_in_streaming_land_in_their_windows_in_batch(
    spark, flights_dir, tmp_path, expected
) -> None:
    """A replay with up to 3 days of disorder and no allowed out-of-orderness: STREAMING sets
    late records aside; BATCH has no late records and equals pandas over every flight.

    Records are judged against the watermark of the bundles before theirs, so lateness needs a
    bundle boundary; where boundaries fall depends on the first bundle's size (time-driven).
    With 3 days of disorder every boundary is followed by records of days already closed, so
    STREAMING finds late records wherever the boundaries fall (6 h needed a boundary within
    6 h after midnight: it once found none under load)."""

    def build(env: StreamExecutionEnvironment, out: Path) -> None:
        source = ReplaySource(
            str(flights_dir),
            order_by="time_hour",
            rate=5_000_000,
            stripes=2,
            max_disorder_ms=3 * 24 * 3_600_000,
            seed=7,
            columns=("carrier", "time_hour", "dep_delay"),
        )
        (
            env.from_source(source, event_time="time_hour", name="replay")
            .transform(flight_delays.departed, name="departed")
            .key_by("carrier")
            .window(tumbling("1 day"))
            .agg(F.count("*").alias("flights"), F.avg("dep_delay").alias("avg_dep_delay"))
            .sink_to(ParquetSink(str(out)))
        )

    late = {}
    for mode in ("STREAMING", "BATCH"):
        env = environment(spark, tmp_path, 2, **{"execution.bundle.max-records": 20_000})
        env.set_runtime_mode(RuntimeExecutionMode[mode])
        build(env, tmp_path / mode)
        source, _ = env.execute(f"late-{mode}").accumulators.values()
        late[mode] = source.late_records
    assert late["STREAMING"] > 0, "the replay should make STREAMING find late records"
    assert late["BATCH"] == 0
    assert_same_result(read_output(tmp_path / "BATCH"), expected)
    assert not list((tmp_path / "side" / "late-BATCH" / "late").glob("part-*"))


def test_automatic_is_batch_for_bounded_sources_and_ignores_checkpointing(
    spark, flights_dir, tmp_path, expected, caplog
) -> None:
    env = environment(spark, tmp_path, 2, **{"execution.runtime-mode": "AUTOMATIC"})
    env.enable_checkpointing(50)
    flight_delays.build(env, str(flights_dir), str(tmp_path / "out"))
    graph = env.get_job_graph("flight-delays-automatic")
    assert graph.configuration["execution.runtime-mode"] == "BATCH"
    assert graph.vertices[0].invokable.endswith("BatchSourceTask")
    with caplog.at_level(logging.INFO, logger="millrace"):
        result = env.execute("flight-delays-automatic")
    assert result.details.checkpoints == 1  # no periodic one: only the final commit
    assert "execution.checkpointing.interval is ignored in BATCH mode" in caplog.text
    assert_same_result(read_output(tmp_path / "out"), expected)


def test_batch_with_an_unbounded_source_fails_before_anything_starts(spark, tmp_path) -> None:
    (tmp_path / "inbox").mkdir()
    env = environment(spark, tmp_path, 2).set_runtime_mode("BATCH")
    inbox = env.from_source(DirectorySource.parquet(str(tmp_path / "inbox")), name="inbox")
    inbox.sink_to(ParquetSink(str(tmp_path / "out")))
    with pytest.raises(PipelineError, match="'inbox' is unbounded: run the job in STREAMING"):
        env.execute("unbounded-batch")
    assert not (tmp_path / "tmp").exists(), "nothing may start for a pipeline that cannot run"


@pytest.mark.parametrize("parallelism", [1, 2, 3])
def test_word_count_in_batch_emits_one_final_row_per_word_from_one_aggregation(
    spark, tmp_path, parallelism
) -> None:
    """examples/word_count.py (a running keyed aggregate) in BATCH: each keyed subtask
    aggregates once; one final row per word, equal to Python's count and to STREAMING's."""
    word_count = load_example("word_count")
    licenses = Path("/usr/share/common-licenses")
    outputs, results = {}, {}
    for mode in ("STREAMING", "BATCH"):
        env = environment(spark, tmp_path, parallelism).set_runtime_mode(mode)
        word_count.build(env, str(licenses), str(tmp_path / mode))
        results[mode] = env.execute(f"word-count-{mode}")
        outputs[mode] = read_output(tmp_path / mode, order=("word",))

    batch = outputs["BATCH"]
    assert batch["word"].is_unique
    assert dict(zip(batch["word"], batch["n"], strict=True)) == python_count(licenses)
    assert batch.equals(outputs["STREAMING"])
    _, keyed = _source_and_keyed(results["BATCH"], parallelism)
    assert keyed.bundles == parallelism  # one aggregation per keyed subtask, at the end
    assert keyed.records_out == len(batch)


def test_malformed_csv_rows_become_dead_letters_in_batch(spark, flights_dir, tmp_path) -> None:
    """Two CSV files (of unknown size: two bundles of the reader, unioned into one plan) with
    malformed lines, at parallelism 1: the good rows equal pandas, every bad line is a dead
    letter once, as in STREAMING."""
    good = write_csv(flights_dir, tmp_path / "csv")
    settings = {"execution.runtime-mode": "BATCH", "parallelism.default": 1}
    result = run_csv_job(spark, tmp_path, "csv-flights-batch", settings)

    source, _ = _source_and_keyed(result, 1)
    assert source.bundles == 1  # both files in one Spark job
    assert source.records_in == len(good) + len(BAD_LINES)
    assert source.dead_letters == len(BAD_LINES)
    assert_same_result(read_output(tmp_path / "out"), expected_flight_delays(good))
    assert_dead_letters_once(tmp_path / "side" / "csv-flights-batch" / "dead-letters")


@pytest.mark.parametrize("parallelism", [1, 2])
@pytest.mark.parametrize("example", ["sliding_delays", "sessions"])
def test_sliding_and_session_examples_in_batch_equal_pandas(
    spark, shuffled, tmp_path, example, parallelism
) -> None:
    """Sliding windows (a record in several windows) and merging session windows: one firing
    per keyed subtask in BATCH (at parallelism 1 in the source's Spark job), the same rows as
    pandas."""
    module = load_example(example)
    env = environment(spark, tmp_path, parallelism).set_runtime_mode("BATCH")
    module.build(env, str(shuffled), str(tmp_path / "out"))
    result = env.execute(f"{example}-batch")

    flights = read_flights(shuffled)
    if example == "sessions":
        expected, key = expected_sessions(flights, pd.Timedelta(module.GAP)), "tailnum"
    else:
        expected, key = expected_sliding_delays(flights), "origin"
    assert_rows_equal(committed(tmp_path / "out"), expected, key)
    source, window = _source_and_keyed(result, parallelism)
    assert source.late_records == 0 and window.bundles == parallelism


def _source_and_keyed(result, parallelism: int) -> tuple:
    """The source's and the keyed stage's accumulators; at parallelism 1 the keyed stage is
    chained into the source (one vertex, one Spark job: api/keyed_chaining.py)."""
    accumulators = list(result.accumulators.values())
    if parallelism == 1:
        [chained] = accumulators
        assert chained.bundles == 1, "the whole job in one Spark job"
        return chained, chained
    return tuple(accumulators)
