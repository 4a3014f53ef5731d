"""How deeply the registered control messages can nest in one another, from their type hints."""

from __future__ import annotations

import dataclasses
import enum
import typing

from millrace.runtime.control_messages import CONTROL_MESSAGES


def _registered_in(hint: object, registered: set[type]) -> set[type]:
    supertype = getattr(hint, "__supertype__", None)  # NewType
    if supertype is not None:
        return _registered_in(supertype, registered)
    if isinstance(hint, type) and hint in registered:
        return {hint}
    found: set[type] = set()
    for argument in typing.get_args(hint):
        found |= _registered_in(argument, registered)
    return found


def deepest_control_message() -> tuple[str, int]:
    """``(class name, levels)`` of the control message that nests deepest (itself = 1).

    Raises:
        RecursionError: If a message could contain itself (no bound from the types).
    """
    registered = {cls for _, cls in CONTROL_MESSAGES}
    depths: dict[type, int] = {}

    def depth(cls: type) -> int:
        if cls not in depths:
            if issubclass(cls, enum.Enum):
                depths[cls] = 1
            else:
                hints = typing.get_type_hints(cls)
                inner = [
                    depth(r)
                    for f in dataclasses.fields(cls)
                    for r in _registered_in(hints[f.name], registered)
                ]
                depths[cls] = 1 + max(inner, default=0)
        return depths[cls]

    return max(((c.__name__, depth(c)) for c in registered), key=lambda pair: pair[1])
