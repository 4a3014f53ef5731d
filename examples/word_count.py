"""Word count: occurrences of every word of a text, the first job of every stream processor.

Reads text files line by line (a file, or every file of a directory; by default the license
texts every Debian system ships under /usr/share/common-licenses), splits the lines into
lower-case words (runs of letters and digits), and counts each word with a running keyed
aggregate (``key_by("word").agg(...)``, no window, no event time). The input is bounded, so the
job writes one final row per word when it ends.

Run: ``millrace run examples/word_count.py [INPUT [OUTPUT_DIR]]``.
Output columns: word, n (Parquet).
"""

from __future__ import annotations

import sys

from pyspark.sql import functions as F

from millrace import FileSource, ParquetSink, StreamExecutionEnvironment

WORD = "[^a-z0-9]+"  # what separates words, after lower-casing


def words(lines):
    """One row per word of each line (``value``): column ``word``, lower case, never empty."""
    split = F.split(F.lower(F.col("value")), WORD)
    return lines.select(F.explode(split).alias("word")).where(F.col("word") != "")


def build(env: StreamExecutionEnvironment, text: str, output_dir: str) -> None:
    """Add the word-count pipeline to ``env``."""
    (
        env.from_source(FileSource.text(text), name="text")
        .transform(words, name="words")
        .key_by("word")
        .agg(F.count("*").alias("n"))
        .sink_to(ParquetSink(output_dir))
    )


if __name__ == "__main__":
    text = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/common-licenses"
    output_dir = sys.argv[2] if len(sys.argv) > 2 else "out/word_count"
    env = StreamExecutionEnvironment.get_execution_environment()
    build(env, text, output_dir)
    env.execute("word-count")
