"""CheckpointHistory: one record per checkpoint, the newest ten, oldest first."""

from __future__ import annotations

from millrace.runtime.checkpoint.checkpoint_history import CheckpointHistory, CheckpointRecord


def test_a_checkpoint_whose_start_left_the_history_ends_as_a_checkpoint_of_unknown_time() -> None:
    history = CheckpointHistory()
    for checkpoint_id in range(1, 12):  # eleven in flight: the first one's start is dropped
        history.started(checkpoint_id, True, 1000 + checkpoint_id)
    history.ended(1, "FAILED", 40, failure="declined")
    records = history.records()
    assert len(records) == 10
    assert records[-1] == CheckpointRecord(1, "FAILED", False, 0, 40, failure="declined")
    assert records[0] == CheckpointRecord(3, "IN_PROGRESS", True, 1003)
