"""Ids and aliases of the runtime: small, hashable, printable.

Ids are random 128-bit hex strings like Flink's ``AbstractID``; ``new()`` makes a fresh one.
"""

from __future__ import annotations

import uuid
from typing import NewType

__all__ = [
    "DEFAULT_LEADER_SESSION_ID",
    "Address",
    "AllocationId",
    "ExecutionAttemptId",
    "JobId",
    "JobMasterId",
    "JobVertexId",
    "ResourceId",
    "ResultPartitionId",
    "new_id",
]

Address = NewType("Address", str)
"""An RPC address, e.g. ``local://minicluster/resourcemanager``."""

JobId = NewType("JobId", str)
JobVertexId = NewType("JobVertexId", str)
ExecutionAttemptId = NewType("ExecutionAttemptId", str)
JobMasterId = NewType("JobMasterId", str)
"""The fencing token of one JobMaster (Flink's JobMasterId): a new one per JobMaster, so that
messages meant for an earlier JobMaster of the same job are refused."""
ResourceId = NewType("ResourceId", str)
"""Identifies a TaskManager process (Flink's ResourceID)."""
AllocationId = NewType("AllocationId", str)
"""Identifies one slot allocation for one job."""
ResultPartitionId = NewType("ResultPartitionId", str)


DEFAULT_LEADER_SESSION_ID = "0" * 32
"""The leader session of a JobManager without high availability: the fencing token of its
Dispatcher and ResourceManager (Flink's HighAvailabilityServices.DEFAULT_LEADER_ID)."""


def new_id() -> str:
    """Return a fresh random 32-hex-digit id."""
    return uuid.uuid4().hex
