"""Word count over ~40 MB of text: Millrace on the embedded cluster vs plain PySpark batch.

The text is generated once with a fixed seed (``data/word_count_text/``, 8 files): words drawn
with Zipf weights from the vocabulary of Debian's license texts (/usr/share/common-licenses),
10 words a line. One invocation, one SparkSession, same files and machine. Each contender runs
once to warm the JVM, then ``--runs`` times alternately; the script prints the median wall time
of each and the ratio Millrace / peer. Millrace's time is ``env.execute`` of
``examples/word_count.py`` (cluster start, scheduling, every Spark job, commit, cluster stop)
in each runtime mode the build has; the peer's is read text -> split -> explode ->
groupBy(word).count() -> write Parquet. Shuffle partitions: the best setting of each
(``bench/batch_contest.py``). A third contender, the *staged floor*, runs the job stage by stage
as Millrace BATCH does but in plain PySpark with no runtime (``bench/staged_floor.py``): what
Millrace costs above it is the runtime's, what it costs above the peer is the design's.

Usage: ``.venv/bin/python bench/word_count.py [--runs 5] [--parallelism 2] [--megabytes 40]``
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import random
import re
import shutil
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LICENSES = Path("/usr/share/common-licenses")
FILES = 8
WORDS_PER_LINE = 10


def generate_text(directory: Path, megabytes: int, seed: int = 11) -> int:
    """Write the corpus (idempotent: a ``.complete`` marker names its size); returns bytes."""
    marker = directory / ".complete"
    if marker.exists() and marker.read_text() == f"{megabytes} MB seed {seed}":
        return sum(p.stat().st_size for p in directory.glob("part-*.txt"))
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    text = " ".join(p.read_text(encoding="utf-8") for p in sorted(LICENSES.glob("[A-Z]*")))
    vocabulary = sorted({w for w in re.split(r"[^a-z0-9]+", text.lower()) if w})
    rng = random.Random(seed)
    rng.shuffle(vocabulary)
    cumulative = list(itertools.accumulate(1 / (rank + 1) for rank in range(len(vocabulary))))
    per_file = megabytes * 1_000_000 // FILES
    for index in range(FILES):
        with open(directory / f"part-{index:02d}.txt", "w", encoding="utf-8") as out:
            written = 0
            while written < per_file:
                words = rng.choices(vocabulary, cum_weights=cumulative, k=WORDS_PER_LINE * 1000)
                lines = "\n".join(
                    " ".join(words[i : i + WORDS_PER_LINE])
                    for i in range(0, len(words), WORDS_PER_LINE)
                )
                written += out.write(lines + "\n")
    marker.write_text(f"{megabytes} MB seed {seed}")
    return sum(p.stat().st_size for p in directory.glob("part-*.txt"))


def runtime_modes() -> list[str]:
    """The runtime modes this build knows (``execution.runtime-mode``), STREAMING at least."""
    from millrace.config import all_options

    for option in all_options():
        if option.key == "execution.runtime-mode":
            return ["STREAMING", "BATCH"]
    return ["STREAMING"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--megabytes", type=int, default=40)
    args = parser.parse_args()

    import pyarrow.parquet as pq
    from batch_contest import compete, report  # bench/ is the script's directory
    from pyspark.sql import functions as F
    from staged_floor import staged_aggregate

    from millrace import Configuration, StreamExecutionEnvironment
    from millrace.spark.spark_session import create_spark_session, stop_spark_session

    spec = importlib.util.spec_from_file_location("wc", ROOT / "examples" / "word_count.py")
    assert spec and spec.loader
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    text = ROOT / "data" / "word_count_text"
    size = generate_text(text, args.megabytes)
    work = Path(tempfile.mkdtemp(prefix="millrace-bench-"))
    settings = {
        "parallelism.default": args.parallelism,
        "io.tmp.dirs": str(work / "tmp"),
    }
    started = time.perf_counter()
    spark = create_spark_session(Configuration(settings), app_name="bench-word-count")
    spark_start = time.perf_counter() - started

    def millrace_run(mode: str) -> float:
        conf = dict(settings)
        if mode != "STREAMING":
            conf["execution.runtime-mode"] = mode
        env = StreamExecutionEnvironment(Configuration(conf), spark)
        example.build(env, str(text), str(work / f"millrace-{mode}"))
        t0 = time.perf_counter()
        env.execute("word-count")
        return time.perf_counter() - t0

    def spark_batch_run() -> float:
        t0 = time.perf_counter()
        (
            example.words(spark.read.text(str(text)))
            .groupBy("word")
            .agg(F.count("*").alias("n"))
            .write.mode("overwrite")
            .parquet(str(work / "spark-out"))
        )
        return time.perf_counter() - t0

    floors = iter(range(1_000_000))

    def staged_floor_run() -> float:
        files = sorted(str(p) for p in text.glob("part-*.txt"))
        out = work / f"floor-{next(floors)}"
        seconds = staged_aggregate(
            spark,
            files,
            spark.read.text,
            example.words,
            ["word"],
            lambda: [F.count(F.lit(1)).alias("c")],
            lambda: [F.sum("c").alias("n")],
            args.parallelism,
            out,
        )
        words = sum(pq.read_metadata(p).num_rows for p in out.glob("out-*.parquet"))
        assert words == distinct, f"the staged floor counted {words} words, not {distinct}"
        return seconds

    millrace = {f"millrace {m.lower()}": (lambda m=m: millrace_run(m)) for m in runtime_modes()}
    spark_batch_run()
    distinct = spark.read.parquet(str(work / "spark-out")).count()
    millrace["staged floor (plain PySpark)"] = staged_floor_run
    times = compete(spark, millrace, spark_batch_run, args.runs)
    counted = spark.read.parquet(str(work / "spark-out")).count()
    stop_spark_session(spark)
    shutil.rmtree(work, ignore_errors=True)
    print(
        f"word count, {size / 1e6:.1f} MB of text ({counted:,} distinct words), parallelism "
        f"{args.parallelism}, {args.runs} runs after warm-up (Spark start {spark_start:.1f} s, "
        "not counted)"
    )
    report(times, size / 1e6, "MB")


if __name__ == "__main__":
    main()
