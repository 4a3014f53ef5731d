"""TaskManager registration at the ResourceManager (seed 000: RegisterTaskManager and replies).

A TaskExecutor sends ``RegisterTaskManager`` until it gets a reply; the ResourceManager answers
``AcknowledgeRegistration`` the first time, ``AlreadyRegistered`` when the same TaskManager at
the same address registers again, and ``RefuseRegistration`` (with the reason) when it cannot
accept it. Messages are frozen dataclasses of plain fields so any transport can carry them.
"""

from __future__ import annotations

from dataclasses import dataclass

from millrace.runtime.hardware_description import HardwareDescription
from millrace.types import Address, ResourceId

__all__ = [
    "PROTOCOL_VERSION",
    "AcknowledgeRegistration",
    "AlreadyRegistered",
    "RefuseRegistration",
    "RegisterTaskManager",
    "RegistrationResponse",
]

PROTOCOL_VERSION = 1
"""Version of the TaskManager <-> ResourceManager protocol; a mismatch is refused."""


@dataclass(frozen=True)
class RegisterTaskManager:
    """A TaskManager offers itself to the ResourceManager.

    Attributes:
        resource_id: Identity of the TaskManager process.
        address: RPC address of its TaskExecutor endpoint.
        number_of_slots: Slots it offers (>= 1 to be accepted).
        protocol_version: The sender's ``PROTOCOL_VERSION``.
        hardware: Its machine (REST shows it), if the sender told.
    """

    resource_id: ResourceId
    address: Address
    number_of_slots: int
    protocol_version: int = PROTOCOL_VERSION
    hardware: HardwareDescription | None = None


@dataclass(frozen=True)
class AcknowledgeRegistration:
    """Accepted: ``registration_id`` names this registration, ``resource_manager_id`` the RM."""

    registration_id: str
    resource_manager_id: str


@dataclass(frozen=True)
class AlreadyRegistered:
    """The TaskManager was registered before, at the same address; nothing changed."""

    registration_id: str
    resource_manager_id: str


@dataclass(frozen=True)
class RefuseRegistration:
    """Not accepted, for ``reason``; the TaskManager retries after a back-off."""

    reason: str


RegistrationResponse = AcknowledgeRegistration | AlreadyRegistered | RefuseRegistration
