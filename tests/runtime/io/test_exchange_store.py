"""The exchange store's files through fsspec: a local directory given as a path or as a
``file://`` URL, and fsspec's in-memory filesystem standing for a store that is not a local
directory (names keep their protocol, nothing goes through the local filesystem)."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pytest

from millrace.config import ClusterOptions, Configuration
from millrace.runtime.io import exchange_store


@pytest.fixture(params=["path", "file-url", "memory"])
def store(request, tmp_path) -> Iterator[str]:
    base = {
        "path": str(tmp_path / "store"),
        "file-url": f"file://{tmp_path}/store",
        "memory": f"memory:///exchange-store-test/{tmp_path.name}",
    }[request.param]
    yield base
    exchange_store.remove_tree(base)


def test_a_written_file_reads_back_with_its_rows_and_size(store: str) -> None:
    table = pa.table({"key": ["a", "b", "c"], "n": [1, 2, 3]})
    path = exchange_store.join(store, "job", "exchange", "v1", "a1", "000-000001-to000.parquet")
    size = exchange_store.write_parquet(table, path)
    assert size > 0
    assert exchange_store.read_parquet(path).equals(table)
    assert exchange_store.parquet_rows(path) == 3
    assert exchange_store.parquet_schema(path).names == ["key", "n"]
    # no .tmp left behind
    assert exchange_store.glob(exchange_store.join(store, "job", "exchange", "v1", "a1", "*")) == [
        path
    ]


def test_glob_names_files_as_the_store_names_them_sorted(store: str) -> None:
    table = pa.table({"n": [1]})
    directory = exchange_store.partition_directory(exchange_store.join(store, "job"), "v", "a")
    names = [exchange_store.join(directory, f"00{i}-to001.parquet") for i in (2, 0, 1)]
    for name in names:
        exchange_store.write_parquet(table, name)
    exchange_store.write_parquet(table, exchange_store.join(directory, "000-to002.parquet"))
    pattern = exchange_store.join(store, "job", "exchange", "*", "a", "*-to001.parquet")
    assert exchange_store.glob(pattern) == sorted(names)


def test_an_empty_partition_is_found_by_its_marker(store: str) -> None:
    directory = exchange_store.partition_directory(exchange_store.join(store, "job"), "v", "a")
    marker = exchange_store.join(store, "job", "exchange", "*", "a", "_partition")
    assert exchange_store.glob(marker) == []
    exchange_store.mark_partition(directory)
    assert exchange_store.glob(marker) == [exchange_store.join(directory, "_partition")]


def test_files_and_trees_are_removed_and_removing_twice_is_fine(store: str) -> None:
    job = exchange_store.join(store, "job")
    path = exchange_store.join(job, "state", "v", "a", "w.parquet")
    exchange_store.write_parquet(pa.table({"n": [1]}), path)
    exchange_store.remove_file(path)
    exchange_store.remove_file(path)
    with pytest.raises(FileNotFoundError):
        exchange_store.read_parquet(path)
    exchange_store.write_parquet(pa.table({"n": [1]}), path)
    exchange_store.remove_tree(job)
    exchange_store.remove_tree(job)
    assert exchange_store.glob(exchange_store.join(job, "**")) == []


def test_the_store_defaults_to_the_jobs_directory_of_io_tmp_dirs(tmp_path) -> None:
    conf = Configuration({"io.tmp.dirs": str(tmp_path)})
    assert exchange_store.job_directory(conf, "j1") == str(tmp_path / "jobs" / "j1")
    url = Configuration({"io.exchange.dir": "file:///shared/store"})
    assert exchange_store.job_directory(url, "j1") == "file:///shared/store/j1"


def test_a_relative_directory_is_made_absolute(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    conf = Configuration({"io.exchange.dir": "store"})
    assert conf.get(ClusterOptions.EXCHANGE_DIR) == str(tmp_path / "store")


def test_the_store_is_a_key_of_the_cluster_not_of_a_job() -> None:
    conf = Configuration({"io.exchange.dir": "/x", "parallelism.default": 2})
    assert conf.job_level() == {"parallelism.default": 2}


def test_a_tree_the_store_refuses_to_remove_is_logged_and_left(
    tmp_path, caplog, monkeypatch
) -> None:
    """What a zombie task still writing into the directory does to the removal (the store
    refuses with ``Directory not empty``): a warning, no error, the files left."""
    from fsspec.implementations.local import LocalFileSystem

    job = tmp_path / "store" / "job"
    path = str(job / "exchange" / "v" / "a" / "f.parquet")
    exchange_store.write_parquet(pa.table({"n": [1]}), path)

    def refuse(self, path, recursive=False, maxdepth=None):  # type: ignore[no-untyped-def]
        raise OSError(39, "Directory not empty", path)

    monkeypatch.setattr(LocalFileSystem, "rm", refuse)
    exchange_store.remove_tree(str(job))
    assert "could not remove all of" in caplog.text
    assert exchange_store.parquet_rows(path) == 1
