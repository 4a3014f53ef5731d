"""InputSchemas: the schema every channel of one input of a multi-input vertex must carry.

The producers of one input (the inputs of a union, or the several sources of one side of a
join) are separate chains; nothing before the first bundle says that their rows agree. The
consumer reads the schema (the Parquet footer: no Spark job) of the first exchange file of each
channel and compares it with the first one of the same input (names and types, not
nullability), so a union of mismatched streams fails at its first bundle with both schemas.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from millrace.errors import PipelineError
from millrace.runtime.deployment import InputChannelDescriptor
from millrace.runtime.io import exchange_store

__all__ = ["InputSchemas", "describe_schema"]


def describe_schema(schema: Any) -> str:
    """``(a: string, b: int64)`` of a ``pyarrow.Schema``."""
    return "(" + ", ".join(f"{f.name}: {f.type}" for f in schema) + ")"


class InputSchemas:
    """Checks the exchange files of every channel against the first of their input.

    Args:
        channels: The consumer's input channels (``input_index`` tells their input).
        task_name: For error messages.

    Threading:
        The task thread only.
    """

    def __init__(self, channels: Sequence[InputChannelDescriptor], task_name: str) -> None:
        self._inputs = [c.input_index for c in channels]
        self._producers = [c.producer_index for c in channels]
        self._task_name = task_name
        self._checked: set[int] = set()
        self.schemas: dict[int, Any] = {}  # input index -> pyarrow.Schema

    def check(self, channel: int, path: str) -> None:
        """Check the file ``path`` that came on ``channel`` (only the first of each channel).

        Raises:
            PipelineError: If its columns or their types differ from the input's first file.
        """
        if channel in self._checked or channel < 0:
            return
        self._checked.add(channel)
        schema = exchange_store.parquet_schema(path).remove_metadata()
        input_index = self._inputs[channel]
        reference = self.schemas.setdefault(input_index, schema)
        same = [(f.name, f.type) for f in schema] == [(f.name, f.type) for f in reference]
        if not same:
            raise PipelineError(
                f"the streams of a union (or of one join input) must have one schema: input "
                f"{input_index} has {describe_schema(reference)} on one producer and "
                f"{describe_schema(schema)} on producer subtask {self._producers[channel]}; "
                "make them equal with transform() (select, cast, withColumnRenamed)",
                self._task_name,
            )
