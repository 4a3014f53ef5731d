"""InputSchemas: every channel of one input carries the schema of that input's first file."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from millrace.errors import PipelineError
from millrace.runtime.deployment import InputChannelDescriptor
from millrace.spark.input_schemas import InputSchemas
from millrace.types import Address, ResultPartitionId


def channels(*inputs: int) -> list[InputChannelDescriptor]:
    return [
        InputChannelDescriptor(ResultPartitionId(f"p{i}"), 0, Address("tm"), i, side)
        for i, side in enumerate(inputs)
    ]


def write(tmp_path, name: str, **columns: pa.Array) -> str:
    path = tmp_path / f"{name}.parquet"
    pq.write_table(pa.table(columns), path)
    return str(path)


def test_channels_of_one_input_must_agree_on_names_and_types(tmp_path) -> None:
    schemas = InputSchemas(channels(0, 0, 0), "union")
    schemas.check(0, write(tmp_path, "a", k=pa.array(["x"]), n=pa.array([1])))
    schemas.check(1, write(tmp_path, "b", k=pa.array(["y", None]), n=pa.array([2, 3])))
    with pytest.raises(PipelineError, match=r"\(k: string, n: double\) on producer subtask 2"):
        schemas.check(2, write(tmp_path, "c", k=pa.array(["z"]), n=pa.array([1.5])))


def test_the_inputs_of_a_join_each_have_their_own_schema(tmp_path) -> None:
    schemas = InputSchemas(channels(0, 1), "join")
    schemas.check(0, write(tmp_path, "a", k=pa.array(["x"]), n=pa.array([1])))
    schemas.check(1, write(tmp_path, "b", k=pa.array(["y"]), t=pa.array([2.0])))
    assert [f.name for f in schemas.schemas[1]] == ["k", "t"]


def test_only_the_first_file_of_a_channel_is_read(tmp_path) -> None:
    schemas = InputSchemas(channels(0), "union")
    schemas.check(0, write(tmp_path, "a", k=pa.array(["x"])))
    schemas.check(0, str(tmp_path / "missing.parquet"))  # not opened
