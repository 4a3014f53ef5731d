"""A text source chained straight into a sink (no exchange): every line arrives once."""

from __future__ import annotations

import pandas as pd
import pytest

from millrace import Configuration, FileSource, ParquetSink, StreamExecutionEnvironment

pytestmark = [pytest.mark.slow, pytest.mark.spark]


def test_text_lines_pass_through_a_transform_into_parquet(spark, tmp_path) -> None:
    from pyspark.sql import functions as F

    source = tmp_path / "text"
    source.mkdir()
    lines = {f"part-{i}.txt": [f"line {i}-{j} with words" for j in range(500)] for i in range(3)}
    for name, content in lines.items():
        (source / name).write_text("\n".join(content) + "\n")
    (source / "_ignored.txt").write_text("hidden files are not input\n")
    env = StreamExecutionEnvironment(Configuration({"io.tmp.dirs": str(tmp_path / "tmp")}), spark)
    (
        env.from_source(FileSource.text(str(source)))
        .transform(
            lambda df: df.select(
                F.upper("value").alias("line"), F.size(F.split("value", " ")).alias("words")
            )
        )
        .sink_to(ParquetSink(str(tmp_path / "out")))
    )
    result = env.execute("text")

    out = pd.read_parquet(tmp_path / "out")
    expected = sorted(line.upper() for content in lines.values() for line in content)
    assert sorted(out["line"]) == expected
    assert (out["words"] == 4).all()
    (vertex,) = result.accumulators.values()
    assert vertex.records_in == vertex.records_out == 1_500
