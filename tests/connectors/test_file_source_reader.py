"""FileSourceReader: how queued file splits become bundles, in STREAMING and in BATCH mode."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from millrace.api.connector.source import WHOLE_INPUT, SourceReaderContext
from millrace.config import Configuration
from millrace.connectors.file_formats import FileFormat
from millrace.connectors.file_source_reader import FileSourceReader
from millrace.runtime.io.input_split import InputSplit

pytestmark = [pytest.mark.slow, pytest.mark.spark]


def text_files(directory: Path, lines: list[list[str]]) -> list[InputSplit]:
    """One text file per entry of ``lines``, as splits of unknown size (text has no footer)."""
    splits = []
    for number, content in enumerate(lines):
        path = directory / f"part-{number}.txt"
        path.write_text("".join(f"{line}\n" for line in content))
        splits.append(InputSplit(number, str(path)))
    return splits


def reader(spark: Any, max_records: int) -> FileSourceReader:
    context = SourceReaderContext(0, 1, max_records, 0.01, Configuration(), spark)
    return FileSourceReader(FileFormat("text"), context)


def drain(source: FileSourceReader) -> list[Any]:
    bundles = []
    while not source.is_finished():
        bundle = source.poll(0.01)
        assert bundle is not None
        bundles.append(bundle)
    return bundles


def test_a_text_file_of_unknown_size_is_a_bundle_alone_in_streaming(spark, tmp_path) -> None:
    source = reader(spark, 1000)
    for split in text_files(tmp_path, [["a b"], ["c"], ["d", "e"]]):
        source.add_split(split, 0)
    bundles = drain(source)
    assert [[s.split.split_number for s in b.progress] for b in bundles] == [[0], [1], [2]]


def test_batch_reads_every_queued_file_with_one_scan(spark, tmp_path) -> None:
    source = reader(spark, WHOLE_INPUT)
    for split in text_files(tmp_path, [["a b"], ["c"], ["d", "e"]]):
        source.add_split(split, 0)
    [bundle] = drain(source)
    assert [s.split.split_number for s in bundle.progress] == [0, 1, 2]
    assert all(s.finished for s in bundle.progress)
    assert sorted(r.value for r in bundle.frame.collect()) == ["a b", "c", "d", "e"]
    plan = bundle.frame._jdf.queryExecution().executedPlan().toString()
    assert plan.count("FileScan") == 1, plan  # one scan of three files, not a union of three
